#!/usr/bin/env python3
"""Seconds of importing KernelBench files (kreward.kernelbench.import_problem)
with the import cache off, per phase, on this machine's CPU (issue 31: the
first import of an upstream level 1 file took 28-61 s, the soundness check
of a weak one more).

Phases are the importer's own seams, timed from this process:
  meta      the first probe call (its process's start and torch's import,
            the file on the meta device for shapes and constants)
  probes    the later probe calls (value statistics, the scaled cases, the
            determinism check, integer inputs per case), summed
  sound     the soundness check (trivial answers against the reference,
            inputs at other scales where one passes; before the import's
            one process, its own process's start too)
  total     import_problem's wall, the rest included
Where a probe result carries "seconds" (the probe's own timer per
request), the requests are printed under the row.

One file at a time (the machine's cores are the probes'). --old-ref REV
runs the same files with REV's bindings/python (git archive into a
temporary folder, run in a child process) first, for a before/after table
from one call on one machine.

    KREWARD_LIBRARY=/tmp/import-build/lib/libkreward.so.1 python3 bench/bench_import.py \\
        --dir /tmp/kb-upstream/KernelBench/level1 [--old-ref e5ec707] [files ...]"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
# large upstream level 1 files of each kind: elementwise on 4096 x 393216
# floats, softmax (a row op), a reduction, two losses (weak under their own
# inputs), a square matmul, a convolution
DEFAULT_FILES = ("19_ReLU.py", "23_Softmax.py", "47_Sum_reduction_over_a_dimension.py",
                 "94_MSELoss.py", "100_HingeLoss.py", "1_Square_matrix_multiplication_.py",
                 "50_conv_standard_2D__square_input__square_kernel.py")


def measure(path, timeout_s):
    """{phase: seconds, "result": ..., "requests": [...]} of one import in
    this process, cache off. The seams: ImportProcess.probes/.soundness
    where the importer has them (one process for the import), else
    run_probes and soundness.check (a process each)."""
    from kreward.kernelbench import importer, soundness
    times = {"meta": 0.0, "probes": 0.0, "sound": 0.0}
    requests = []
    calls = {"probes": 0}

    def probes_timer(fn):
        def timed(*args):
            t = time.perf_counter()
            out = fn(*args)
            times["probes" if calls["probes"] else "meta"] += time.perf_counter() - t
            calls["probes"] += 1
            reqs = next(a for a in args if isinstance(a, list))
            requests.extend((dict(req, skipped=res.get("skipped")), res["seconds"])
                            for req, res in zip(reqs, out) if "seconds" in res)
            return out
        return timed

    def sound_timer(fn):
        def timed(*args):
            t = time.perf_counter()
            out = fn(*args)
            times["sound"] += time.perf_counter() - t
            return out
        return timed

    if hasattr(importer, "ImportProcess"):
        owner, names = importer.ImportProcess, ("probes", "soundness")
    else:
        owner, names = None, ()
    saved = {n: getattr(owner, n) for n in names}
    saved_fns = importer.run_probes, soundness.check
    if owner:
        owner.probes, owner.soundness = probes_timer(saved["probes"]), sound_timer(saved["soundness"])
    else:
        importer.run_probes, soundness.check = probes_timer(saved_fns[0]), sound_timer(saved_fns[1])
    t = time.perf_counter()
    try:
        imp = importer.import_problem(path, cache_dir=None, timeout_s=timeout_s)
        sound = imp.soundness or {}
        result = ("weak (not checked: " + sound["error"][:60] + ")" if sound.get("error") else
                  "weak" if imp.weak else "strengthened" if sound.get("strong") else "sound") + \
            f", {len(imp.cases)} cases"
    except importer.ImportRefused as e:
        result = "refused: " + e.reason[:80]
    finally:
        for n, fn in saved.items():
            setattr(owner, n, fn)
        importer.run_probes, soundness.check = saved_fns
    times["total"] = time.perf_counter() - t
    return dict(times, result=result, requests=requests)


def _describe(req):
    kinds = [k for k in ("real", "determinism") if req.get(k)]
    skipped = " (not run: its first choice succeeded)" if req.get("skipped") else ""
    return f"{'+'.join(kinds) or 'meta'} {json.dumps(req.get('overrides') or {})}{skipped}"


def table(label, rows):
    print(f"\n{label}\n")
    print("| file | meta s | probes s | sound s | total s | result |")
    print("|---|---|---|---|---|---|")
    for name, r in rows:
        print(f"| {name} | {r['meta']:.1f} | {r['probes']:.1f} | {r['sound']:.1f} | "
              f"**{r['total']:.1f}** | {r['result']} |")
    for name, r in rows:
        for req, s in r.get("requests", ()):
            print(f"    {name}: {_describe(req)}: {s:.2f} s")


def run_old(ref, files, timeout_s):
    """The same measurement with REV's bindings/python, in a child process."""
    with tempfile.TemporaryDirectory(prefix="bench-import-old-") as tmp:
        archive = subprocess.run(["git", "-C", ROOT, "archive", ref, "bindings/python"],
                                 check=True, capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", tmp], input=archive, check=True)
        env = dict(os.environ, PYTHONPATH=os.path.join(tmp, "bindings", "python"))
        out = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", "--timeout",
                              str(timeout_s)] + files, env=env, capture_output=True, text=True)
        if out.returncode:
            sys.exit(f"the run at {ref} failed: {out.stderr[-2000:]}")
        return json.loads(out.stdout.splitlines()[-1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("files", nargs="*", help="file names under --dir (default: the upstream set)")
    ap.add_argument("--dir", default=".")
    ap.add_argument("--old-ref", help="a git revision to measure first, with its own importer")
    ap.add_argument("--timeout", type=int, default=300, help="the importer's timeout_s")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:  # run_old's child: files are paths, the answer one JSON line
        print(json.dumps([(os.path.basename(f), measure(f, a.timeout)) for f in a.files]))
        return
    sys.path.insert(0, os.path.join(ROOT, "bindings", "python"))
    files = [os.path.join(a.dir, f) for f in (a.files or DEFAULT_FILES)]
    missing = [f for f in files if not os.path.isfile(f)]
    if missing:
        sys.exit(f"no such file: {', '.join(missing)}")
    head = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True,
                          text=True).stdout.strip()
    print(f"cores: {os.cpu_count()}, cache off, timeout_s {a.timeout}")
    if a.old_ref:
        table(f"at {a.old_ref}", run_old(a.old_ref, files, a.timeout))
    rows = []
    for f in files:
        rows.append((os.path.basename(f), measure(f, a.timeout)))
        print(f"  {rows[-1][0]}: {rows[-1][1]['total']:.1f} s", file=sys.stderr)
    table(f"at {head} (working tree)", rows)


if __name__ == "__main__":
    main()
