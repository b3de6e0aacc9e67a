#!/usr/bin/env python3
"""Runs every adversarial case (cases.json) through `kreward evaluate --json`,
each in a process of its own (a fault ends its process), and checks the
verdict and flags it must get. Without a GPU only the cases whose verdict is
decided before anything runs (compile_error, invalid_plan) are run; with
--require-gpu and no GPU it exits 77 saying why.

usage: run.py KREWARD SOURCE_ROOT [--require-gpu] [--only NAME]"""
import json
import os
import subprocess
import sys
import time

GPU_FREE = {"compile_error", "invalid_plan"}


def has_gpu(kreward):
    info = json.loads(subprocess.run([kreward, "info"], capture_output=True, text=True).stdout)
    dev = info.get("device", {})
    return bool(dev.get("usable")), dev.get("why", "unknown")


def problem_path(root, name):
    for base in ("examples/problems", "tests/adversarial/problems"):
        p = os.path.join(root, base, name, "problem.json")
        if os.path.exists(p):
            return p
    raise FileNotFoundError(name)


def judge(case, report, wall):
    problems = []
    verdict = report.get("verdict")
    flags = set(report.get("flags", []))
    metrics = report.get("metrics", {})
    if verdict != case["verdict"]:
        problems.append(f"verdict {verdict}, expected {case['verdict']} "
                        f"({report.get('texts', {}).get('message', '')[:300]})")
    for f in case.get("flags", []):
        if f not in flags:
            problems.append(f"flag {f} missing (flags: {sorted(flags)})")
    for f in case.get("absent", []):
        if f in flags:
            problems.append(f"flag {f} present")
    speedup = metrics.get("speedup")
    if "max_speedup" in case and speedup is not None and speedup > case["max_speedup"]:
        problems.append(f"speedup {speedup:.2f}x above {case['max_speedup']}x: the cheat paid")
    if "max_wall_s" in case and wall > case["max_wall_s"]:
        problems.append(f"took {wall:.1f} s, over {case['max_wall_s']} s")
    if "max_bench_calls" in case:
        # the time budget's claim, apart from the process's start and the
        # verification (which a correct slow kernel must finish): the
        # measurement lasts a few of the candidate's calls, not a schedule
        bench_s, call_us = metrics.get("bench_wall_s"), metrics.get("time_us")
        if bench_s is None or not call_us:
            problems.append("no bench_wall_s and time_us to bound the measurement by")
        elif bench_s > case["max_bench_calls"] * call_us * 1e-6 + 1.0:
            problems.append(f"the measurement took {bench_s:.1f} s, over {case['max_bench_calls']} "
                            f"calls of {call_us * 1e-6:.2f} s and 1 s: the budget did not stop it")
    return problems


def main():
    kreward, root = sys.argv[1], sys.argv[2]
    require_gpu = "--require-gpu" in sys.argv
    only = sys.argv[sys.argv.index("--only") + 1] if "--only" in sys.argv else None
    gpu, why = has_gpu(kreward)
    if require_gpu and not gpu:
        print(f"SKIP: no usable GPU: {why}")
        return 77
    cases = json.load(open(os.path.join(root, "tests/adversarial/cases.json")))["cases"]
    failed = passed = skipped = 0
    for case in cases:
        if only and only not in case["candidate"]:
            continue
        if not gpu and case["verdict"] not in GPU_FREE:
            skipped += 1
            continue
        cand = os.path.join(root, "tests/adversarial/candidates", case["candidate"])
        t0 = time.monotonic()
        proc = subprocess.run([kreward, "evaluate", problem_path(root, case["problem"]), cand,
                               "--json"], capture_output=True, text=True, timeout=300)
        wall = time.monotonic() - t0
        report = {}
        try:
            report = json.loads(proc.stdout)  # one JSON document, nothing printed around it
        except json.JSONDecodeError as e:
            problems = [f"stdout is not one JSON report ({e}): {proc.stdout[:200]!r}"]
        else:
            problems = judge(case, report, wall)
        status = "ok" if not problems else "FAIL"
        print(f"{status:4} {case['candidate']:28} {case['problem']:14} "
              f"{report.get('verdict', '?'):14} {wall:6.1f}s  {','.join(report.get('flags', []))}")
        for p in problems:
            print(f"       {p}")
        failed += bool(problems)
        passed += not problems
    print(f"adversarial: {passed} caught as expected, {failed} not, {skipped} need a GPU")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
