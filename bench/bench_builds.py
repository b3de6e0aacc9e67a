#!/usr/bin/env python3
"""Build wall times of load_inline candidates: one after another in the
candidate worker's load (the path before the compile stage: the GPU turn
built it), against the compile stage (kernelbench/builds.py) with N
workers, then each source's worker load after the stage (its build found
current). Runs on the CPU: the workers are CPU-device ones, the builds
are the same c++ and nvcc runs a GPU worker makes (no GPU is needed to
build).

  serial   Runner(device="cpu")'s candidate worker started and its load
           (the import: load_inline's build) for each source in turn, in a
           fresh cache folder: what each GPU turn paid before.
  stage    BuildPool(workers=N) over the same sources, in another fresh
           folder: sandboxed CPU workers side by side.
  reuse    the candidate worker's start and load of each source in the
           stage's folder: what the GPU turn pays now.

Candidates: --kind cuda (the corpus's honest CUDA relu, examples/kernelbench/
candidates/level1_01_relu/honest_cuda.py, made distinct per row by its
extension's name: c++ for main.cpp, nvcc for cuda.cu) or cpp (a torch C++
extension: main.cpp only). --pch makes the library's precompiled header
first (timed) and gives it to both sides; --no-pch gives none.

Printed: a row per candidate (seconds: serial start+load, the stage's
build, the later start+load; and from the serial build's .ninja_log the
seconds of main.o, cuda.cuda.o and the link), the walls of both ways,
their ratio, and the CPU seconds each way took (this process's children:
the machine may be shared, so the wall is noisy and the CPU less so).

    KREWARD_LIBRARY=build/lib/libkreward.so.1 python3 bench/bench_builds.py \\
        [--kind cuda|cpp] [--candidates 2] [--workers N] [--pch|--no-pch] [--arch 9.0] [--json out]
"""
import argparse
import glob
import json
import os
import pathlib
import resource
import shutil
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
KB = ROOT / "examples" / "kernelbench"
sys.path.insert(0, str(ROOT / "bindings" / "python"))

CPP = '''
import torch
from torch.utils.cpp_extension import load_inline

ext = load_inline(name="{name}", functions=["relu"], cpp_sources="""
torch::Tensor relu(torch::Tensor x) {{ return x.clamp_min(0); }}  // {name}
""")


class ModelNew(torch.nn.Module):
    def forward(self, x):
        return ext.relu(x)
'''


def sources(kind, n):
    """n distinct candidates of a kind: [(extension name, source)]."""
    out = []
    honest = (KB / "candidates" / "level1_01_relu" / "honest_cuda.py").read_text()
    for i in range(n):
        name = f"kb_bench_{kind}_{i}"
        src = honest.replace("kb_relu_honest", name) if kind == "cuda" else CPP.format(name=name)
        out.append((name, src))
    return out


def cpu_s():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def ninja_steps(cache, name):
    """Seconds of each step of a build, from its .ninja_log."""
    found = glob.glob(os.path.join(cache, "*", name, ".ninja_log"))
    steps = {}
    if found:
        for line in open(found[0]).read().splitlines()[1:]:
            start, end, _, target, _ = line.split("\t")
            steps[target] = (int(end) - int(start)) / 1e3
    return steps


