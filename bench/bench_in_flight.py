#!/usr/bin/env python3
"""Candidates per second through the ModelNew scheduler on one GPU, one at a
time (in_flight 1) against several in flight (issue 31; docs/kernelbench.md
"Several candidates in flight per GPU"), on a GRPO-like batch: P corpus
problems x C candidates each, every candidate the problem's own Model as
ModelNew (torch only: its speedup should be ~1.0 whatever K, so the spread
of the speedups says what the shared steps and freezes cost the timing).

Printed per K: wall seconds, candidates/s, the verdicts, the speedups'
median and spread (p10-p90), the gate's waits and the probe's notes.

    KREWARD_LIBRARY=build/lib/libkreward.so.1 python3 bench/bench_in_flight.py \\
        --k 1 4 --problems 4 --candidates 8 [--json out.json]

Without a GPU it prints "bench_in_flight: needs a GPU (skipped)" and exits 0."""
import argparse
import json
import pathlib
import statistics
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
KB = ROOT / "examples" / "kernelbench"
sys.path.insert(0, str(ROOT / "bindings" / "python"))

PROBLEMS = ["01_relu.py", "02_gelu.py", "03_sigmoid.py", "05_softmax.py", "22_layernorm.py",
            "13_matmul_square.py", "23_rmsnorm.py", "04_tanh.py"]


def quantile(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else None


def run(k, problems, candidates, cache, probe):
    from kreward.kernelbench.lanes import make_scheduler
    s = make_scheduler({"devices": ["cuda:0"], "in_flight": k, "builds": False, "gpu_probe": probe,
                        "runner": {"cache_dir": cache}})
    t0 = time.monotonic()
    try:
        tickets = [s.submit(p, p.source + "\nModelNew = Model\n") for _ in range(candidates) for p in problems]
        results = [s.wait(t, 900) for t in tickets]
    finally:
        s.close()
    wall = time.monotonic() - t0
    speedups = [r["speedup"] for r in results if r.get("speedup")]
    gates = [r["gate"] for r in results if "gate" in r]
    verdicts = {}
    for r in results:
        verdicts[r["verdict"]] = verdicts.get(r["verdict"], 0) + 1
    row = {"k": k, "candidates": len(results), "wall_s": round(wall, 2),
           "per_s": round(len(results) / wall, 3), "verdicts": verdicts,
           "speedup_median": statistics.median(speedups) if speedups else None,
           "speedup_p10": quantile(speedups, 0.1), "speedup_p90": quantile(speedups, 0.9),
           "gate_waited_median_s": statistics.median([g["waited_s"] for g in gates]) if gates else None,
           "stopped_median": statistics.median([g.get("stopped", 0) for g in gates]) if gates else None,
           "probe_notes": sum(1 for g in gates if "probe" in g),
           "feedback": sorted({str(r.get("feedback"))[:200] for r in results if r["verdict"] != "pass"}),
           "phases_median_s": {ph: statistics.median([r["phases_s"][ph] for r in results
                                                      if ph in r.get("phases_s", {})])
                               for ph in ("start_and_load", "verify", "gate", "timed", "baseline_timed")
                               if any(ph in r.get("phases_s", {}) for r in results)}}
    return row


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--k", type=int, nargs="+", default=[1, 4], help="in_flight values, in order")
    p.add_argument("--problems", type=int, default=4)
    p.add_argument("--candidates", type=int, default=8)
    p.add_argument("--no-probe", action="store_true", help="no GPU idle probe before timed phases")
    p.add_argument("--json")
    a = p.parse_args()
    import torch
    if not torch.cuda.is_available():
        print("bench_in_flight: needs a GPU (skipped)")
        return 0
    from kreward.problems import KernelBenchProblem
    problems = [KernelBenchProblem(str(KB / "level1" / name)) for name in PROBLEMS[:a.problems]]
    for pr in problems:
        pr.imported()  # (the import's probes, once, before any clock)
    rows = []
    with tempfile.TemporaryDirectory() as cache:
        for k in a.k:
            row = run(k, problems, a.candidates, cache, not a.no_probe)
            rows.append(row)
            print(json.dumps(row), flush=True)
    if a.json:
        pathlib.Path(a.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
