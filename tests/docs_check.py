#!/usr/bin/env python3
"""unit: the documentation stays inside the repository. Every relative link
in README.md, CHANGELOG.md, lib/README.md, docs/*.md and
bindings/python/README.md names a file or directory of the repository (and
an anchor, where given, a heading of the linked page), and no page points at
notes kept elsewhere ("field notes", ../shared). Usage: docs_check.py SOURCE_ROOT"""
import pathlib
import re
import sys

root = pathlib.Path(sys.argv[1]).resolve()
pages = [root / "README.md", root / "CHANGELOG.md", root / "lib/README.md",
         root / "bindings/python/README.md",
         *sorted((root / "docs").glob("*.md"))]
LINK = re.compile(r"\]\(([^)\s]+)\)")
OUTSIDE = re.compile(r"field notes|\.\./shared|shared/(docs|device)/", re.I)


def anchors(page):
    """GitHub's anchors of a page's headings: lower case, punctuation gone,
    spaces to hyphens."""
    out = set()
    for line in page.read_text().splitlines():
        if line.startswith("#"):
            title = line.lstrip("#").strip().lower()
            out.add(re.sub(r"\s", "-", re.sub(r"[^\w\s-]", "", title)))
    return out


problems = []
for page in pages:
    if not page.exists():
        continue
    rel = page.relative_to(root)
    text = page.read_text()
    for n, line in enumerate(text.splitlines(), 1):
        if OUTSIDE.search(line):
            problems.append(f"{rel}:{n}: refers to notes outside the repository: {line.strip()}")
    for target in LINK.findall(text):
        if re.match(r"[a-z]+:", target):  # http:, https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        if root not in dest.parents and dest != root:
            problems.append(f"{rel}: link '{target}' leaves the repository")
        elif not dest.exists():
            problems.append(f"{rel}: link '{target}': no such file")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            problems.append(f"{rel}: link '{target}': no heading '{anchor}' there")
for p in problems:
    print(p)
if problems:
    sys.exit(f"docs_check: {len(problems)} problems")
print(f"docs_check: {len(pages)} pages, every link inside the repository")
