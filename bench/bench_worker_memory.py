#!/usr/bin/env python3
"""A compile worker's memory over many distinct candidates (no GPU needed).

A pool with no GPU and one compile worker compiles distinct vector_add
candidates (each a new blob for the caches) in batches; after each batch
the worker's RSS is read from /proc. The worker's in-memory compile cache
is bounded (WORKER_MEMORY_CACHE_BYTES in lib/pool/worker.c), so the RSS
must level off once the cache is full; the table shows where it does.

    KREWARD_LIBRARY=build/lib/libkreward.so.1 python3 bench/bench_worker_memory.py [--jobs 1200]
"""
import argparse
import pathlib
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bindings" / "python"))

import kreward  # noqa: E402

VADD = ROOT / "examples" / "problems" / "l1_vector_add"
FAST = (VADD / "candidates" / "fast.cu").read_text()


def rss_mb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--jobs", type=int, default=1200)
    ap.add_argument("--batch", type=int, default=200)
    args = ap.parse_args()
    ctx = kreward.Context(no_device=True)
    problem = ctx.problem(str(VADD / "problem.json"))
    rows, t0 = [], time.perf_counter()
    with kreward.Pool(gpus="none", compile_workers=1) as pool:
        done = 0
        while done < args.jobs:
            n = min(args.batch, args.jobs - done)
            jobs = [dict(problem=problem, source=FAST + f"\n// {done + i} {time.time_ns()}\n")
                    for i in range(n)]
            verdicts = [r.verdict for r in pool.evaluate_batch(jobs)]
            done += n
            pids = [w["pid"] for w in pool.status()["workers"] if w.get("pid", 0) > 0]
            rows.append((done, time.perf_counter() - t0, sum(rss_mb(p) for p in pids),
                         {v: verdicts.count(v) for v in set(verdicts)}))
    ctx.close()
    print(f"one compile worker, {args.jobs} distinct vector_add candidates, batches of {args.batch}")
    print("| candidates | s | worker RSS MB | verdicts of the batch |")
    print("|---|---|---|---|")
    for done, s, mb, counts in rows:
        print(f"| {done} | {s:.0f} | {mb:.1f} | {counts} |")
    # from the row that ends the first half of the candidates
    half = max((r for r in rows if r[0] <= args.jobs // 2), key=lambda r: r[0], default=rows[0])
    print(f"second half (after {half[0]}): {half[2]:.1f} -> {rows[-1][2]:.1f} MB "
          f"({rows[-1][2] - half[2]:+.1f})")


if __name__ == "__main__":
    main()
