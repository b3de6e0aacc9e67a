"""Vetting task sets: which problems are fit to train on (docs/vetting.md).

    run = kreward.problems.vet(["tasks/"], out="vetted/")
    run.kept, run.refused, print(run.summary)

For KernelBench-format files and kreward problems alike: the import (with
the reason when refused), determinism, the reference's time on this GPU
(eager and torch.compile) against limits.Limits (CUDA Agent's 100 ms by
default), whether timing the file's own sizes is launch-bound (and at
which cases' sizes), the soundness check's trivial answers and whether
stronger inputs break them, tolerance headroom (the reference against
itself in float64) and duplicates. Files are vetted in parallel (threads
that wait on subprocesses: every file runs only in subprocesses of its
own), one timing at a time per GPU, and a run with `out` is resumable.

A record (one line of vet.jsonl):
  problem, path, kind ("kernelbench" | "kreward"), sha256, kept, reasons,
  unchecked (limits this run could not check), import {ok, error, cases,
  tensors, notes}, deterministic, bitwise, device, reference_ms {eager,
  compile}, compile_s, cases_ms {case: {eager_ms, host_ms, launch_bound}},
  launch_bound, launch_bound_cases, trivial {zeros, constant, input,
  other_case: passes}, strengthened (the recipe every case's inputs follow),
  weak, tolerance_headroom, kernel_us (kreward problems), duplicate_of,
  fingerprint, notes, measure_error, time_skipped, seconds, steps_s (KernelBench files: the
  import's, the wait for a device, and the measurement's steps: setup, determinism,
  headroom, timing), measure_key."""
import concurrent.futures
import dataclasses
import hashlib
import json
import os
import sys
import time

from ..kernelbench.importer import DEFAULT_TOL
from . import duplicates, files, kernelbench_file, kreward_file
from .limits import Limits, judge
from .output import RunFolder
from .placement import Devices
from .summary import table

__all__ = ["Limits", "VetRun", "run"]

_HERE = os.path.dirname(os.path.abspath(__file__))


class VetRun:
    """records (name order), summary (markdown), skipped (files that are
    not problems), folder (the run's folder or None)."""

    def __init__(self, records, summary, skipped, folder):
        self.records, self.summary, self.skipped, self.folder = records, summary, skipped, folder

    @property
    def kept(self):
        return [r for r in self.records if r["kept"]]

    @property
    def refused(self):
        return [r for r in self.records if not r["kept"]]

    def __repr__(self):
        return f"VetRun({len(self.kept)} kept of {len(self.records)})"


# the code a record's measurements come from: vetting's own, and the
# import's (probes, soundness check, inputs, reference)
_CODE = [os.path.join(_HERE, n) for n in ("measure.py", "kernelbench_file.py", "kreward_file.py")] + \
    [os.path.join(os.path.dirname(_HERE), "kernelbench", n)
     for n in ("importer.py", "probe.py", "prefix_inputs.py", "import_process.py", "soundness.py",
               "soundness_check.py", "inputs.py", "reference.py", "file_process.py")] + \
    [os.path.join(os.path.dirname(_HERE), "json_process.py")]


def _measure_key(atol, rtol, compile_too, devices, timeout_s):
    """What a record's measurements depend on besides the file: a resumed
    run reuses a record only under the same key (the code, torch's and
    libkreward's versions, the devices, the tolerances, the limits on
    time)."""
    h = hashlib.sha256()
    for path in _CODE:
        with open(path, "rb") as f:
            h.update(f.read())
    h.update(json.dumps({"atol": atol, "rtol": rtol, "compile": bool(compile_too),
                         "where": devices.mode, "devices": devices.describe(),
                         "timeout_s": timeout_s, "versions": _versions()}).encode())
    return h.hexdigest()[:24]


def _versions():
    out = {}
    try:
        import torch
        out["torch"] = torch.__version__
    except Exception:  # noqa: BLE001 - vetting kreward problems needs no torch
        out["torch"] = None
    try:
        from .. import _lib
        out["libkreward"] = _lib.fn.version().decode()
    except Exception:  # noqa: BLE001
        out["libkreward"] = None
    return out


def _reusable(record):
    """An earlier record stands unless a step of it did not finish: a
    measurement that failed, ran out of time or memory is tried again."""
    return not record.get("measure_error") and not record.get("soundness_error")


