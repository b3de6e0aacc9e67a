#!/usr/bin/env python3
"""The trainer's path for kreward problems: a GRPO-like batch through
kreward.Evaluator, isolated (the pool: compile workers beside one GPU worker
per GPU) against in process (kr_evaluate one after another, compiles in
threads), in the same run (issue 34's second benchmark: 8 bundled problems
with l4_matmul_f32, 16 fresh candidates each, a third wrong, warmed).

Each side gets its own Evaluator, warms up on one batch (the problems
loaded, references compiled, workers started), then evaluates a second,
fresh batch (a comment per candidate makes each source new: no cache
serves it) submitted at once (`Evaluator.evaluate_batch`). Every report
must be right: the problems' fast.cu and slow.cu pass, wrong.cu is
incorrect.

    KREWARD_LIBRARY=build/lib/libkreward.so.1 PYTHONPATH=bindings/python \\
        python3 bench/bench_evaluator.py [--per-problem 16] [--problems 8] [--sides pool,in-process]

Prints a table (wall, candidates/s, the ratio against in process, reports
right) and the wrong reports; exits 1 when one is wrong. Without a GPU it
says so and exits 0. --profile: the GPU worker's split per candidate
(KR_PROFILE=metrics; the reports' profile_* metrics, means over passed
candidates) under the table."""
import argparse
import os
import pathlib
import statistics
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples" / "problems"
sys.path.insert(0, str(ROOT / "bindings" / "python"))

# the batch's problems, in order (the first --problems of them): the pool
# bench's elementwise and row problems, and a matmul
PROBLEMS = ["l1_vector_add", "l1_gelu", "l2_layernorm", "l2_rmsnorm", "l2_softmax", "l2_sum",
            "l3_residual_rmsnorm", "l4_matmul_f32", "l3_bias_gelu"]
KINDS = [("fast.cu", "passed"), ("slow.cu", "passed"), ("wrong.cu", "incorrect")]
SIDES = {"pool": True, "in-process": False}  # the Evaluator's isolated=
PROFILE_KEYS = ("profile_verify_ms", "profile_bench_ms", "profile_engine_wait_ms",
                "profile_gpu_generate_ms", "profile_gpu_checks_ms", "profile_gpu_fill_ms",
                "profile_gpu_candidate_ms", "profile_gpu_baseline_ms", "profile_mem_allocs")


def batch(problems, per_problem, salt):
    """[(problem.json, source, expected verdict)]: every problem's k-th
    candidate before any (k+1)-th, as a trainer submits a GRPO step."""
    out = []
    for i in range(per_problem):
        for p in problems:
            name, want = KINDS[i % 3]
            src = (EXAMPLES / p / "candidates" / name).read_text()
            out.append((str(EXAMPLES / p / "problem.json"), f"{src}\n// variant {salt}.{p}.{i}\n", want))
    return out


def run_side(kreward, side, problems, per_problem):
    with kreward.Evaluator(preset="fast", isolated=SIDES[side]) as ev:
        warm = batch(problems, 3, f"warm-{time.time_ns()}")
        t0 = time.perf_counter()
        ev.evaluate_batch([p for p, _, _ in warm], [s for _, s, _ in warm])
        warm_s = time.perf_counter() - t0
        jobs = batch(problems, per_problem, f"timed-{time.time_ns()}")
        t0 = time.perf_counter()
        reports = ev.evaluate_batch([p for p, _, _ in jobs], [s for _, s, _ in jobs])
        wall = time.perf_counter() - t0
    wrong = [(pathlib.Path(p).parent.name, r.verdict, want, (r.message or "")[:160])
             for (p, _, want), r in zip(jobs, reports) if r.verdict != want]
    prof = {}
    for r in reports:
        if r.verdict != "passed":
            continue
        for k in PROFILE_KEYS:
            v = r.metrics().get(k)
            if v is not None:
                prof.setdefault(k, []).append(v)
    return {"side": side, "n": len(reports), "wall": wall, "warm": warm_s, "wrong": wrong,
            "rate": len(reports) / wall if wall > 0 else float("inf"),
            "profile": {k: statistics.mean(v) for k, v in prof.items()}}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--per-problem", type=int, default=16)
    ap.add_argument("--problems", type=int, default=8)
    ap.add_argument("--sides", default="pool,in-process",
                    help="comma-separated, in the order run; the ratio is against in-process")
    ap.add_argument("--profile", action="store_true")
    a = ap.parse_args(argv)
    sides = [s for s in a.sides.split(",") if s]
    for s in sides:
        if s not in SIDES:
            ap.error(f"unknown side {s!r} (pool, in-process)")
    if a.profile:
        os.environ["KR_PROFILE"] = "metrics"  # read by each worker's engine as it is made
    import kreward
    with kreward.Context() as ctx:
        if not ctx.has_device:
            print("bench_evaluator: needs a GPU (skipped): no usable NVIDIA GPU")
            return 0
    problems = PROBLEMS[:a.problems]
    rows = []
    for side in sides:
        rows.append(run_side(kreward, side, problems, a.per_problem))
        r = rows[-1]
        print(f"{side}: {r['n']} candidates in {r['wall']:.2f} s ({r['rate']:.2f}/s), "
              f"{r['n'] - len(r['wrong'])} right; warm-up batch {r['warm']:.1f} s", flush=True)
    base = next((r["rate"] for r in rows if r["side"] == "in-process"), None)
    print(f"\n| batch ({len(problems)} problems x {a.per_problem} fresh candidates, fast preset, "
          f"warmed) | candidates | right | wall s | candidates/s | vs in-process |\n"
          "|---|---|---|---|---|---|")
    for r in rows:
        ratio = f"{r['rate'] / base:.2f}" if base else "n/a"
        print(f"| Evaluator, {r['side']} | {r['n']} | {r['n'] - len(r['wrong'])} | {r['wall']:.2f} "
              f"| {r['rate']:.2f} | {ratio} |")
    if a.profile:
        for r in rows:
            if r["profile"]:
                print(f"\n| {r['side']}: a passed candidate (means) | value |\n|---|---|")
                for k, v in r["profile"].items():
                    print(f"| {k[8:]} | {v:.2f} |")
    for r in rows:
        for p, got, want, msg in r["wrong"][:10]:
            print(f"  {r['side']}: {p} {got} (expected {want}): {msg}")
    return 1 if any(r["wrong"] for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
