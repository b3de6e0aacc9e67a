#!/usr/bin/env python3
"""Sums the KR_PROFILE lines (lib/engine/evaluate.c) of a log into a table:
per verdict and problem, the mean milliseconds of each phase and engine
counter, and the mean number of stream waits per evaluation.

    KR_PROFILE=1 build/bench/bench_pool ... 2> pool.err
    python3 scripts/profile_summary.py pool.err
"""
import collections
import re
import sys

LINE = re.compile(r"kreward profile: (\S+) (\S+): total ([\d.]+) ms;(.*)")
PAIR = re.compile(r"([a-z_]+) ([\d.]+)")
WAITS = re.compile(r"(\d+) waits")


def summarize(lines):
    groups = collections.OrderedDict()
    for line in lines:
        m = LINE.search(line)
        if not m:
            continue
        key = (m.group(1), m.group(2))
        g = groups.setdefault(key, collections.Counter())
        g["n"] += 1
        g["total"] += float(m.group(3))
        rest = m.group(4)
        w = WAITS.search(rest)
        if w:
            g["waits"] += int(w.group(1))
            rest = rest[:w.start()]
        for name, value in PAIR.findall(rest):
            g[name] += float(value)
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
        cols += [k for k in g if k not in ("n",) and k not in cols]
    print("| verdict | problem | n | " + " | ".join(cols) + " |")
    print("|---" * (3 + len(cols)) + "|")
    for (verdict, problem), g in groups.items():
        n = g["n"]
        print(f"| {verdict} | {problem} | {n} | " +
              " | ".join(f"{g[c] / n:.2f}" for c in cols) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