class _Job:
    """One problem through the two phases: its import (KernelBench files, on
    the CPU), then its measurement (on a device)."""

    def __init__(self, problem, sha, key):
        self.problem, self.sha, self.key = problem, sha, key
        self.record, self.imp, self.seconds = None, None, 0.0

    def _step(self, fn):
        t0 = time.monotonic()
        try:
            fn()
        except Exception as e:  # noqa: BLE001 - every problem gets its record, with why
            self.record = {"kind": self.problem.kind, "import": {"ok": True, "error": None},
                           "measure_error": f"vetting failed: {type(e).__name__}: {e}"}
            self.imp = None
        self.seconds += time.monotonic() - t0

    def import_it(self, atol, rtol, timeout_s):
        def step():
            if self.problem.kind == "kernelbench":
                t0 = time.monotonic()
                self.record, self.imp = kernelbench_file.import_step(self.problem.path, atol, rtol,
                                                                     timeout_s)
                self.record["steps_s"] = {"import_s": round(time.monotonic() - t0, 3)}
        self._step(step)
        return self

    @property
    def done(self):
        """Nothing left to measure (a refused import, a failed step)."""
        return self.record is not None and self.imp is None

    def measure_it(self, devices, atol, rtol, compile_too, timeout_s):
        def step():
            if self.problem.kind == "kreward":
                self.record = kreward_file.vet(self.problem.path, devices, timeout_s)
            else:
                self.record = kernelbench_file.measure_step(self.record, self.imp, devices, atol,
                                                            rtol, compile_too, timeout_s)
        self._step(step)
        return self

    def finished(self):
        self.record.update(problem=self.problem.name, path=self.problem.path, sha256=self.sha,
                           measure_key=self.key, seconds=round(self.seconds, 2))
        return self.record


def run(paths, out=None, limits=None, jobs=None, devices=None, resume=True, compile=True,
        atol=DEFAULT_TOL, rtol=DEFAULT_TOL, timeout_s=600, progress=None, chunk=None):
    """Vets the problems under paths (files and folders). out: the run's
    folder (vet.jsonl, summary.md, kept/, refused/), None for none; limits:
    a Limits; jobs: files vetted at once (default: the CPUs); devices: None
    (the GPUs here, else untimed on the CPU), "cpu" (timed on the CPU) or
    GPU indices; resume: reuse the records of an earlier run in `out` for
    unchanged files; compile: time torch.compile too; progress(done,
    total, record) after each file; chunk: files imported, then measured,
    at a time (default twice the jobs), each chunk's records written as
    they finish. Returns a VetRun."""
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    if chunk is not None and chunk < 1:
        raise ValueError(f"chunk {chunk}: a run takes at least one file at a time")
    limits = limits or Limits()
    problems, skipped = files.find([os.fspath(p) for p in paths], skip=[out] if out else ())
    devs = Devices(devices)
    key = _measure_key(atol, rtol, compile, devs, timeout_s)
    folder = RunFolder(out) if out else None
    earlier = folder.earlier() if folder and resume else {}
    records, todo = [], []
    for p in problems:
        sha = p.sha256()
        r = earlier.get((p.path, sha, key))
        if r is not None and _reusable(r):
            r["problem"] = p.name
            records.append(r)
        else:
            todo.append((p, sha))
    if folder:
        folder.start(records)
    done = len(records)

    def finish(job):
        nonlocal done
        record = job.finished()
        records.append(record)
        if folder:
            folder.append(record)
        done += 1
        if progress:
            progress(done, len(problems), record)

    # a chunk's imports first, in parallel on the CPUs; then its
    # measurements, one per device at a time (an import's CPU work next to
    # a measurement would be in its clock: launch-bound readings,
    # launch-heavy models). Chunks, so a run of thousands of files keeps
    # what it finished when it is stopped (resume).
    workers = max(1, jobs or os.cpu_count() or 1)
    jobs_ = [_Job(p, sha, key) for p, sha in todo]
    size = chunk or max(8, 2 * workers)
    for first in range(0, len(jobs_), size):
        measured = []
        with concurrent.futures.ThreadPoolExecutor(workers) as pool:
            futures = [pool.submit(j.import_it, atol, rtol, timeout_s)
                       for j in jobs_[first:first + size]]
            for fut in concurrent.futures.as_completed(futures):
                job = fut.result()
                if job.done:
                    finish(job)
                else:
                    measured.append(job)
        # one more than the devices where the host has cores to spare: its
        # measuring process starts (torch's import, one core) while the
        # others measure; on fewer than four it would be in their clocks
        ahead = 1 if (os.cpu_count() or 1) >= 4 else 0
        with concurrent.futures.ThreadPoolExecutor(devs.parallel(workers) + ahead) as pool:
            futures = [pool.submit(j.measure_it, devs, atol, rtol, compile, timeout_s)
                       for j in measured]
            for fut in concurrent.futures.as_completed(futures):
                finish(fut.result())
    records.sort(key=lambda r: r["problem"])
    alone = dataclasses.replace(limits, refuse_duplicates=False)
    for r in records:
        r["kept"] = judge(r, alone)[0]
    duplicates.mark(records)
    for r in records:
        r["kept"], r["reasons"], r["unchecked"] = judge(r, limits)
    summary = table(records, limits, devs.names, skipped)
    if folder:
        folder.finish(records, summary)
    return VetRun(records, summary, skipped, folder.path if folder else None)


def print_progress(done, total, record, to=sys.stderr):
    imp = record.get("import") or {}
    what = ("import refused" if not imp.get("ok") else
            "did not run" if record.get("measure_error") else "measured")
    print(f"[{done}/{total}] {record['problem']} ({record['seconds']:.1f} s, {what})", file=to,
          flush=True)
