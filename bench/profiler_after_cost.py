#!/usr/bin/env python3
"""Does a torch.profiler session slow the launches that come after it?

The ModelNew runner profiles one call of the candidate (kineto, CUPTI) to
attribute its kernels, after its timed batches: if profiling left CUPTI's
callbacks in place, a candidate profiled first would be timed with a
tax the baseline does not pay. Moving the attribution before the timing
would bring the candidate's and the baseline's batches seconds closer
(16b7c39: attribute took 3.7-5.5 s between them, and the host's speed
drifts; docs/kernelbench.md, "timing noise"). This answers whether that
order is fair: a launch-bound chain of small ops timed, then (a) a
profiler session and timed again, (b) in a fresh process, nothing and
timed again (the noise floor).

On the H200 at 58014c7: after a profiler session 1.065x, 1.306x and 1.554x
in three processes, after nothing 0.961-1.095x: the tax is real, so the
attribution stays after the timed batches.

    python3 bench/profiler_after_cost.py [--calls 300] [--ops 40]

Needs a GPU and torch (else it says so and exits 0)."""
import argparse
import json
import subprocess
import sys

from cuda_or_skip import cuda_torch

CHILD = r"""
import json, statistics, sys, time
import torch
calls, ops, profile_between = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3] == "1"
x = torch.randn(256, 256, device="cuda")

def f(x):
    for _ in range(ops):
        x = x * 1.0001 + 0.0001
    return x

def per_call_us():
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(calls):
        f(x)
    torch.cuda.synchronize()
    return (time.perf_counter() - t) * 1e6 / calls

for _ in range(3):
    per_call_us()  # warm: lazy initialisation, clocks
before = statistics.median(per_call_us() for _ in range(7))
if profile_between:
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CUDA]):
        f(x)
        torch.cuda.synchronize()
after = statistics.median(per_call_us() for _ in range(7))
print(json.dumps({"before_us": before, "after_us": after}))
"""


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--calls", type=int, default=300)
    p.add_argument("--ops", type=int, default=40, help="small ops a call (launch-bound)")
    p.add_argument("--repeats", type=int, default=3, help="processes of each kind")
    args = p.parse_args(argv)
    if cuda_torch("profiler_after_cost") is None:
        return 0
    print("| way | run | before us/call | after us/call | after/before |")
    print("|---|---|---|---|---|")
    ratios = {"profiler": [], "nothing": []}
    for i in range(args.repeats):
        for kind, flag in (("profiler", "1"), ("nothing", "0")):
            out = subprocess.run([sys.executable, "-c", CHILD, str(args.calls), str(args.ops), flag],
                                 capture_output=True, text=True, timeout=300)
            if out.returncode:
                print(f"| {kind} | {i} | failed: {out.stderr.strip()[-200:]} | | |")
                continue
            r = json.loads(out.stdout.strip().splitlines()[-1])
            ratio = r["after_us"] / r["before_us"]
            ratios[kind].append(ratio)
            print(f"| {kind} | {i} | {r['before_us']:.1f} | {r['after_us']:.1f} | {ratio:.3f}x |")
    for kind, rs in ratios.items():
        if rs:
            print(f"{kind} between: after/before {min(rs):.3f}-{max(rs):.3f}x over {len(rs)} processes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
