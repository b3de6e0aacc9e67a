#!/usr/bin/env python3
"""`kreward serve`'s overhead over calling the pool directly (target: at
most 5 %).

The same jobs (distinct vector_add candidates, so neither the pool's
deduplication nor the compile cache serves one from another) go
  direct   through kreward.Pool.evaluate_batch in this process,
  batch    through a local `kreward serve` as one /v1/evaluate/batch,
  single   through it as concurrent /v1/evaluate requests (8 threads),
each with a pool of the same options. Without a GPU the work is compile-only
(verdict not_run); with one, real verdicts (--gpus to choose).

    KREWARD_LIBRARY=build/lib/libkreward.so.1 python3 bench/bench_serve.py [--jobs 64]
"""
import argparse
import concurrent.futures
import os
import pathlib
import signal
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bindings" / "python"))

import kreward  # noqa: E402
from kreward.backends.http import Client  # noqa: E402

VADD = ROOT / "examples" / "problems" / "l1_vector_add"
FAST = (VADD / "candidates" / "fast.cu").read_text()


def variants(tag, n):
    return [FAST + f"\n// {tag} {i} {time.time_ns()}\n" for i in range(n)]


def start_server(gpus, compile_workers):
    env = dict(os.environ, PYTHONPATH=str(ROOT / "bindings" / "python"))
    args = [sys.executable, "-m", "kreward.serve", "--port", "0", "--log-level", "warning",
            "--compile-workers", str(compile_workers), "--max-queue", "100000"]
    if gpus:
        args += ["--gpus", gpus]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, text=True, env=env)
    for line in proc.stdout:
        if "listening on " in line:
            return proc, line.split("listening on ")[1].split()[0], "compile only" in line
    raise SystemExit("kreward serve did not start")


def timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--jobs", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=3, help="best of this many rounds")
    ap.add_argument("--gpus", default=None, help="the pools' GPUs (default: all; 'none')")
    ap.add_argument("--compile-workers", type=int, default=0)
    args = ap.parse_args()

    ctx = kreward.Context(no_device=True)
    problem = ctx.problem(str(VADD / "problem.json"))
    reward = ctx.reward("makora")
    try:
        pool = kreward.Pool(gpus=args.gpus, compile_workers=args.compile_workers)
    except kreward.KrewardError:
        pool = kreward.Pool(gpus="none", compile_workers=args.compile_workers)
    proc, url, compile_only = start_server(args.gpus if pool.status()["gpus"] else "none",
                                           args.compile_workers)
    client = Client(url)
    try:
        def direct():
            jobs = [dict(problem=problem, source=s, reward=reward)
                    for s in variants("direct", args.jobs)]
            reports = pool.evaluate_batch(jobs)
            return [r.verdict for r in reports]

        def batch():
            reports = client.evaluate_batch([str(VADD / "problem.json")] * args.jobs,
                                            sources=variants("batch", args.jobs))
            return [r.verdict for r in reports]

        def single():
            srcs = variants("single", args.jobs)
            with concurrent.futures.ThreadPoolExecutor(8) as ex:
                return [r.verdict for r in ex.map(
                    lambda s: client.evaluate(str(VADD / "problem.json"), s), srcs)]

        direct(), batch()  # warm: workers, problem parsed, connections
        results = {}
        for name, fn in (("direct", direct), ("batch", batch), ("single", single)):
            best, verdicts = None, None
            for _ in range(args.rounds):
                s, verdicts = timed(fn)
                best = s if best is None else min(best, s)
            results[name] = (best, verdicts)
        base = results["direct"][0]
        print(f"kreward serve overhead, {args.jobs} distinct vector_add candidates, "
              f"{'compile only (no GPU)' if compile_only else 'real verdicts'}, "
              f"best of {args.rounds}")
        print("| path | seconds | jobs/s | overhead vs direct | verdicts |")
        print("|---|---|---|---|---|")
        for name, (s, verdicts) in results.items():
            counts = {v: verdicts.count(v) for v in sorted(set(verdicts))}
            print(f"| {name} | {s:.3f} | {args.jobs / s:.1f} | {100 * (s - base) / base:+.1f} % "
                  f"| {counts} |")
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(60)
        pool.close()
        ctx.close()


if __name__ == "__main__":
    main()
