"""Tunes the GEMM and the softmax of examples/tune with PPO, random and
exhaustive (grid-order) search at equal evaluation budgets, on one GPU, and
prints a table: best configuration, its speedup over the problem's
reference, evaluations, GPU runs, refusals, and wall time per evaluation.
A last row per kernel is the exhaustive search over the whole space, the
true best the others are measured against (percent of best).

    python3 examples/tune/compare.py                  # both kernels, on GPU 0
    python3 examples/tune/compare.py --kernel gemm --budget 24 --json gemm.json
    python3 examples/tune/compare.py --synthetic      # no GPU: made-up speedups

Every row gets a fresh environment (no memo shared between strategies) on
one shared pool; the compile cache is shared, so rows after the first find
their compiles cached (the full exhaustive row runs first, so every
strategy row is equally warm). --synthetic replaces the GPU by a synthetic
backend (speedups from a formula; the table says so): a dry run of the
script, the spaces and the checks, not a measurement."""
import argparse
import json
import math
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "bindings", "python"))

import kreward  # noqa: E402
from kreward import tune  # noqa: E402

KERNELS = {
    "gemm": dict(source="gemm.cu", problem="examples/problems/l4_matmul_f32/problem.json",
                 knobs={"BM": [64, 128, 256], "BN": [64, 128, 256], "BK": [8, 16, 32],
                        "TM": [4, 8], "TN": [4, 8]},
                 constraints=[], budget=24),
    "softmax": dict(source="softmax.cu", problem="examples/problems/l2_softmax/problem.json",
                    knobs={"THREADS": [32, 64, 128, 256, 512, 1024], "ROWS": [1, 2, 4, 8],
                           "ONLINE": [0, 1]},
                    constraints=["THREADS % (32 * ROWS) == 0"], budget=12),
}


def synthetic_speed(knobs):
    """A made-up landscape for --synthetic: a peak per knob, in log2 of its
    value, at a place that depends on the knob's name."""
    return 1.0 + sum(1.0 / (1.0 + abs(math.log2(v) - 2 - len(k) % 5)) for k, v in knobs.items()
                     if isinstance(v, int) and v > 0)


def make_kernel(name):
    spec = KERNELS[name]
    with open(os.path.join(HERE, spec["source"])) as f:
        source = f.read()
    # the default file name (candidate.cu), as the pool's jobs have: the
    # check's compile and the pool's then have the same options and text
    return tune.CudaKernel(source, spec["knobs"], os.path.join(ROOT, spec["problem"]),
                           spec["constraints"])


def one_row(name, strategy, budget, backend, args):
    env = tune.TuneEnv(make_kernel(name), backend=backend)
    try:
        result = tune.run(env, strategy, budget, args.batch, args.seed)
    finally:
        env.close()
    return result


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kernel", choices=["gemm", "softmax", "all"], default="all")
    ap.add_argument("--budget", type=int, default=None,
                    help="evaluations per strategy (default: gemm 24, softmax 12)")
    ap.add_argument("--batch", type=int, default=4, help="configurations per step (one batch)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--gpus", default="0", help="the pool's GPUs (default: one, GPU 0)")
    ap.add_argument("--no-full", action="store_true", help="skip the whole-space exhaustive row")
    ap.add_argument("--strategies", default="ppo,random,grid")
    ap.add_argument("--synthetic", action="store_true", help="no GPU: made-up speedups")
    ap.add_argument("--json", help="also write the rows here")
    args = ap.parse_args()

    if args.synthetic:
        from kreward.tune.synthetic import SyntheticBackend
        backend = SyntheticBackend(synthetic_speed)
    else:
        backend = kreward.Evaluator(reward="makora", gpus=args.gpus, require_gpu=True)
    rows = []
    try:
        for name in (["gemm", "softmax"] if args.kernel == "all" else [args.kernel]):
            budget = args.budget or KERNELS[name]["budget"]
            kernel = make_kernel(name)
            space = kernel.space
            with kreward.Context(no_device=True) as ctx:
                valid = len(space.valid(kernel.cases(ctx)))  # the points the constraints allow
            runs = []
            if not args.no_full:
                runs.append(("exhaustive (all)", "grid", valid))
            for s in args.strategies.split(","):
                runs.append((s if s != "grid" else "exhaustive (grid order)", s, budget))
            full_best = None
            for label, strategy, b in runs:
                t0 = time.perf_counter()
                try:
                    r = one_row(name, strategy, b, backend, args)
                except ImportError as e:  # ppo without torch
                    rows.append(dict(kernel=name, strategy=label, skipped=str(e)))
                    continue
                row = dict(kernel=name, strategy=label, budget=b, space=space.size,
                           evaluations=r.evaluations, gpu_runs=r.gpu_runs, refused=r.refused,
                           best=r.best, speedup=r.speedup,
                           wall_per_eval_s=r.wall_per_eval_s,
                           wall_per_gpu_eval_s=r.wall_per_gpu_eval_s,
                           wall_s=time.perf_counter() - t0)
                if label == "exhaustive (all)":
                    full_best = r.speedup
                row["pct_of_best"] = (100.0 * r.speedup / full_best
                                      if full_best and r.speedup else None)
                rows.append(row)
                print(f"# {name} {label}: {r.summary()}", file=sys.stderr, flush=True)
    finally:
        backend.close()
    print_table(rows, args)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": None if args.synthetic else device_name(), "synthetic":
                       args.synthetic, "rows": rows}, f, indent=1)


def device_name():
    with kreward.Context() as ctx:
        return ctx.info().get("device", {}).get("name")


def fmt(v, spec):
    return "-" if v is None else format(v, spec)


def print_table(rows, args):
    if args.synthetic:
        print("SYNTHETIC speedups (--synthetic): nothing below was measured")
    head = ("kernel", "strategy", "evals", "GPU runs", "refused", "best config", "speedup",
            "% of best", "wall/eval s")
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for r in rows:
        if "skipped" in r:
            print(f"| {r['kernel']} | {r['strategy']} | skipped: {r['skipped']} |")
            continue
        best = " ".join(f"{k}={v}" for k, v in (r["best"] or {}).items()) or "-"
        sp = "-" if r["speedup"] is None else f"{r['speedup']:.2f}x"
        print(f"| {r['kernel']} | {r['strategy']} | {r['evaluations']}/{r['budget']} | "
              f"{r['gpu_runs']} | {r['refused']} | {best} | {sp} | "
              f"{fmt(r['pct_of_best'], '.0f')} | {fmt(r['wall_per_eval_s'], '.2f')} |")


if __name__ == "__main__":
    main()
