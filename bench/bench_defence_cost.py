#!/usr/bin/env python3
"""What the reward-integrity defences cost: wall time per evaluation of the
same honest candidates, in process, with the "fast" preset, by the library
before the defences (commit 324416e) and by this tree, in the same run.

Each library runs in its own subprocess (one ctypes library per process, and
the two bindings are both called `kreward`), warms up once per problem (the
compile cache, the reference's compile, the CUDA context), then evaluates
each candidate REPS times and reports the median wall per evaluation. Three
problems of growing work stand for three sizes.

usage: bench_defence_cost.py --old ROOT:LIB --new ROOT:LIB [--reps N]
  ROOT: a source tree (its examples/ and bindings/python/), LIB: its built
  libkreward.so. Prints a table and the ratio new/old; exits 1 when the
  fast preset's added wall exceeds the 10 % target on any size.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

PROBLEMS = [  # (label, problem directory, candidate): small, medium, large
    ("small: vector add", "l1_vector_add", "fast.cu"),
    ("medium: softmax", "l2_softmax", "fast.cu"),
    ("large: matmul f32", "l4_matmul_f32", "fast.cu"),
]
TARGET = 1.10

CHILD = r"""
import inspect, json, os, sys, time
import kreward
root, reps = sys.argv[1], int(sys.argv[2])
kw = {"preset": "fast"}
# the tree before the defences has no pool; this one's Evaluator is isolated
# by default: in process on both sides, so only the defences differ
if "isolated" in inspect.signature(kreward.Evaluator.__init__).parameters:
    kw["isolated"] = False
out = []
with kreward.Evaluator(**kw) as ev:
    for label, pdir, cand in json.loads(sys.argv[3]):
        base = os.path.join(root, "examples", "problems", pdir)
        src = open(os.path.join(base, "candidates", cand)).read()
        prob = os.path.join(base, "problem.json")  # a path: both Evaluators cache it
        first = ev.evaluate(prob, src)
        walls = []
        for _ in range(reps):
            t = time.perf_counter()
            r = ev.evaluate(prob, src)
            walls.append(time.perf_counter() - t)
        out.append({"label": label, "walls": walls, "verdict": r.verdict,
                    "first_verdict": first.verdict})
print("BENCH-JSON " + json.dumps(out))
"""


def run_side(spec, reps):
    root, lib = spec.split(":", 1)
    env = dict(os.environ, KREWARD_LIBRARY=lib,
               PYTHONPATH=os.path.join(root, "bindings", "python"))
    env.pop("KREWARD_IN_PROCESS", None)
    p = subprocess.run([sys.executable, "-c", CHILD, root, str(reps), json.dumps(PROBLEMS)],
                       env=env, capture_output=True, text=True, timeout=900)
    for line in p.stdout.splitlines():
        if line.startswith("BENCH-JSON "):
            return json.loads(line[len("BENCH-JSON "):])
    sys.exit(f"{spec}: no result (exit {p.returncode})\n{p.stdout[-2000:]}\n{p.stderr[-4000:]}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--old", required=True)
    ap.add_argument("--new", required=True)
    ap.add_argument("--reps", type=int, default=15)
    a = ap.parse_args()
    old, new = run_side(a.old, a.reps), run_side(a.new, a.reps)
    print(f"{'problem':<20} {'verdict old/new':<18} {'old ms':>9} {'new ms':>9} "
          f"{'new/old':>8}  (median wall per evaluation, {a.reps} reps, preset fast, in process)")
    worst = 0.0
    for o, n in zip(old, new):
        mo, mn = statistics.median(o["walls"]) * 1e3, statistics.median(n["walls"]) * 1e3
        ratio = mn / mo
        worst = max(worst, ratio)
        print(f"{o['label']:<20} {o['verdict'] + '/' + n['verdict']:<18} {mo:9.1f} {mn:9.1f} "
              f"{ratio:7.2f}x")
    ok = worst <= TARGET and all(o["verdict"] == "passed" and n["verdict"] == "passed"
                                 for o, n in zip(old, new))
    print(f"worst ratio {worst:.2f}x (target <= {TARGET:.2f}x): {'met' if ok else 'NOT met'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
