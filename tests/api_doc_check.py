#!/usr/bin/env python3
"""unit: docs/api.md lists every public function of include/kreward/*.h and
include/kreward/sys/*.h under its header's heading ("### common.h",
"### sys/sandbox.h" in "## Functions by header"), and lists none that no
header declares. Usage: api_doc_check.py SOURCE_ROOT"""
import pathlib
import re
import sys

root = pathlib.Path(sys.argv[1])
# KR_API <return type> kr_name( ... : every exported function
DECL = re.compile(r"\bKR_API\b[^;{]*?\b(kr_\w+)\s*\(", re.S)
declared = {}
include = root / "include" / "kreward"
for header in sorted([*include.glob("*.h"), *include.glob("sys/*.h")]):
    text = re.sub(r"/\*.*?\*/", " ", header.read_text(), flags=re.S)  # comments mention calls
    names = DECL.findall(text)
    if names:
        declared[header.relative_to(include).as_posix()] = names

doc = (root / "docs" / "api.md").read_text()
if "\n## Functions by header\n" not in doc:
    sys.exit("docs/api.md: no '## Functions by header' section")
reference = doc.split("\n## Functions by header\n", 1)[1].split("\n## ", 1)[0]
sections = {}
for part in re.split(r"^### ", reference, flags=re.M)[1:]:
    title, _, body = part.partition("\n")
    sections[title.strip()] = body

problems = []
for header, names in declared.items():
    body = sections.get(header)
    if body is None:
        problems.append(f"{header}: no '### {header}' section")
        continue
    for name in names:
        if not re.search(r"`" + name + r"\b", body):
            problems.append(f"{header}: {name} is not listed")
for title, body in sections.items():
    if title not in declared:
        problems.append(f"'### {title}': no such header with public functions")
        continue
    for name in set(re.findall(r"`(kr_\w+)\(", body)):
        if name not in declared[title]:
            problems.append(f"'### {title}': {name} is not a public function of {title}")
for p in problems:
    print("docs/api.md:", p)
total = sum(len(n) for n in declared.values())
if problems:
    sys.exit(f"api_doc_check: {len(problems)} problems ({total} public functions)")
print(f"api_doc_check: all {total} public functions of {len(declared)} headers are in docs/api.md")
