#!/usr/bin/env python3
"""unit: every #include "..." in lib/ keeps to the dependency order of
lib/README.md, the one place it is written. The table under "## Folders, in
dependency order" lists the folders in order, each with what it may include:
"nothing", "all above" (every folder listed before it) or a comma list of
folders listed before it. A file includes its own folder's headers, those its
folder's row allows, the public headers (kreward/...) and generated headers
(NAME whose template lib/FOLDER/NAME.in is in an allowed folder). Anything
else fails, named by file, line and rule; so does a folder of lib/ that the
table does not list. Usage: layers_check.py SOURCE_ROOT"""
import pathlib
import re
import sys

root = pathlib.Path(sys.argv[1]).resolve()
lib = root / "lib"
readme = lib / "README.md"
HEADING = "## Folders, in dependency order"

text = readme.read_text()
if "\n" + HEADING + "\n" not in text:
    sys.exit(f"lib/README.md: no '{HEADING}' section")
section = text.split("\n" + HEADING + "\n", 1)[1].split("\n## ", 1)[0]

order = []    # folders, in the order the table lists them
allowed = {}  # folder -> the other folders it may include
problems = []
for n, line in enumerate(section.splitlines(), 1):
    cells = [c.strip() for c in line.strip().strip("|").split("|")]
    if not line.startswith("|") or len(cells) != 3 or cells[0] in ("folder", "") or \
            set(cells[0]) <= set("-: "):
        continue
    folder, _, may = cells
    if folder in allowed:
        problems.append(f"lib/README.md: {folder} is listed twice")
        continue
    if may == "nothing":
        allowed[folder] = set()
    elif may == "all above":
        allowed[folder] = set(order)
    else:
        names = {m.strip() for m in may.split(",")}
        later = sorted(names - set(order))
        if later:
            problems.append(f"lib/README.md: {folder} may include {', '.join(later)}, "
                            f"not listed before it")
        allowed[folder] = names & set(order)
    order.append(folder)
if not order:
    sys.exit(f"lib/README.md: no folders in the '{HEADING}' table")

for d in sorted(p.name for p in lib.iterdir() if p.is_dir() and any(p.rglob("*.*"))):
    if d not in allowed:
        problems.append(f"lib/{d}/: a folder lib/README.md does not list")

# generated headers: NAME from lib/FOLDER/NAME.in
generated = {p.name[:-3]: p.relative_to(lib).parts[0] for p in lib.glob("*/*.in")}
INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"')


def rule(folder):
    ok = [f for f in order if f in allowed.get(folder, ())]
    return f"{folder} may include {', '.join(ok) if ok else 'no other folder'} (lib/README.md)"


files = 0
for path in sorted(lib.rglob("*")):
    if path.suffix not in (".c", ".h", ".cuh") or not path.is_file():
        continue
    files += 1
    rel = path.relative_to(root)
    folder = path.relative_to(lib).parts[0]
    if folder not in allowed:
        continue  # reported once, above
    for n, line in enumerate(path.read_text().splitlines(), 1):
        m = INCLUDE.match(line)
        if not m:
            continue
        name = m.group(1)
        if name.startswith("kreward/"):
            continue  # the public API
        if "/" in name:
            target = name.split("/", 1)[0]
        elif (path.parent / name).exists():
            target = folder
        elif name in generated:
            target = generated[name]
        else:
            problems.append(f"{rel}:{n}: includes \"{name}\": not a header of a lib/ folder")
            continue
        if target == folder or target in allowed[folder]:
            continue
        if target not in allowed:
            problems.append(f"{rel}:{n}: includes \"{name}\": {target} is not a folder "
                            f"lib/README.md lists")
        elif order.index(target) > order.index(folder):
            problems.append(f"{rel}:{n}: includes \"{name}\": {target} is listed after "
                            f"{folder}; {rule(folder)}")
        else:
            problems.append(f"{rel}:{n}: includes \"{name}\": {rule(folder)}")

for p in problems:
    print(p)
if problems:
    sys.exit(f"layers_check: {len(problems)} problems")
print(f"layers_check: {files} files in {len(order)} folders keep lib/README.md's order: "
      + " < ".join(order))
