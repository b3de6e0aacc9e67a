#!/usr/bin/env python3
"""Sums the KR_PROFILE lines (lib/evaluate/evaluate.c) of a log into a table:
per verdict and problem, the median milliseconds of each phase and engine
counter, stream waits and megabytes generated per evaluation (medians: a
worker's first evaluation of a problem pays for its soundness check).

    KR_PROFILE=1 build/bench/bench_pool ... 2> pool.err
    python3 scripts/profile_summary.py pool.err
"""
import collections
import re
import statistics
import sys

LINE = re.compile(r"kreward profile: (\S+) (\S+): total ([\d.]+) ms;(.*)")
PAIR = re.compile(r"([a-z_]+) ([\d.]+)")
WAITS = re.compile(r"(\d+) waits(?:, ([\d.]+) MB generated)?")


def summarize(lines):
    groups = collections.OrderedDict()
    for line in lines:
        m = LINE.search(line)
        if not m:
            continue
        key = (m.group(1), m.group(2))
        g = groups.setdefault(key, collections.defaultdict(list))
        g["total"].append(float(m.group(3)))
        rest = m.group(4)
        w = WAITS.search(rest)
        if w:
            g["waits"].append(int(w.group(1)))
            if w.group(2):
                g["MB"].append(float(w.group(2)))
            rest = rest[:w.start()]
        for name, value in PAIR.findall(rest):
            g[name].append(float(value))
    return groups


def main(paths):
    lines = []
    for p in paths or ["-"]:
        lines += (sys.stdin if p == "-" else open(p, errors="replace")).readlines()
    groups = summarize(lines)
    if not groups:
        print("no KR_PROFILE lines")
        return 1
    cols = []
    for g in groups.values():
        cols += [k for k in g if k not in cols]
    print("| verdict | problem | n | " + " | ".join(cols) + " |")
    print("|---" * (3 + len(cols)) + "|")
    for (verdict, problem), g in groups.items():
        print(f"| {verdict} | {problem} | {len(g['total'])} | " +
              " | ".join(f"{statistics.median(g[c]):.2f}" if g.get(c) else "" for c in cols) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
