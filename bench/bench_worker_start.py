#!/usr/bin/env python3
"""What a ModelNew worker's start costs, by exec and forked from the zygote
(kernelbench/zygote.py), side by side in one run:
- start to ready: a WorkerProcess created and its `ready` answered (torch's
  import by exec; on a GPU, CUDA's start and the libraries' warm-up in
  both), the median and the spread of --starts each;
- per candidate: fresh candidates of a small problem through one Runner
  (the spare started ahead as by default), the median wall of an
  evaluation and of its start_and_load and spare_ready phases.
The zygote's own start (once per process) is printed apart.

    KREWARD_LIBRARY=build/lib/libkreward.so.1 python3 bench/bench_worker_start.py \\
        [--device cpu|cuda] [--starts 5] [--candidates 8]"""
import argparse
import pathlib
import statistics
import sys
import tempfile
import textwrap
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bindings" / "python"))

PROBLEM = textwrap.dedent("""
    import torch
    import torch.nn as nn


    class Model(nn.Module):
        def forward(self, x):
            return torch.relu(x)


    def get_inputs():
        return [torch.randn(256, 1024)]


    def get_init_inputs():
        return []
""")


def candidate(i):
    return (f"# candidate {i}\nimport torch\nclass ModelNew(torch.nn.Module):\n"
            "    def forward(self, x):\n        return x.clamp_min(0)\n")


def starts(device, n, zygote):
    from kreward.kernelbench.processes import library_path
    from kreward.kernelbench.worker_process import WorkerProcess
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        w = WorkerProcess(zygote=zygote)
        try:
            if w.started_by != ("zygote" if zygote else "exec"):
                raise RuntimeError(f"a worker meant to be forked started by {w.started_by}")
            r, _ = w.request({"op": "ready", "device": device, "library": library_path()}, 300)
            if not r["ok"]:
                raise RuntimeError(f"ready failed: {r.get('error')}")
            out.append(time.perf_counter() - t0)
        finally:
            w.end()
    return out


def candidates(device, n, zygote, folder):
    from kreward.kernelbench import import_problem
    from kreward.kernelbench.runner import Runner
    path = pathlib.Path(folder) / "relu_small.py"
    path.write_text(PROBLEM)
    walls, loads, spares = [], [], []
    with Runner(import_problem(str(path)), device, cache_dir=str(pathlib.Path(folder) / f"ext-{zygote}"),
                timeout_s=300, call_timeout_s=60, zygote=zygote) as r:
        for i in range(n + 1):  # the first (the Runner's own start) not counted
            t0 = time.perf_counter()
            res = r.evaluate(candidate(i), seed=i)
            if res["verdict"] != "pass":
                raise RuntimeError(f"candidate {i}: {res['verdict']}: {res.get('feedback')}")
            if res.get("worker_start") != ("zygote" if zygote else "exec"):
                raise RuntimeError(f"candidate {i}'s worker started by {res.get('worker_start')}")
            if i:
                walls.append(time.perf_counter() - t0)
                loads.append(res["phases_s"].get("start_and_load", 0.0))
                spares.append(res["phases_s"].get("spare_ready", 0.0))
    return walls, loads, spares


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--device", default=None, help="cpu or cuda (default: cuda where torch sees a GPU)")
    p.add_argument("--starts", type=int, default=5)
    p.add_argument("--candidates", type=int, default=8)
    a = p.parse_args(argv)
    import torch
    from kreward.kernelbench.worker_process import worker_environment
    from kreward.kernelbench.zygote import shared_zygote
    device = a.device or ("cuda" if torch.cuda.is_available() else "cpu")
    t0 = time.perf_counter()
    z = shared_zygote(worker_environment())
    z._wait_ready(300)
    print(f"device {device}; the zygote's start {time.perf_counter() - t0:.2f} s "
          f"(torch's import in it {z.import_s} s)", flush=True)
    rows = []
    med = statistics.median
    # each row as it is measured (a limit that ends the run keeps the rows before it)
    print(f"\n{'start':<8} {'ready s':>9} {'min-max':>13} {'cand wall s':>12} {'start_and_load':>15} "
          f"{'spare_ready':>12}", flush=True)
    with tempfile.TemporaryDirectory() as d:
        for name, zy in (("exec", None), ("zygote", z)):
            s = starts(device, a.starts, zy)
            w, lo, sp = candidates(device, a.candidates, zy is not None, d)
            rows.append((name, s, w, lo, sp))
            print(f"{name:<8} {med(s):>9.3f} {min(s):>6.3f}-{max(s):<6.3f} {med(w):>12.3f} {med(lo):>15.3f} "
                  f"{med(sp):>12.3f}", flush=True)
    (_, s0, w0, _, _), (_, s1, w1, _, _) = rows
    print(f"\nratio exec/zygote: ready {med(s0) / med(s1):.2f}x, candidate wall {med(w0) / med(w1):.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
