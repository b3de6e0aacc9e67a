#!/usr/bin/env python3
"""Where a ModelNew worker's first batch goes (issue 31: `verify` took
1.4-2.6 s a candidate on an H100 at 96fee2c, torch-only candidates
included, against ~0.06 s for a later side's five timed batches).

Runs the worker's own code (kernelbench/worker.py's Worker, loaded by path
as a worker loads it) in a fresh process per problem, without IPC and
without the sandbox, request by request as the runner sends them: ready,
load, seal, build, then three rounds of prepare / go / times / drop with
the batch's commitment, the first round under cProfile. Prints each
request's seconds and the first go's heaviest functions. If the first go
is slow here too, the profile says where; if not, the cost is the
sandbox's, the zygote's or the caller's.

    KREWARD_LIBRARY=build/lib/libkreward.so.1 python3 bench/kb_first_go_probe.py \\
        [--problems level1/05_softmax.py,...] [--device cuda] [--top 25] [--json OUT]

Without a GPU it says so and exits 0 (`--device cpu` checks the script)."""
import argparse
import cProfile
import io
import json
import os
import pathlib
import pstats
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
KB = ROOT / "examples" / "kernelbench"
sys.path.insert(0, str(ROOT / "bindings" / "python"))
DEFAULT = "level1/05_softmax.py,level1/22_layernorm.py,level1/13_matmul_square.py"


def problem_request(path, device):
    """The load request's problem half, as a Runner makes it."""
    from kreward.kernelbench import import_problem
    from kreward.kernelbench.runner import Runner
    imp = import_problem(str(path))
    runner = Runner(imp, device, spare=False)
    try:
        return runner._processes_args["problem"]
    finally:
        runner.close()


def one_problem(path, device, top):
    """In this (fresh) process: the requests' seconds and the first go's profile."""
    import importlib.util
    from kreward.kernelbench.processes import library_path
    spec = importlib.util.spec_from_file_location(
        "kr_kb_worker", ROOT / "bindings" / "python" / "kreward" / "kernelbench" / "worker.py")
    worker = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(worker)
    problem = problem_request(path, device)
    device = "cuda:0" if device == "cuda" else device
    source = pathlib.Path(path).read_text().replace("class Model(", "class ModelNew(")
    lib = library_path()
    folder = tempfile.mkdtemp(prefix="kb-first-go-")
    w = worker.Worker(io.BytesIO(), worker.Sandbox(None))
    steps = []

    def step(name, fn, req, profile=None):
        t0 = time.perf_counter()
        if profile is not None:
            profile.enable()
        out = fn(req)
        if profile is not None:
            profile.disable()
        steps.append((name, time.perf_counter() - t0))
        return out

    step("ready", w.ready, {"device": device, "library": lib, "triton_driver": True})
    step("load", w.load, {"source": source, "class_name": "ModelNew", "device": device, "ext": folder,
                          "library": lib, **problem, "cache_dir": folder, "env": {}, "sandbox": None})
    step("seal", w.seal, {})
    step("build", w.build, {"case": 0})
    prof = cProfile.Profile()
    for r in range(3):
        seeds = [1000 * r + i for i in range(2)]
        step(f"prepare {r}", w.prepare, {"case": 0, "commit": True, "region": False, "seeds": seeds})
        step(f"go {r}", w.go, {"case": 0}, prof if r == 0 else None)
        step(f"times {r}", w.times, {})
        step(f"drop {r}", w.drop, {})
    text = io.StringIO()
    pstats.Stats(prof, stream=text).sort_stats("cumulative").print_stats(top)
    return {"problem": str(pathlib.Path(path).relative_to(KB)), "device": device,
            "steps_s": [(n, round(s, 4)) for n, s in steps], "first_go_profile": text.getvalue()}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--problems", default=DEFAULT)
    p.add_argument("--device", default="cuda")
    p.add_argument("--top", type=int, default=25)
    p.add_argument("--json")
    p.add_argument("--one", help=argparse.SUPPRESS)  # the child's problem
    args = p.parse_args()
    if args.one:
        print(json.dumps(one_problem(args.one, args.device, args.top)))
        return 0
    if args.device != "cpu":
        import torch
        if not torch.cuda.is_available():
            print("no GPU: nothing to measure (--device cpu checks the script)")
            return 0
    results = []
    for rel in args.problems.split(","):
        t0 = time.perf_counter()
        out = subprocess.run([sys.executable, __file__, "--one", str(KB / rel), "--device", args.device,
                              "--top", str(args.top)], capture_output=True, text=True, timeout=600)
        if out.returncode:
            print(f"{rel}: rc {out.returncode}\n{out.stderr[-3000:]}")
            continue
        r = json.loads(out.stdout.strip().splitlines()[-1])
        r["process_s"] = round(time.perf_counter() - t0, 2)
        results.append(r)
        print(f"\n== {r['problem']} on {r['device']} (the process {r['process_s']} s)")
        print("| request | s |\n|---|---|")
        for name, s in r["steps_s"]:
            print(f"| {name} | {s:.4f} |")
        print("the first go's profile (cumulative):")
        print("\n".join(line for line in r["first_go_profile"].splitlines() if line.strip())[:6000])
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
