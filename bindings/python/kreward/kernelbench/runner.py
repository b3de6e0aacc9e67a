"""ModelNew candidates evaluated in a worker process (worker.py): the caller
makes the golden outputs with the problem's Model (reference.py), the worker
runs the candidate, and everything the worker says is checked here.

Defences, as for device-only candidates where they apply:
- fresh inputs per call, made from seeds by both sides (inputs.py): a
  candidate that caches outputs across calls returns stale ones;
- every case verified (the scaled ones catch shape overfitting);
- timed calls run back to back in batches (batches.py: staged masked, the
  outputs committed inside the clock); which calls are checked is drawn
  after the batch ran (the worker keeps every output until asked), so
  skipping work on unchecked calls is caught at the check fraction's rate;
- a digest of the inputs after the call, against the caller's own: a
  candidate that writes its inputs, or tampers with the generator, fails;
- the time that counts is the caller's clock around a batch (divided by its
  calls); the worker's CUDA-event times must fit inside it
  (`timing_mismatch` otherwise: the worker's clock was tampered with);
- kernels attributed with the profiler (CUPTI): the ones named in the
  candidate's source are custom, the rest torch's or a library's; a
  candidate that launched no custom kernel is `torch_fallback` and gets no
  speed credit, one whose own kernels take under half of its GPU time is
  `mostly_torch` and gets it in proportion (scoring.py).

Timing, the same for both sides: the reference Model runs in a baseline
worker of its own that lives as long as the Runner, and is timed in every
evaluation right after the candidate, with the candidate's schedule (a
warmup batch, discarded, then `batches` batches of the same number of
calls, each followed by the same fetches); the speedup is the ratio of the
medians. Batches grow until they take `batch_ms` (the request's own
overhead small beside them), within `batch_bytes` of fresh inputs and
outputs. No process of the candidate is alive while the baseline runs: its
supervisor (worker.py) kills the candidate's whole process tree first, and
no candidate process can signal, re-prioritise or re-pin another process
(the worker's isolation filter), so nothing it leaves behind slows the
baseline down.

The worker is killed on a deadline (`timeout`) and a crash is a verdict
(`crash`), never the caller's problem. It runs in libkreward's sandbox
(confine.py, worker.py): reads limited to Python's trees, the toolkit and
the driver's files, writes to the candidate's own build folder, no network,
no exec once every case ran (`seal`); what the sandbox refused is the
verdict `denied`, and a layer the kernel lacks is said in the notes."""
import collections
import contextlib
import json
import math
import os
import random
import re
import threading
import time
import weakref

import torch

from .. import _lib
from . import folders, triton_cache
# one timed batch (staging, the calls on the clock, the checks): batches.py
from .batches import SHARED_BYTES, Batches
from .confine import missing
from .cuda_ipc import OUT_OF_MEMORY, new_buffer
from .inputs import REGION_ALIGN, gpu_paths, nbytes, use_library
from .inputs import warm as warm_kernels
from .reference import Reference
# what a result says (scoring.py); reward_of and the attribution helpers
# are also importable from here, where they lived before
from .report import reward_of
from .scoring import (LAUNCH_BOUND, MOSTLY_TORCH_SHARE, attribute, custom_kernel_names,  # noqa: F401
                      custom_share, kernel_share, launch_luck, luck_note)
from .worker_process import CandidateDenied, WorkerDied, WorkerProcess, WorkerTimeout

DEFAULT_CACHE = os.path.join(os.path.expanduser("~"), ".cache", "kreward", "kernelbench")
MIN_CALLS = 2             # per timed batch, unless the memory budget allows fewer
MAX_CALLS = 1024
KEEP_WARM = 8             # Runners whose workers stay between evaluations (the most recent)