def load(runner, src):
    """A candidate worker's start and load of src: (wall s, its load reply)."""
    t0 = time.monotonic()
    w, loaded = runner._processes.start_candidate(src, "ModelNew")
    wall = time.monotonic() - t0
    w.end()
    return wall, loaded


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--kind", choices=("cuda", "cpp"), default="cuda")
    p.add_argument("--candidates", type=int, default=2)
    p.add_argument("--workers", type=int, default=None, help="the stage's (default: the host's CPUs)")
    p.add_argument("--pch", action=argparse.BooleanOptionalAction, default=True)
    p.add_argument("--arch", default="9.0", help="TORCH_CUDA_ARCH_LIST (no GPU here to ask)")
    p.add_argument("--timeout-s", type=float, default=1800.0)
    p.add_argument("--keep", help="build under this folder and keep it (default: a temporary one)")
    p.add_argument("--json", help="write the rows and totals here")
    a = p.parse_args(argv)
    if a.kind == "cuda" and not (shutil.which("nvcc") or os.path.exists("/usr/local/cuda/bin/nvcc")):
        print("bench_builds: --kind cuda needs nvcc (skipped)")
        return 0
    from kreward.kernelbench import import_problem, pch
    from kreward.kernelbench.builds import BuildPool
    from kreward.kernelbench.runner import Runner

    top = a.keep or tempfile.mkdtemp(prefix="kreward-bench-builds-")
    os.makedirs(top, exist_ok=True)
    workers = a.workers or os.cpu_count()
    cands = sources(a.kind, a.candidates)
    imp = import_problem(str(KB / "level1" / "01_relu.py"))
    out = {"kind": a.kind, "candidates": a.candidates, "workers": workers, "cpus": os.cpu_count(),
           "pch": a.pch, "arch": a.arch, "rows": []}
    pch_root = os.path.join(top, "pch")
    pch_dir = None
    if a.pch:
        c0, t0 = cpu_s(), time.monotonic()
        pch_dir = pch.make(pch_root)
        out["pch_make"] = {"wall_s": round(time.monotonic() - t0, 1), "cpu_s": round(cpu_s() - c0, 1)}
        print(f"precompiled header: {pch_dir} ({out['pch_make']['wall_s']} s wall, "
              f"{out['pch_make']['cpu_s']} s CPU; made once, kept)")

    def runner(cache):
        return Runner(imp, "cpu", cache_dir=cache, cuda_arch=a.arch, pch_dir=pch_dir, spare=False,
                      timeout_s=a.timeout_s)

    serial_cache, stage_cache = os.path.join(top, "serial"), os.path.join(top, "stage")
    rows = {name: {"candidate": name} for name, _ in cands}
    c0, t0 = cpu_s(), time.monotonic()
    with runner(serial_cache) as r:
        for name, src in cands:
            wall, loaded = load(r, src)
            rows[name].update(serial_s=round(wall, 1), serial_ok=loaded["ok"],
                              steps=ninja_steps(serial_cache, name))
    out["serial"] = {"wall_s": round(time.monotonic() - t0, 1), "cpu_s": round(cpu_s() - c0, 1)}

    c0, t0 = cpu_s(), time.monotonic()
    with BuildPool(stage_cache, a.arch, workers=workers, timeout_s=a.timeout_s, use_pch=a.pch,
                   pch_root=pch_root) as pool:
        for _, src in cands:
            pool.submit(src)
        for name, src in cands:
            o = pool.wait(src)
            rows[name].update(stage_s=o["seconds"], stage_state=o["state"])
    out["stage"] = {"wall_s": round(time.monotonic() - t0, 1), "cpu_s": round(cpu_s() - c0, 1)}

    with runner(stage_cache) as r:
        for name, src in cands:
            wall, loaded = load(r, src)
            rows[name].update(reuse_s=round(wall, 1), reuse_load_s=round(loaded.get("compile_seconds") or 0, 2),
                              reuse_cached=loaded.get("cached"))
    out["rows"] = list(rows.values())
    out["ratio"] = round(out["serial"]["wall_s"] / out["stage"]["wall_s"], 2)
    _print(out)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)
    if not a.keep:
        for d, _, _ in os.walk(pch_root):
            os.chmod(d, 0o755)
        shutil.rmtree(top, ignore_errors=True)
    return 0


def _print(out):
    print(f"\n{out['kind']} candidates: {out['candidates']}, stage workers: {out['workers']} "
          f"(CPUs: {out['cpus']}), precompiled header: {'yes' if out['pch'] else 'no'}, "
          f"TORCH_CUDA_ARCH_LIST={out['arch']}")
    head = ("candidate", "serial s", "main.o s", "cuda.o s", "link s", "stage s", "state",
            "reuse s", "its load s")
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for r in out["rows"]:
        st = r.get("steps") or {}
        link = next((v for k, v in st.items() if k.endswith(".so")), None)
        cells = (r["candidate"], r.get("serial_s"), st.get("main.o"), st.get("cuda.cuda.o"), link,
                 r.get("stage_s"), r.get("stage_state"), r.get("reuse_s"), r.get("reuse_load_s"))
        print("| " + " | ".join("-" if c is None else str(c) for c in cells) + " |")
    s, g = out["serial"], out["stage"]
    print(f"\nserial: {s['wall_s']} s wall, {s['cpu_s']} s CPU; stage: {g['wall_s']} s wall, "
          f"{g['cpu_s']} s CPU; serial / stage wall: {out['ratio']}x")


if __name__ == "__main__":
    sys.exit(main())
