#!/usr/bin/env python3
"""The library exports exactly the symbols its version script lists.

A symbol exported by accident becomes ABI; a listed symbol that is missing
breaks every program linked against it. Both fail this test."""
import re
import subprocess
import sys

lib, mapfile = sys.argv[1], sys.argv[2]
listed = set()
in_global = False
for line in open(mapfile):
    line = re.sub(r"/\*.*?\*/", "", line).strip()
    if line.startswith("global:"):
        in_global = True
    elif line.startswith("local:") or line.startswith("}"):
        in_global = False  # "} KREWARD_1.0;" ends a node that inherits another
    elif in_global and line.endswith(";"):
        listed.add(line[:-1].strip())

out = subprocess.run(["nm", "-D", "--defined-only", lib], check=True, capture_output=True,
                     text=True).stdout
exported = set()
for line in out.splitlines():
    parts = line.split()
    if len(parts) >= 3 and parts[1] in "TtDdBbRrVWi":
        name = parts[2].split("@")[0]
        if name.startswith("KREWARD_"):
            continue  # version node markers
        exported.add(name)

extra = sorted(exported - listed)
missing = sorted(listed - exported)
if extra:
    print("exported but not in the version script:", ", ".join(extra))
if missing:
    print("in the version script but not exported:", ", ".join(missing))
bad = [s for s in exported if not s.startswith("kr_")]
if bad:
    print("exported symbols outside the kr_ namespace:", ", ".join(sorted(bad)))
if extra or missing or bad:
    sys.exit(1)
print(f"{len(exported)} symbols exported, all listed in {mapfile}")