def _median(xs):
    xs = sorted(xs)
    return xs[len(xs) // 2]


_warm = collections.OrderedDict()  # id(Runner) -> weakref, the most recently used last
_warm_lock = threading.RLock()  # a Runner's __del__ may come while it is held


def _keep_warm(runner):
    """Marks runner's workers as the most recently used; ends those of the
    Runners past KEEP_WARM (each holds a torch process or two, with a CUDA
    context each: a program that makes a Runner per problem and keeps them
    would otherwise keep them all). A Runner in the middle of an evaluation
    is skipped; an ended one starts its workers again when next used."""
    with _warm_lock:
        _warm.pop(id(runner), None)
        _warm[id(runner)] = weakref.ref(runner)
        old = [(k, ref) for k, ref in _warm.items()][:max(0, len(_warm) - KEEP_WARM)]
    for key, ref in old:
        other = ref()
        if other is None:
            with _warm_lock:
                _warm.pop(key, None)
        elif other._lock.acquire(blocking=False):
            try:
                other.close()
            finally:
                other._lock.release()


def _start_sandbox_refused(ready):
    """Whether a failed ready reply is the "start" sandbox's doing: the
    sandbox not applied, or CUDA refused inside it (error 304, "OS call
    failed", as the H200's driver said until /proc/self/task could be
    truncated); not memory, a busy device or anything else."""
    why = str(ready.get("error", ""))
    return (bool(ready.get("sandbox_failed")) or "OS call failed" in why
            or re.search(r"\b(error|returned) 304\b", why, re.IGNORECASE) is not None)


def _number_or_none(x):
    return x if isinstance(x, (int, float)) and not isinstance(x, bool) else None


def _path_rank(path):
    """How slow a GPU path (inputs.gpu_paths) is, in order: a Triton kernel
    ("triton", or "triton choice N: ..." with N its place among the mask's
    kernels, best first), torch's steps, nothing settled."""
    if path is None:
        return 1000
    if path == "torch steps":
        return 500
    m = re.match(r"triton choice (\d+):", path)
    return int(m.group(1)) if m else 0 if path == "triton" else 999


def _library_path():
    """The libkreward file this process loaded (the worker loads it by path:
    the sandbox, the input region's mask)."""
    return os.path.realpath(_lib.path) if os.path.exists(_lib.path) else _lib.path


class Runner(Batches):
    """Evaluates ModelNew sources for one imported problem, one at a time (a
    lock: two candidates timed at once would slow each other down). Between
    evaluations it keeps the baseline worker and, where the sandbox allows,
    a spare worker started ahead for the next candidate: close() ends them
    (or use the Runner as a context manager; dropping it ends them too)."""

    def __init__(self, imported, device="cuda", cache_dir=None, timeout_s=600.0, call_timeout_s=60.0,
                 sandbox="auto", batch_ms=10.0, batch_bytes=None, spare=True, baseline="eager",
                 inputs=None, staging="auto", eval_timeout_s=None):
        """sandbox: "auto" (the default): "start" where a worker starts in
        it, else "init" from then on, said in every result's notes (CUDA
        failed to start inside the sandbox on driver 570+ until the grants
        had /proc/self/task's truncate right: another driver may want
        another file). "start": entered before torch is imported,
        so every thread torch and CUDA start later is inside it; its write
        folder, the source's build folder, must be known when the worker
        starts, so its spare is started only for a source named ahead:
        evaluate(next_source=) or evaluate_many), "init" (entered after
        torch and CUDA are up, before the candidate loads: their earlier
        threads keep their file access, CUDA's callback thread among them,
        which runs host functions a candidate enqueues; its spare takes any
        source; see docs/sandbox.md), None (none: for debugging; the result
        says so).
        batch_ms: a timed batch grows until it takes this long (at least
        MIN_CALLS calls), within batch_bytes of fresh inputs and outputs
        (default 1 GiB on the CPU, 4 GiB on a GPU).
        spare: start the next candidate's worker (torch imported, CUDA up)
        at the end of each evaluation, so the next one does not wait for it
        (in the "start" sandbox only when the next source is known).
        baseline: what the speedup is against: "eager" (the reference Model
        as written, KernelBench's default) or "compile" (torch.compile of
        it, compiled in the baseline worker before its seal; the result's
        baseline_kind says which, baseline_compile_seconds what compiling
        took).
        staging: how a GPU worker gets a batch's masked inputs: "auto" (the
        default) through a device buffer of this process's that only that
        worker maps (cuda_ipc.py: a descriptor given at its start; no trip
        through host memory), where the driver allows, else through the
        host region; "host": always the region (for comparison). The
        result's "staging" says which each side got ("ipc", or "host (why)").
        timeout_s: the most a worker's start, a load (a compile) or a build
        may take; call_timeout_s: any other request of a worker (a batch, a
        check's fetch, a staging piece); eval_timeout_s (default twice
        timeout_s): the most the candidate's worker may take over a whole
        evaluation, from the evaluation's start, whatever each request
        took (a candidate answering each of a batch's requests just inside
        call_timeout_s would otherwise hold the caller for hours); past it
        the verdict is "timeout"."""
        if sandbox not in ("auto", "start", "init", None):
            raise ValueError(f"sandbox must be 'auto', 'start', 'init' or None, not {sandbox!r}")
        if staging not in ("auto", "host"):
            raise ValueError(f"staging must be 'auto' or 'host', not {staging!r}")
        if baseline not in ("eager", "compile"):
            raise ValueError(f"baseline must be 'eager' or 'compile', not {baseline!r}")
        # inputs: who makes a timed batch's inputs. "caller" (the default):
        # this process, written masked into a region shared with the worker
        # after it answered prepare (inputs.py), so nothing in the
        # candidate's process can compute on them before the clock starts;
        # "worker": the worker, in prepare, untimed (work done there pays:
        # docs/kernelbench.md; kept for comparison and debugging).
        inputs = inputs or "caller"
        if inputs not in ("caller", "worker"):
            raise ValueError(f"inputs must be 'caller' or 'worker', not {inputs!r}")
        self.inputs_from = inputs
        if device == "cuda":
            # the GPU this thread uses now, by number: the caller's inputs,
            # the workers (same CUDA_VISIBLE_DEVICES) and their staging
            # buffers all on it, whatever device is current later (a bare
            # "cuda" was the caller's current device here and device 0 in
            # every worker)
            device = f"cuda:{torch.cuda.current_device()}"
        use_library(_library_path())  # the region's mask of host memory
        # a GPU worker stages the region into device memory (worker.py
        # stage); the CPU's tensors are views of the region itself, unless a
        # test asks for the GPU's way on the CPU
        self.staged = device != "cpu"
        # why a GPU worker gets no device buffer of its own to stage from
        # (_shared_buffer): "host" asked for, or the driver refused one here
        self.ipc_why = "asked for" if staging == "host" else None
        # what unmasks the inputs and commits to the outputs on this GPU,
        # chosen in this process before any candidate runs; the baseline's
        # worker must come to the same (_check_baseline_paths): its choice
        # is made while a candidate shares the GPU, which could make its
        # kernels fail (memory held, a compile refused) and leave it on a
        # slower path inside its clock
        self._expected_paths = None
        if device != "cpu":
            try:
                with torch.cuda.device(device):  # (Triton's launches: _on_device)
                    warm_kernels(device)
            except Exception:  # noqa: BLE001 - what it settled on is in gpu_paths
                pass
            self._expected_paths = gpu_paths()
        self.baseline_kind = "torch.compile" if baseline == "compile" else "eager"
        self.imp, self.device = imported, device
        self.sandbox = "start" if sandbox == "auto" else sandbox
        # "auto": why "start" gave way to "init" (None while it has not);
        # decided once, by the first candidate worker's ready, which runs no
        # source (_start_candidate)
        self._may_fall_back, self.sandbox_fallback = sandbox == "auto", None
        self.ref = Reference(imported, device)
        self.cache_dir = cache_dir or DEFAULT_CACHE
        # spare folders a killed trainer's Runners left (folders.py)
        folders.sweep_orphan_spares(self.cache_dir)
        self.timeout_s, self.call_timeout_s = timeout_s, call_timeout_s
        self.eval_timeout_s = 2 * timeout_s if eval_timeout_s is None else eval_timeout_s
        self._eval_deadline = None  # time.monotonic() the current evaluation's candidate must end by
        n = len(imported.cases)
        self.layouts = [self._layout(c) for c in range(n)]
        self.init_inputs = [list(self.ref.module(c).get_init_inputs()) for c in range(n)]
        json.dumps(self.init_inputs)  # plain values only: they travel as JSON
        self.values = [{str(k): v for k, v in imported.case_values(c).items()} for c in range(n)]
        self.state_names = [t["module_name"] for t in imported.tensors if t["source"] in ("param", "buffer")]
        with open(imported.path) as f:
            self._ref_source = f.read()
        self.batch_us = batch_ms * 1e3
        Batches.__init__(self)
        self.batch_bytes = batch_bytes or ((1 << 30) if device == "cpu" else (4 << 30))
        self.call_bytes = self._call_bytes()
        self.max_call_bytes = max(self._call_bytes(c) for c in range(n))
        self.spare = spare
        self._lock = threading.Lock()
        self._base = None        # the baseline worker, once started
        self._base_state = {}    # ready, lifted, per_call_us
        self._spare_w = None
        self._spare_source = None  # "start": the source the spare was started for
        self._spare_ext = None     # "start", no source named: the fresh folder it writes

    # ---- lifetime
    def close(self):
        """Ends the baseline worker and the spare (a later evaluation starts
        them again). From another thread it ends an evaluation in progress
        too (its workers die: the result says so); a worker's shared buffer
        is freed only between the evaluation's copies into it (its lock)."""
        for w in (getattr(self, "_base", None), getattr(self, "_spare_w", None)):
            if w is not None:
                w.end()
        folders.discard(getattr(self, "_spare_ext", None))
        self._base, self._spare_w, self._base_state = None, None, {}
        self._spare_source = self._spare_ext = None
        with _warm_lock:
            _warm.pop(id(self), None)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    # ---- workers
    def _layout(self, case):
        shapes = self.imp.shapes(self.imp.cases[case][2])
        return [dict(t, shape=s, init=self.imp.init_for(case, t))
                for t, s in zip(self.imp.tensors, shapes) if t["role"] == "in"]

    def _region_bytes(self):
        """The input region's size: a timed batch's inputs, at most
        batch_bytes with their outputs, plus each tensor's alignment and each
        call's rounding to whole key lengths, for the largest batch any case
        can get (inputs.region_offsets). Sparse: pages exist once written."""
        tensors = max(len(lay) for lay in self.layouts)
        return (max(self.batch_bytes, 2 * self.max_call_bytes) +
                MAX_CALLS * tensors * REGION_ALIGN)

    def _on_device(self):
        """This Runner's GPU as the thread's current device while it works:
        Triton launches (the mask, the commitment) on the current device's
        stream whatever device their tensors are on, so with a trainer's
        thread on another GPU the mask would run unordered with the copies
        after it (or fault) (helper-36)."""
        if self.device == "cpu":
            return contextlib.nullcontext()
        return torch.cuda.device(self.device)

    def _shared_buffer(self):
        """A device buffer for one GPU worker to stage its batches' masked
        inputs from (cuda_ipc.CallerBuffer; batches.py _put): one per
        worker, so no other worker (the baseline's, a spare, a candidate's
        stray after an unclean end) ever maps what a worker is given, and
        SHARED_BYTES at most (a larger chunk goes through in pieces).
        (buffer, None), or (None, why not): a refusal that will last (a
        driver without the calls) is kept in ipc_why for every later
        worker; a passing one (out of memory: another process filled the
        GPU) is this worker's only."""
        if self.ipc_why is not None:
            return None, self.ipc_why
        try:
            # (on the CPU, host memory: only a Runner told to stage as a
            # GPU's does gets here, to test the protocol without one)
            return new_buffer(torch, self.device, min(self._region_bytes(), SHARED_BYTES)), None
        except Exception as e:  # noqa: BLE001 - any refusal (a driver without the calls: AttributeError)
            why = f"no shared device buffer: {type(e).__name__}: {e}"[:400]
            if getattr(e, "code", None) != OUT_OF_MEMORY:
                self.ipc_why = why
            return None, why

    def _call_bytes(self, case=0):
        """Bytes one call holds until its batch is dropped: its fresh inputs
        and its outputs (the timing case's by default)."""
        total = 0
        for t, shape in zip(self.imp.tensors, self.imp.shapes(self.imp.cases[case][2])):
            total += nbytes(shape, t["dtype"])
        return max(total, 1)

    def _calls_for(self, per_call_us):
        """Calls per timed batch: enough for batch_ms at per_call_us, within
        the memory budget."""
        want = MIN_CALLS if not per_call_us else math.ceil(self.batch_us / max(per_call_us, 0.1))
        return max(1, min(max(want, MIN_CALLS), MAX_CALLS, self.batch_bytes // self.call_bytes))

    def _folder(self, source):
        return folders.source_folder(self.cache_dir, source)

    def _sandbox_config(self, ext):
        if not self.sandbox:
            return None
        return {"library": _library_path(),
                "write": ext, "gpu": self.device != "cpu", "when": self.sandbox}

    def _spawn(self, source=None, ext=None):
        """A worker process, told to get ready (torch, CUDA) at once. The
        "start" sandbox needs its write folder now (the source's, or ext: a
        fresh one for a source not yet known); "init" gets it at load."""
        if ext is None and source is not None:
            ext = self._folder(source)
        # the source's folders as its environment from the start only in the
        # "start" sandbox, which is in place from the first instruction on;
        # an "init" worker gets them with load, when its sandbox comes: its
        # ready runs unsandboxed and compiles (Triton loads the .so files it
        # built from TRITON_CACHE_DIR), and a candidate's folder holds what
        # its earlier worker left there (helper-33)
        env = folders.worker_env(ext) if ext is not None and self.sandbox == "start" else None
        if env is not None and source != self._ref_source and self.device != "cpu":
            # the mask's and the commitment's kernels as the reference's
            # worker compiled them: not again in every candidate's folder
            try:
                triton_cache.plant(os.path.join(self._folder(self._ref_source), "triton"),
                                   os.path.realpath(ext))  # (a source's name may link a spare's folder)
            except Exception:  # noqa: BLE001 - then its worker compiles them, as before
                pass
        region = self.inputs_from == "caller"
        shared, why = self._shared_buffer() if region and self.staged else (None, None)
        try:
            w = WorkerProcess(env, self._sandbox_config(ext) if self.sandbox == "start" else None,
                              region_bytes=self._region_bytes() if region else 0, shared=shared)
        except BaseException:
            if shared is not None:
                shared.close()
            raise
        if region and self.staged and w.shared is None and w.staging is None:
            w.staging = f"host ({why})"
        # a reply carries at most one call's outputs (a fetch): the caller
        # never reads more than twice the largest case's inputs and outputs
        # (a scaled case may grow a size: "odd" rounds up)
        w.max_payload = 2 * self.max_call_bytes + (1 << 20)
        try:
            w.send({"op": "ready", "device": self.device, "library": _library_path(),
                    "shared_bytes": w.shared.nbytes if w.shared is not None else None})
        except BaseException:
            w.end()
            raise
        return w

    def _send_load(self, w, source, class_name, ext=None):
        ext = ext or self._folder(source)
        w.send({"op": "load", "source": source, "class_name": class_name, "device": self.device,
                "ext": ext,
                "library": _library_path(),
                "layouts": self.layouts, "init_inputs": self.init_inputs, "values": self.values,
                "state_names": self.state_names, "cache_dir": self.cache_dir, "env": folders.worker_env(ext),
                "sandbox": self._sandbox_config(ext)},
               # (a source larger than the pipe waits for the worker's ready)
               timeout_s=self.timeout_s)

    def _start_candidate(self, source, class_name):
        """The candidate's worker (the spare if there is one that can take
        this source) and its load reply."""
        w, self._spare_w = self._spare_w, None
        spare_source, self._spare_source = self._spare_source, None
        spare_ext, self._spare_ext = self._spare_ext, None
        # a "start" worker's sandbox lets it write one build folder only: a
        # spare started for another source cannot take this one; one started
        # with a fresh folder (no source named) takes a source that has
        # none yet
        ext = None
        if w is not None and self.sandbox == "start" and spare_source != source:
            ext = folders.adopt(self.cache_dir, spare_ext, source) if spare_source is None and spare_ext else None
            if ext is None:
                w.end()
                folders.discard(spare_ext)
                w = None
        if w is not None and not w.alive():
            w.end()
            w = None
        ahead = w is not None
        # a worker started now beside the baseline's own start measures its
        # launch time against that start's load (launch_luck: none then)
        overlapped = not ahead and self._base is not None and not self._base_state.get("ready")
        w = w or self._spawn(source)
        w.limit_until(self._eval_deadline, f"the evaluation ran past its limit of {self.eval_timeout_s:g} s "
                      "(eval_timeout_s): the candidate's requests together took too long")
        try:
            self._send_load(w, source, class_name, ext)
            ready, _ = w.receive(self.timeout_s)
            if not ready["ok"] and self.sandbox == "start" and self._may_fall_back and \
                    _start_sandbox_refused(ready):
                # the worker failed in its ready, before it ran any source
                # (it refuses load after a failed ready), on this Runner's
                # first "start" worker and for the sandbox's reason only: a
                # candidate cannot make a later worker fail and so weaken
                # the sandbox of the candidates after it
                w.end()
                self._fall_back_to_init(ready["error"])
                return self._start_candidate(source, class_name)
            if not ready["ok"]:
                raise RuntimeError(f"the worker did not start: {ready['error']}")
            if self.sandbox == "start":
                self._may_fall_back = False  # decided: it starts here
            loaded = w.receive(self.timeout_s)[0]
            loaded["no_subreaper"] = ready.get("no_subreaper")
            loaded["launch_us"] = ready.get("launch_us")
            loaded["launch_overlapped"] = overlapped
            loaded["started_ahead"] = ahead
            return w, loaded
        except BaseException:
            w.end()
            raise

    def _fall_back_to_init(self, why):
        """"auto": a "start" worker could not start (CUDA inside the sandbox,
        or the sandbox itself): every worker from now on is an "init" one,
        the baseline's too (started again)."""
        self.sandbox, self._may_fall_back = "init", False
        self.sandbox_fallback = str(why)[:400]
        if self._spare_w is not None:
            self._spare_w.end()
        folders.discard(self._spare_ext)
        self._spare_w, self._spare_source, self._spare_ext = None, None, None
        if self._base is not None:
            self._end_baseline()
            self._start_baseline()

    def _start_spare(self, next_source=None):
        """The next candidate's worker, started now: any source's in the
        "init" sandbox (it gets its write folder at load); in the "start"
        one next_source's, or, none named, one with a fresh folder that the
        next source without a folder of its own takes (a new candidate, as
        nearly every one in training is)."""
        if not self.spare or self._spare_w is not None:
            return
        if self.sandbox != "start":
            self._spare_w = self._spawn()
        elif next_source is not None:
            self._spare_w, self._spare_source = self._spawn(next_source), next_source
        else:
            ext = folders.fresh_folder(self.cache_dir)
            try:
                self._spare_w = self._spawn(ext=ext)
            except BaseException:
                folders.discard(ext)
                raise
            self._spare_ext = ext

    def _start_baseline(self):
        """The reference's worker, started (its requests sent, the replies
        read by _baseline_ready): it loads Model, builds and seals, and
        times two small batches for a first estimate of a call."""
        if self._base is not None and self._base.alive():
            return
        if self._base is not None:
            self._base.end()
        self._base = w = self._spawn(self._ref_source)
        self._base_state = {"ready": False}
        try:
            self._send_load(w, self._ref_source, "Model")
            w.send({"op": "build", "case": 0, "compile": self.baseline_kind == "torch.compile"})
            w.send({"op": "seal"})
            rng = random.Random(0)
            for _ in range(2):
                w.send({"op": "prepare", "case": 0, "seeds": [rng.getrandbits(62) for _ in range(2)]})
                w.send({"op": "go", "case": 0})
                w.send({"op": "times"})
                w.send({"op": "drop"})
        except WorkerDied as e:
            self._base_state["failed"] = str(e)  # said by _baseline_ready

    def _baseline_ready(self):
        """Waits for the baseline worker's start (before any timed batch:
        its start must not compete with the candidate's); None, or why it
        cannot time the baseline."""
        if self._base_state.get("ready"):
            return None
        w = self._base
        failed = self._base_state.get("failed")
        if failed:
            self._end_baseline()
            return f"the reference's worker did not start: {failed}"
        try:
            replies = [w.receive(self.timeout_s)[0] for _ in range(w.pending)]
        except (WorkerDied, WorkerTimeout) as e:
            self._end_baseline()
            return str(e)
        failed = [r for r in replies if not r["ok"]]
        if failed:
            self._end_baseline()
            return f"the reference does not run in a worker: {failed[0]['error']}"
        build, seal, calibration = replies[2], replies[3], replies[-2]
        self._base_state = {"ready": True, "lifted": build["lifted"], "gpu_paths": seal["gpu_paths"],
                            "launch_us": replies[0].get("launch_us"),
                            "per_call_us": calibration["event_us"] / 2,
                            "compile_seconds": _number_or_none(build.get("compile_seconds")),
                            "graphs": _number_or_none(build.get("graphs"))}
        return None

    def _end_baseline(self):
        if self._base is not None:
            self._base.end()
        self._base, self._base_state = None, {}

    # ---- evaluation
    def evaluate(self, source, seed=None, verify_seeds=2, batches=5, calls=None, checks=2,
                 baseline=True, class_name="ModelNew", next_source=None):
        """calls: per timed batch; None sizes batches to batch_ms (both
        sides get the same number). seed: None (the default) takes every
        input seed from the OS; an integer makes the inputs reproducible
        (tests, debugging) and so predictable to a candidate that recovers
        the generator from the seeds it sees: not for training.
        next_source: the source evaluated next, if known, so its worker can
        start ahead in the "start" sandbox (evaluate_many passes it)."""
        with self._lock, self._on_device():
            res = self._evaluate(source, seed, verify_seeds, batches, calls, checks, baseline,
                                 class_name, next_source)
        _keep_warm(self)
        return res

    def evaluate_many(self, sources, **kw):
        """evaluate() for each source in turn, a result each in order; each
        candidate's worker starts while the one before finishes (its
        baseline timed, its processes ended) in either sandbox."""
        sources = list(sources)
        return [self.evaluate(src, next_source=sources[i + 1] if i + 1 < len(sources) else None, **kw)
                for i, src in enumerate(sources)]

    def _evaluate(self, source, seed, verify_seeds, batches, calls, checks, baseline, class_name,
                  next_source=None):
        # the inputs' seeds: from the OS unless the caller asked for
        # reproducible ones (seed=: tests and debugging; a candidate that
        # recovered the generator from the seeds it saw could compute the
        # next batches' outputs ahead, outside the clock)
        rng = random.Random(seed) if seed is not None else random.SystemRandom()
        res = {"verdict": None, "cases": [], "notes": [], "phases_s": {}}
        self._eval_deadline = time.monotonic() + self.eval_timeout_s
        # where an evaluation's wall time goes (seconds per phase, in order):
        # what to look at when a candidate takes long
        last = [time.perf_counter()]

        def phase(name):
            now = time.perf_counter()
            res["phases_s"][name] = round(now - last[0], 4)
            last[0] = now

        w = None
        try:
            if baseline:
                self._start_baseline()  # side by side with the candidate's worker
            w, loaded = self._start_candidate(source, class_name)
            phase("start_and_load")
            # the candidate's worker was the spare (torch and CUDA up before
            # it was asked for): start_and_load is then mostly the load
            res["started_ahead"] = loaded["started_ahead"]
            res["launch_us"] = {"candidate": loaded.get("launch_us")}
            if loaded["launch_overlapped"]:
                res["launch_us"]["overlapped"] = True
            if self.sandbox_fallback:
                res["notes"].append(
                    f'the "start" sandbox could not start a worker here ({self.sandbox_fallback}): '
                    '"init" instead, where the threads torch and CUDA started before it keep '
                    "their file access (docs/kernelbench.md)")
            if not loaded["ok"]:
                if loaded.get("denied"):
                    res.update(verdict="denied", feedback=f"refused by the sandbox: {loaded['error']}")
                else:
                    res.update(verdict="error" if loaded.get("sandbox_failed") else "compile_error",
                               feedback=loaded["error"])
                return res
            res["compile_seconds"], res["compile_cached"] = loaded["compile_seconds"], loaded["cached"]
            self._sandbox_notes(loaded["sandbox"], res)
            if not loaded["isolation"]["applied"]:
                # .get: the reply is the candidate's to write (worker_process
                # checks its types, not that a refusal says why)
                why = loaded["isolation"].get("why", "no reason given")
                res["notes"].append(f"no isolation filter ({why}): the "
                                    "candidate's processes can signal other processes of this user")
            if loaded["no_subreaper"]:
                res["notes"].append(f"no subreaper ({loaded['no_subreaper']}): a process the "
                                    "candidate starts in a session of its own may outlive it")
            lifted = self._verify(w, rng, verify_seeds, res)
            phase("verify")
            if lifted is None:
                return res
            # every case ran once (Triton compiled per shape): no exec from here
            self._seal(w, res)
            if not all(lifted.values()):
                res["notes"].append("ModelNew's parameter names differ from Model's: weights are "
                                    "seeded as KernelBench does (same seed for both), not fresh per call")
            why_no_baseline = self._baseline_ready() if baseline else "not asked for"
            phase("baseline_ready")
            base_us = self._base_state.get("per_call_us") if not why_no_baseline else None
            # the schedule both sides run: a warmup batch, then batches of n calls
            warm = calls or self._calls_for(base_us)
            self._clocks_reset(w)
            cand_us = self._warmup(w, warm, rng)
            n = calls or self._calls_for(min(cand_us, base_us or cand_us))
            preps = []
            wall, events, why = self._timed(
                w, batches, n, checks, rng,
                check=lambda s, i, c: self._check(w, 0, s, lifted[0], f"timed call (batch {i})", c),
                preps=preps)
            if why:
                res.update(verdict="wrong", feedback=why)
                return res
            phase("timed")
            res.update(time_us=_median(wall), event_us=_median(events), calls=n, batches=batches,
                       prepare_us=_median(preps))
            # every batch's per-call time, for the noise behind the medians
            res["batches_us"] = {"candidate": [round(x, 3) for x in wall]}
            res["ops_s"] = {"candidate": self._clocks_read(w)}
            if self.staged:
                res["staging"] = {"candidate": w.staging or "host"}
            # the worker's own times cannot exceed the caller's clock (plus a
            # little slack for the clock's own start and stop)
            res["timing_mismatch"] = sum(events) * n > 1.05 * sum(wall) * n + 1000.0
            if self.device != "cpu":
                self._attribute(w, source, rng, res)
            else:
                res["torch_fallback"] = None
                res["notes"].append("no kernel attribution without CUDA")
            phase("attribute")
            res["verdict"] = "pass"
            # nothing of the candidate may run while the baseline is timed
            ended, w = w.end(), None
            phase("end_candidate")
            if not ended["clean"]:
                res.update(verdict="error", feedback="the candidate's processes could not all be "
                           f"ended: {ended.get('why')}")
                return res
            if ended["strays"]:
                res["notes"].append(f"the candidate left {ended['strays']} process(es) running; "
                                    "they were ended before the baseline was timed")
            if why_no_baseline is None:
                self._time_baseline(res, warm, batches, n, checks, rng, lifted[0])
                phase("baseline_timed")
                self._launch_luck(res)
            elif baseline:
                res["notes"].append(f"no baseline: {why_no_baseline}")
        except WorkerTimeout as e:
            res.update(verdict="timeout", feedback=str(e))
        except WorkerDied as e:
            res.update(verdict="crash", feedback=str(e))
        except CandidateDenied as e:
            res.update(verdict="denied", feedback=f"refused by the sandbox: {e}")
        except RuntimeError as e:
            res.update(verdict="error", feedback=str(e))
        except Exception as e:  # noqa: BLE001 - a reply the checks let through, read wrongly here
            # never out of evaluate: a trainer would lose the sample, or its loop
            res.update(verdict="error", feedback=f"the evaluation failed: {type(e).__name__}: {e}")
        finally:
            if w:
                w.end()
            res["reward"] = reward_of(res)
            try:
                self._start_spare(next_source)
            except (OSError, WorkerDied) as e:  # no process now: the next evaluation starts its own
                res["notes"].append(f"no spare worker: {e}")
        return res

    def _verify(self, w, rng, verify_seeds, res):
        """Every case built and checked on verify_seeds fresh inputs: {case:
        lifted}, or None with the verdict in res."""
        lifted = {}
        for case, (name, _, _) in enumerate(self.imp.cases):
            b, _ = w.request({"op": "build", "case": case}, self.timeout_s)
            if not b["ok"]:
                res.update(verdict="denied" if b.get("denied") else "error",
                           feedback=("refused by the sandbox: " if b.get("denied") else "") +
                           f"case {name}: ModelNew(...): {b['error']}")
                return None
            lifted[case] = b["lifted"]
            seeds = [rng.getrandbits(62) for _ in range(verify_seeds)]
            self._batch(w, case, seeds)
            for s in seeds:
                why = self._check(w, case, s, lifted[case], f"case {name}")
                if why:
                    res.update(verdict="wrong", feedback=why)
                    return None
            res["cases"].append({"name": name, "passed": True, "weights": "lifted" if lifted[case] else "seeded"})
        return lifted

    def _time_baseline(self, res, warm, batches, calls, checks, rng, lifted):
        """The reference on the candidate's schedule, in its own worker, the
        candidate gone: baseline_us and the speedup."""
        if not self._check_baseline_paths(res):
            return
        b = self._base
        preps = []
        try:
            # its launch time now, the candidate gone: its ready's was taken
            # while the first candidate's worker started beside it
            r, _ = b.request({"op": "launch"}, self.call_timeout_s)
            self._base_state["launch_us"] = r["launch_us"] if r["ok"] else None
            self._clocks_reset(b)
            self._warmup(b, warm, rng, lifted)
            wall, _, _ = self._timed(b, batches, calls, checks, rng, lifted, preps=preps)
        except (WorkerDied, WorkerTimeout, CandidateDenied, RuntimeError) as e:
            self._end_baseline()
            res["notes"].append(f"the baseline could not be timed: {e}")
            return
        res["baseline_us"] = _median(wall)
        res["baseline_kind"] = self.baseline_kind
        if self._base_state.get("compile_seconds") is not None:
            res["baseline_compile_seconds"] = round(self._base_state["compile_seconds"], 3)
        res.setdefault("batches_us", {})["baseline"] = [round(x, 3) for x in wall]
        res.setdefault("ops_s", {})["baseline"] = self._clocks_read(b)
        if self.staged:
            res.setdefault("staging", {})["baseline"] = b.staging or "host"
        # prepare (fresh inputs, untimed) is recorded for both sides, not
        # charged: a fresh candidate process's prepare is slower than the
        # kept baseline worker's (cold memory), so the excess does not tell
        # work done there from a cold start (docs/kernelbench.md, open)
        res["baseline_prepare_us"] = _median(preps)
        res["speedup"] = res["baseline_us"] / res["time_us"] if res["time_us"] > 0 else None
        self._base_state["per_call_us"] = res["baseline_us"]

    def _launch_luck(self, res):
        """The two workers' launch times (each measured before any
        candidate code ran in it) and their ratio; a note when a
        launch-bound candidate's process was far from the baseline's."""
        res["launch_us"]["baseline"] = self._base_state.get("launch_us")
        luck = launch_luck(res["launch_us"]["candidate"], res["launch_us"]["baseline"])
        if res["launch_us"].get("overlapped"):  # its ready ran beside the baseline's worker starting
            luck = None
        res["launch_luck"] = None if luck is None else round(luck, 4)
        note = luck_note(luck, res.get("kernel_share"))
        if note:
            res["notes"].append(note)

    def _seal(self, w, res=None):
        s, _ = w.request({"op": "seal"}, self.call_timeout_s)
        if not s["ok"]:
            raise RuntimeError(s["error"])
        if res is not None:
            res["sandbox"] = s["sandbox"]  # now with exec refused
            res["gpu_paths"] = {"candidate_reported": s["gpu_paths"]}

    def _baseline_paths_differ(self):
        """None, or how the baseline worker's GPU paths (its seal's
        gpu_paths) are slower than this process's (_expected_paths). Only
        slower counts: a faster baseline inflates nothing, and this process
        may itself have fallen back (a trainer's full GPU)."""
        want, got = self._expected_paths, self._base_state.get("gpu_paths") or {}
        if not want:
            return None
        diff = [f"{k}: {got.get(k)!r}, here {want.get(k)!r}" for k in ("mask", "commitment")
                if _path_rank(got.get(k)) > _path_rank(want.get(k))]
        if not diff:
            return None
        why = f" ({got['mask_why']})" if got.get("mask_why") else ""
        return "; ".join(diff) + why

    def _check_baseline_paths(self, res):
        """The baseline's worker unmasks and commits inside its clock like
        the candidate's: on a slower path than this process chose (torch's
        steps, the strided kernel, nothing settled) its time grows and the
        speedup with it. Such a worker is replaced now, the candidate gone;
        if the new one differs too, no speed credit. True when the baseline
        may be timed. Both sides' paths go in the result (the candidate's
        as it reports them: its process is its own)."""
        res.setdefault("gpu_paths", {})["expected"] = self._expected_paths
        why = self._baseline_paths_differ()
        if why:
            self._end_baseline()
            self._start_baseline()
            failed = self._baseline_ready()
            why = failed or self._baseline_paths_differ()
        res["gpu_paths"]["baseline"] = self._base_state.get("gpu_paths")
        if why:
            res["notes"].append(f"no speed credit: the baseline's worker did not unmask or commit "
                                f"the way this process does, twice ({why})")
            return False
        return True

    def _sandbox_notes(self, status, res):
        res["sandbox"] = status
        if not status.get("applied"):
            res["notes"].append(f"no sandbox: {status.get('why', 'not applied')}")
            return
        res["notes"] += [f"sandbox: {m}" for m in missing(status)]
        if status.get("landlock") and status.get("landlock_why"):
            res["notes"].append(f"sandbox: Landlock {status['landlock_why']}")

    def _attribute(self, w, source, rng, res):
        a, _ = w.request({"op": "attribute", "case": 0, "seed": rng.getrandbits(62)}, self.timeout_s)
        if not a["ok"] and a.get("denied"):  # only a failed reply carries an error
            raise CandidateDenied(a["error"])
        if not a["ok"]:
            res["notes"].append(f"attribution failed: {a['error']}")
            res["torch_fallback"] = None
            return
        mine, other = attribute(a["kernels"], custom_kernel_names(source))
        res["kernels"] = {"custom": mine, "library": other}
        res["torch_fallback"] = not mine
        own = res["custom_share"] = custom_share(mine, other)
        res["mostly_torch"] = bool(mine) and own is not None and own < MOSTLY_TORCH_SHARE
        if res["mostly_torch"]:
            res["notes"].append(
                f"mostly torch: its own kernels take {own:.0%} of its GPU time, torch's or a "
                f"library's the rest: speed credit in proportion, full from {MOSTLY_TORCH_SHARE:.0%}")
        share = kernel_share(a["kernels"], res.get("time_us"))
        res["kernel_share"] = share
        if share is not None and share < LAUNCH_BOUND:
            res["notes"].append(
                f"launch-bound: its kernels take {share:.0%} of a call, the rest is the host's "
                "(Python, launches), so its time follows the host CPU and its speedup is noisy "
                "(docs/kernelbench.md)")

    def baseline_us(self, batches=5, calls=None):
        """The reference Model alone in the baseline worker, on evaluate's
        schedule: per-call us (median of the batches)."""
        with self._lock, self._on_device():
            self._start_baseline()
            why = self._baseline_ready()
            if why:
                raise RuntimeError(why)
            rng = random.Random(1)
            n = calls or self._calls_for(self._base_state["per_call_us"])
            lifted = self._base_state["lifted"]
            self._warmup(self._base, n, rng, lifted)
            wall, _, _ = self._timed(self._base, batches, n, 2, rng, lifted)
        _keep_warm(self)
        return _median(wall)

def evaluate_modelnew(imported, source, device="cuda", **kw):
    """One ModelNew source on one imported problem: a result dict (verdict,
    feedback, cases, time_us, baseline_us, speedup, compile_seconds,
    torch_fallback, kernels, reward)."""
    with Runner(imported, device, spare=False) as runner:
        return runner.evaluate(source, **kw)
