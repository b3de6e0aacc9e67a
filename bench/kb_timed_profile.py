#!/usr/bin/env python3
"""Where a KernelBench evaluation's timed phases go on the caller's side
(issue 31: in flight, the lane's exclusive phase is a candidate's timed
batches plus its baseline's, ~0.35 s a candidate at 267f017, of which the
caller's write_region ~0.07 s a side and the worker's stage ~0.03).

For each problem: a Runner, the Model as its own candidate evaluated
--evals times (the first one warms and is not counted), each counted
evaluation under cProfile (the calling thread: with in_flight 1 the
evaluation runs there). Printed per variant: the medians of the timed
phases and of the caller's and worker's steps inside them (the result's
ops_s), and the heaviest functions of the calling thread by own time
(a synchronize or a pipe read is time the caller waited on the GPU or the
worker).

Variants, in the same process one after the other (--variants):
  inplace  the inputs made in the stage itself (inputs.stage_call: today's)
  apart    each call's inputs made apart and copied into the stage, as
           before 2026-12-07 (the scale by 1 and shift by 0 passes of a
           normal(0, 1) draw included)

    KREWARD_LIBRARY=build/lib/libkreward.so.1 python3 bench/kb_timed_profile.py \\
        [--problems level1/01_relu.py,level2/01_gemm_bias_relu.py] [--evals 4] [--top 18]

Without a GPU it says so and exits 0 (`--device cpu` checks the script)."""
import argparse
import cProfile
import io
import pathlib
import pstats
import statistics
import sys

from cuda_or_skip import cuda_torch

ROOT = pathlib.Path(__file__).resolve().parents[1]
KB = ROOT / "examples" / "kernelbench"
sys.path.insert(0, str(ROOT / "bindings" / "python"))
DEFAULT = "level1/01_relu.py,level1/22_layernorm.py,level2/01_gemm_bias_relu.py"


def make_apart(layout, seed, device):
    """inputs.make_inputs as it was before 2026-12-07: every float draw
    scaled and shifted (by 1 and 0 too), each tensor made apart."""
    import torch
    from kreward.kernelbench import inputs
    gen = torch.Generator(device=device)
    gen.manual_seed(seed)
    out = {}
    for t in layout:
        init, dt = t["init"], inputs.DTYPES[t["dtype"]]
        dist = init.get("dist", "normal")
        if dist == "int":
            x = torch.randint(int(init["low"]), int(init["high"]) + 1, t["shape"], generator=gen,
                              device=device).to(dt)
        elif dist == "bernoulli":
            x = (torch.rand(t["shape"], generator=gen, device=device) < init.get("p", 0.5)).to(dt)
        else:
            if dist == "uniform":
                lo, hi = init.get("low", -1.0), init.get("high", 1.0)
                x = torch.rand(t["shape"], generator=gen, device=device).mul_(hi - lo).add_(lo)
            else:
                x = torch.randn(t["shape"], generator=gen, device=device)
                x = x.mul_(init.get("std", 1.0)).add_(init.get("mean", 0.0))
            if init.get("rescale"):
                x = inputs.rescale(x, init["rescale"], gen, device)
            x = x.to(dt)
        if t.get("transform"):
            x = inputs.TRANSFORMS[t["transform"]](x)
        out[t["name"]] = x.contiguous()
    return out


def stage_call_apart(stage, where, layout, seed, device, base=0):
    """inputs.stage_call as it was: the call's inputs made apart, then
    copied in, padding zeroed."""
    import torch
    from kreward.kernelbench import inputs
    tensors = make_apart(layout, seed, device)
    for name, (off, n) in where.items():
        if n:
            stage[off - base:off - base + n].copy_(tensors[name].reshape(-1).view(torch.uint8))
            end = off + (n + inputs.REGION_ALIGN - 1) // inputs.REGION_ALIGN * inputs.REGION_ALIGN
            if end > off + n:
                stage[off - base + n:end - base].zero_()


def run(problem, device, evals, top, variant):
    from kreward.kernelbench import import_problem, transfer
    from kreward.kernelbench.runner import Runner
    imp = import_problem(str(KB / problem))
    from kreward.kernelbench import verification
    real = transfer.stage_call, verification.make_inputs
    if variant == "apart":  # the checks make them the old way too (the digests must agree)
        transfer.stage_call, verification.make_inputs = stage_call_apart, make_apart
    source = (KB / problem).read_text() + "\nModelNew = Model\n"
    runner = Runner(imp, device, spare=False)
    prof = cProfile.Profile()
    rows = []
    try:
        for i in range(evals):
            if i:
                prof.enable()
            res = runner.evaluate(source)
            if i:
                prof.disable()
                rows.append(res)
            if res.get("verdict") != "pass":
                print(f"  {problem} {variant}: {res.get('verdict')}: {res.get('feedback')}", flush=True)
    finally:
        transfer.stage_call, verification.make_inputs = real
        runner.close()
    med = {}
    for res in rows:
        for k, v in res.get("phases_s", {}).items():
            med.setdefault(f"phase {k}", []).append(v)
        for side, steps in (res.get("ops_s") or {}).items():
            for op, v in steps.items():
                med.setdefault(f"{side}.{op}", []).append(v)
        med.setdefault("calls", []).append(res.get("calls") or 0)
        med.setdefault("speedup", []).append(res.get("speedup") or 0)
    out = io.StringIO()
    pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(top)
    return {k: statistics.median(v) for k, v in med.items()}, out.getvalue()


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--problems", default=DEFAULT)
    p.add_argument("--device", default="cuda")
    p.add_argument("--evals", type=int, default=4)
    p.add_argument("--top", type=int, default=18)
    p.add_argument("--variants", default="apart,inplace")
    a = p.parse_args(argv)
    if a.device != "cpu" and cuda_torch("kb_timed_profile (--device cpu checks the script)") is None:
        return 0
    table = {}
    for problem in [x for x in a.problems.split(",") if x]:
        for variant in a.variants.split(","):
            med, prof = run(problem, a.device, a.evals, a.top, variant)
            table[(problem, variant)] = med
            print(f"== {problem} {variant}: cProfile of the calling thread, {a.evals - 1} evaluations")
            print("\n".join(ln for ln in prof.splitlines() if ln.strip())[:6000], flush=True)
    keys = ["phase timed", "phase baseline_timed", "candidate.write_region", "candidate.stage",
            "candidate.go", "baseline.write_region", "baseline.stage", "baseline.go", "calls", "speedup"]
    print("\nmedians (s; calls per batch; speedup of the Model as its own candidate)")
    print(f"{'problem':<28} {'variant':<8} " + " ".join(f"{k.replace('phase ', ''):>14}" for k in keys))
    for (problem, variant), med in table.items():
        print(f"{pathlib.Path(problem).stem:<28} {variant:<8} "
              + " ".join(f"{med.get(k, float('nan')):14.4f}" for k in keys))
    return 0


if __name__ == "__main__":
    sys.exit(main())
