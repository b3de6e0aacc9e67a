#!/usr/bin/env python3
"""The library exports exactly the symbols its version script lists, each
with the versions the script gives it.

A symbol exported by accident becomes ABI; a listed symbol that is missing
breaks every program linked against it. Both fail this test. A name listed
in several nodes has its default version (name@@NODE) in the last of them
and a compat version (name@NODE, lib/common/symver.h) in each earlier one,
for programs linked before it moved. With the include folder given, a
stable node's (KREWARD_<n>.<m>) default symbols are declared in
include/kreward/*.h and an extension node's (KREWARD_SYS_<n>) in
include/kreward/sys/*.h, never the other way round.
Usage: check_symbols.py LIB MAPFILE [INCLUDE_DIR]"""
import pathlib
import re
import subprocess
import sys

lib, mapfile = sys.argv[1], sys.argv[2]
include = pathlib.Path(sys.argv[3]) if len(sys.argv) > 3 else None

text = re.sub(r"/\*.*?\*/", " ", open(mapfile).read(), flags=re.S)
nodes = []     # (node, [names listed global]) in file order
for m in re.finditer(r"([A-Za-z_][\w.]*)\s*\{(.*?)\}\s*([\w.]*)\s*;", text, re.S):
    node, body = m.group(1), m.group(2)
    names = []
    in_global = False
    for item in re.split(r"[;\s]+", body.replace(":", ": ")):
        if item == "global:":
            in_global = True
        elif item == "local:":
            in_global = False
        elif item and in_global:
            names.append(item)
    nodes.append((node, names))
node_names = [n for n, _ in nodes]
want = {}      # name -> {version: is_default}
for node, names in nodes:
    for name in names:
        want.setdefault(name, {})[node] = False
for name, versions in want.items():
    last = [n for n in node_names if n in versions][-1]
    versions[last] = True

out = subprocess.run(["nm", "-D", "--defined-only", lib], check=True, capture_output=True,
                     text=True).stdout
have = {}      # name -> {version: is_default}
defined_nodes = set()
for line in out.splitlines():
    parts = line.split()
    if len(parts) < 3:
        continue
    kind, sym = parts[1], parts[2]
    if kind == "A" and sym.startswith("KREWARD_"):
        defined_nodes.add(sym)  # version node markers
        continue
    if kind not in "TtDdBbRrVWi":
        continue
    name, at, version = sym.partition("@")
    default = version.startswith("@")
    have.setdefault(name, {})[version.lstrip("@") or "(none)"] = default

problems = []
extra = sorted(set(have) - set(want))
missing = sorted(set(want) - set(have))
if extra:
    problems.append("exported but not in the version script: " + ", ".join(extra))
if missing:
    problems.append("in the version script but not exported: " + ", ".join(missing))
bad = sorted(s for s in have if not s.startswith("kr_"))
if bad:
    problems.append("exported symbols outside the kr_ namespace: " + ", ".join(bad))
for node in node_names:
    if node not in defined_nodes:
        problems.append(f"version node {node} is not defined by the library")


def spell(name, versions):
    return ", ".join(f"{name}{'@@' if d else '@'}{v}" for v, d in sorted(versions.items()))


for name in sorted(set(have) & set(want)):
    if have[name] != want[name]:
        problems.append(f"{name}: exported as {spell(name, have[name])}; "
                        f"the version script wants {spell(name, want[name])}")

if include is not None:
    DECL = re.compile(r"\bKR_API\b[^;{]*?\b(kr_\w+)\s*\(", re.S)
    declared = {}
    for header in sorted((include / "kreward").rglob("*.h")):
        body = re.sub(r"/\*.*?\*/", " ", header.read_text(), flags=re.S)
        for name in DECL.findall(body):
            declared[name] = header.relative_to(include)
    for name, versions in sorted(want.items()):
        node = [v for v, d in versions.items() if d][0]
        header = declared.get(name)
        sys_node = node.startswith("KREWARD_SYS_")
        if header is None:
            problems.append(f"{name} ({node}): no public header declares it")
        elif sys_node != (header.parts[:2] == ("kreward", "sys")):
            where = "include/kreward/sys/" if sys_node else "include/kreward/ (not sys/)"
            problems.append(f"{name} ({node}): declared in {header}, belongs in {where}")

for p in problems:
    print(p)
if problems:
    sys.exit(1)
compat = sorted(f"{n}@{v}" for n, vs in want.items() for v, d in vs.items() if not d)
counts = ", ".join(f"{node} {sum(1 for vs in want.values() if vs.get(node))}"
                   for node in node_names)
print(f"{len(have)} symbols exported as {mapfile} lists them (defaults: {counts}); "
      f"compat versions: {', '.join(compat) or 'none'}")
