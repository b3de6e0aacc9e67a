#!/usr/bin/env python3
"""Identical code, timed as the ModelNew runner times a candidate against its
baseline: is a speedup far from 1 noise or a systematic cause?

On the H200 (dee1e1e) four multi-kernel corpus models, each evaluated as its
own candidate, came out at 0.74-1.33x (docs/kernelbench.md, "Open"). This
repeats such evaluations on one Runner per problem and prints, per run, the
speedup and both sides' batches (median [min, max] per-call us), and the
baseline alone timed by `Runner.baseline_us` before and after the runs (the
same worker, no candidate: how far the baseline drifts by itself).

Reading it: speedups that scatter around 1 from run to run are noise (more or
longer batches help); speedups that stay off 1 in every run, with tight
batches on each side, are systematic (the two processes run different
kernels or allocations: compare `kernels` in the JSON); a baseline that
drifts between before and after is the GPU or host changing under the
measurement (bracketing the candidate would cancel it). "luck" is the
candidate's worker's launch time over the baseline's worker's, each
measured before any candidate code (results' launch_luck): speedups that
follow 1/luck are the processes' luck (91af0ed: fresh identical processes
launched 1.44x apart), which more batches cannot remove.

    KREWARD_LIBRARY=build/lib/libkreward.so.1 PYTHONPATH=bindings/python \\
        python3 bench/kernelbench_timing_noise.py [--repeats 3] [--problems level2/02 ...] [--json out.json]

Without a GPU it says so and exits 0 (--device cpu runs it on the CPU)."""
import argparse
import json
import pathlib
import sys
import time

from cuda_or_skip import cuda_torch

ROOT = pathlib.Path(__file__).resolve().parents[1]
KB = ROOT / "examples" / "kernelbench"
sys.path.insert(0, str(ROOT / "bindings" / "python"))

# the four outside [0.85, 1.15] at dee1e1e, and two single-kernel controls
DEFAULT_PROBLEMS = ("level2/02_conv2d_relu_bias_add", "level2/04_gemm_gelu_softmax",
                    "level2/05_conv_bn_relu", "level3/02_residual_block", "level1/01_relu",
                    "level1/13_matmul_square")


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--problems", nargs="*", default=list(DEFAULT_PROBLEMS),
                   help="corpus problems (level/name, without .py)")
    p.add_argument("--repeats", type=int, default=3, help="evaluations per problem")
    p.add_argument("--device", default="cuda")
    p.add_argument("--budget-s", type=float, default=400.0,
                   help="start no problem after this many seconds")
    p.add_argument("--batches", type=int, default=5, help="timed batches a side (evaluate's)")
    p.add_argument("--batch-ms", type=float, default=10.0, help="a timed batch's length (Runner's)")
    p.add_argument("--json", help="write every run to this file")
    return p.parse_args(argv)


def spread(xs):
    """'median [min, max]' of per-call us."""
    if not xs:
        return "-"
    s = sorted(xs)
    return f"{s[len(s) // 2]:.1f} [{s[0]:.1f}, {s[-1]:.1f}]"


def row_text(problem, run, res):
    b = res.get("batches_us", {})
    sp = res.get("speedup")
    ev = res.get("event_us")
    ratio = ev / res["time_us"] if ev and res.get("time_us") else None
    # the candidate's process's launch time over the baseline's, measured
    # before any candidate code: does the speedup follow it?
    luck = res.get("launch_luck")
    return (f"{problem:34s} {run:>3}  {res['verdict']:6s} "
            f"{(f'{sp:.3f}' if sp else '-'):>7}  cand {spread(b.get('candidate')):28s} "
            f"base {spread(b.get('baseline')):28s} events/clock {(f'{ratio:.2f}' if ratio else '-')}"
            f"  luck {(f'{luck:.2f}' if luck else '-')}")


def main(argv=None):
    args = parse_args(argv)
    if args.device != "cpu" and cuda_torch("kernelbench_timing_noise") is None:
        return 0
    from kreward.kernelbench import import_problem
    from kreward.kernelbench.runner import Runner

    t0 = time.perf_counter()
    out = []
    for problem in args.problems:
        if time.perf_counter() - t0 > args.budget_s:
            print(f"{problem}: not run (past --budget-s)")
            continue
        path = KB / f"{problem}.py"
        src = path.read_text() + "\nModelNew = Model\n"
        # no spare worker: its start (torch's import) would share the CPU
        # with the baseline timed right after an evaluation; no baseline
        # memo: every run's baseline timed in full, the noise measured is
        # each run's own
        with Runner(import_problem(str(path)), args.device, spare=False,
                    batch_ms=args.batch_ms, baseline_memo=False) as runner:
            before = runner.baseline_us(batches=args.batches)
            runs = []
            for i in range(args.repeats):
                res = runner.evaluate(src, seed=i + 1, batches=args.batches)
                runs.append({k: res.get(k) for k in ("verdict", "feedback", "speedup", "time_us",
                                                     "baseline_us", "event_us", "calls",
                                                     "batches_us", "phases_s", "ops_s", "kernels",
                                                     "launch_us", "launch_luck", "kernel_share")})
                print(row_text(problem, i, res), flush=True)
            after = runner.baseline_us(batches=args.batches)
        print(f"{problem:34s} baseline alone: before {before:.1f} us, after {after:.1f} us "
              f"({after / before:.3f}x)", flush=True)
        out.append({"problem": problem, "runs": runs, "baseline_alone_before_us": before,
                    "baseline_alone_after_us": after})
    speedups = [r["speedup"] for p in out for r in p["runs"] if r.get("speedup")]
    if speedups:
        far = sum(1 for s in speedups if not 0.85 <= s <= 1.15)
        print(f"{len(speedups)} runs: speedup {min(speedups):.3f}-{max(speedups):.3f}, "
              f"{far} outside [0.85, 1.15]")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
