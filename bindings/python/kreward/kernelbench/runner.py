"""The public entry for ModelNew candidates: Runner, which owns a problem's
workers (processes.py) and evaluates one source at a time with the
components below, and evaluate_modelnew for a single source. The caller
makes the golden outputs with the problem's Model (reference.py), the
worker (worker.py) runs the candidate, and everything the worker says is
checked in this process.

Code map (no mixin: each component takes what it reads when it is made,
and the worker as an argument of each call):
- processes.py: the workers' life (candidate, spare, baseline; the sandbox
  mode and its "auto" fallback; build folders; keep-warm; ending them);
- worker_process.py: the protocol (a worker's pipes, deadlines, reply checks);
- transfer.py: a batch's inputs in (masked, region or shared buffer) and a
  call's outputs back (pipe or shared buffer);
- timing.py: one batch on the caller's clock and the schedule of batches;
- verification.py: every case built and checked, one call's outputs
  against the reference, the baseline's GPU paths;
- evaluation.py: the phases of one evaluation and its result dict;
- scoring.py: what a result's kernels mean, and the reward.

Defences, as for device-only candidates where they apply:
- fresh inputs per call, made from seeds by both sides (inputs.py): a
  candidate that caches outputs across calls returns stale ones;
- every case verified (the scaled ones catch shape overfitting);
- timed calls run back to back in batches (timing.py, transfer.py: staged
  masked, the outputs committed inside the clock); which calls are checked
  is drawn after the batch ran (the worker keeps every output until asked), so
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
warmup batch, discarded, a second of the timed size where that is larger,
then `batches` batches of the same number of calls, each followed by the
same fetches); the speedup is the ratio of the
medians. Once that worker has clean recent batches of the same schedule
(baseline_memo.py), it times 3 fresh ones and counts the memo's with them
when they agree, else the whole schedule. Batches grow until they take `batch_ms` (the request's own
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
import numbers
import os

import torch

from . import folders
from .evaluation import Evaluation
from .gate import NO_GATE
from .inputs import gpu_paths, nbytes, use_library
from .inputs import warm as warm_kernels
from .processes import Processes, keep_warm, library_path, start_sandbox_refused
from .reference import Reference
from .report import reward_of
from .scoring import (LAUNCH_BOUND, MOSTLY_TORCH_SHARE, attribute, custom_kernel_names, custom_share,
                      kernel_share, launch_luck, luck_note)
from .timing import MAX_CALLS, Timing, region_bytes
from .transfer import Transfer
from .verification import Verification

# names importable from here before the split into components, kept: the
# scoring helpers (reward_of and the attribution helpers lived here), and
# two of the workers' helpers. Tunables (KEEP_WARM and SHARED_BYTES in
# processes.py, MIN_CALLS and MAX_CALLS in timing.py, STAGE_CHUNK in
# transfer.py) are set in their own modules: a copy here would change nothing
_library_path, _start_sandbox_refused = library_path, start_sandbox_refused
__all__ = ["DEFAULT_CACHE", "Runner", "evaluate_modelnew",
           "LAUNCH_BOUND", "MOSTLY_TORCH_SHARE", "attribute", "custom_kernel_names", "custom_share",
           "kernel_share", "launch_luck", "luck_note", "reward_of"]

DEFAULT_CACHE = os.path.join(os.path.expanduser("~"), ".cache", "kreward", "kernelbench")


def _layout(imp, case):
    """The input tensors of one case: [{name, shape, dtype, init, ...}]."""
    shapes = imp.shapes(imp.cases[case][2])
    return [dict(t, shape=s, init=imp.init_for(case, t))
            for t, s in zip(imp.tensors, shapes) if t["role"] == "in"]


def _call_bytes(imp, case=0):
    """Bytes one call holds until its batch is dropped: its fresh inputs
    and its outputs (the timing case's by default)."""
    total = 0
    for t, shape in zip(imp.tensors, imp.shapes(imp.cases[case][2])):
        total += nbytes(shape, t["dtype"])
    return max(total, 1)


def _check_attribution(value):
    if value not in ("cupti", "torch"):
        raise ValueError(f"attribution must be 'cupti' or 'torch', not {value!r}")
    return value


class Runner:
    """Evaluates ModelNew sources for one imported problem, one at a time (a
    lock: two candidates timed at once would slow each other down). Between
    evaluations it keeps the baseline worker and, where the sandbox allows,
    a spare worker started ahead for the next candidate: close() ends them
    (or use the Runner as a context manager; dropping it ends them too).

    It owns its workers (processes.Processes) and, for each evaluation,
    makes the components that run it from its settings as they are then
    (timeouts may change between evaluations)."""

    def __init__(self, imported, device="cuda", cache_dir=None, timeout_s=600.0, call_timeout_s=60.0,
                 sandbox="auto", batch_ms=10.0, batch_bytes=None, spare=True, baseline="eager",
                 inputs=None, staging="auto", eval_timeout_s=None, cuda_arch=None, pch_dir=None,
                 baseline_memo=True, spare_ahead=True, attribution="cupti", zygote=True, piece_bytes=None):
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
        (default 1 GiB on the CPU, 2 GiB on a GPU).
        spare: start the next candidate's worker (torch imported, CUDA up,
        cuBLAS, cuDNN and Triton warmed) ahead, so the next one does not
        wait for it (in the "start" sandbox for the next source if named,
        else with a fresh folder the next new source takes).
        spare_ahead (with spare): start it while the candidate before it
        runs: with one candidate at a time as soon as that one is loaded,
        its start over (its ready read) before that candidate's first
        timed batch, so no timed phase runs beside a starting worker; in
        flight (where the lane's gate freezes a starting spare in every
        timed phase) as soon as that candidate has taken its worker;
        "after_load": after the load in flight too (to measure the gain);
        False: once that candidate is done (its baseline timed), as before
        (to measure the gain: results' phases_s start_and_load).
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
        the verdict is "timeout".
        cuda_arch: TORCH_CUDA_ARCH_LIST for the candidates' load_inline
        builds (the compile stage's, builds.py, so their GPU workers find
        its builds current; None: torch's own choice in the worker);
        pch_dir: the precompiled torch/extension.h's folder (pch.py),
        used once it exists.
        baseline_memo: keep the baseline's recent batch times per schedule
        (baseline_memo.py), so a later evaluation times 3 fresh baseline
        batches and counts the memo's with them when they agree (every
        result's baseline_memo says what happened); False: the baseline
        is timed in full every evaluation (to measure what it saves).
        attribution: how the candidate's kernels are attributed (one call
        traced after its timed batches): "cupti" (CUPTI's activity records
        through the libcupti torch loaded, kernel_trace.py; torch.profiler
        where none binds) or "torch" (a torch.profiler session: seconds of
        kineto start in each fresh worker). Results' attribution_via says
        which ran.
        zygote (default True since measured on a GPU: a worker's ready
        2.3x sooner on an H100, docs/results.md): fork every worker from the process's
        zygote, one process with torch already imported that every Runner
        shares (zygote.py: CUDA never started there), so a worker's start
        skips Python's and torch's (False: each worker is a fresh Python
        that imports torch);
        results' worker_start says how the candidate's worker started
        ("exec (why)" where the zygote could not).
        piece_bytes: the most of a batch's inputs handed to a GPU worker at
        once: the size of each worker's shared device buffer (default
        processes.SHARED_BYTES) and at least the chunk made and masked at
        once here (transfer.STAGE_CHUNK). Larger: fewer stage requests a
        batch (each a copy, a wait and a round trip), more device memory
        per worker (every worker has one: baselines, candidates, spares)."""
        _check_attribution(attribution)
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
        if device == "cuda":
            # the GPU this thread uses now, by number: the caller's inputs,
            # the workers (same CUDA_VISIBLE_DEVICES) and their staging
            # buffers all on it, whatever device is current later (a bare
            # "cuda" was the caller's current device here and device 0 in
            # every worker)
            device = f"cuda:{torch.cuda.current_device()}"
        use_library(library_path())  # the region's mask of host memory
        # a GPU worker stages the region into device memory (worker.py
        # stage); the CPU's tensors are views of the region itself, unless a
        # test asks for the GPU's way on the CPU (Runner.staged = True
        # before the first evaluation)
        staged = device != "cpu"
        # what unmasks the inputs and commits to the outputs on this GPU,
        # chosen in this process before any candidate runs; the baseline's
        # worker must come to the same (verification.check_baseline_paths):
        # its choice is made while a candidate shares the GPU, which could
        # make its kernels fail (memory held, a compile refused) and leave
        # it on a slower path inside its clock
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
        self.ref = Reference(imported, device)
        cache_dir = cache_dir or DEFAULT_CACHE
        # spare folders a killed trainer's Runners left (folders.py)
        folders.sweep_orphan_spares(cache_dir)
        self.call_timeout_s = call_timeout_s
        self.eval_timeout_s = 2 * timeout_s if eval_timeout_s is None else eval_timeout_s
        n = len(imported.cases)
        self.layouts = [_layout(imported, c) for c in range(n)]
        self.init_inputs = [list(self.ref.module(c).get_init_inputs()) for c in range(n)]
        json.dumps(self.init_inputs)  # plain values only: they travel as JSON
        self.values = [{str(k): v for k, v in imported.case_values(c).items()} for c in range(n)]
        self.state_names = [t["module_name"] for t in imported.tensors if t["source"] in ("param", "buffer")]
        with open(imported.path) as f:
            ref_source = f.read()
        self.batch_us = batch_ms * 1e3
        self.batch_bytes = batch_bytes or ((1 << 30) if device == "cpu" else (2 << 30))
        if piece_bytes is not None and (not isinstance(piece_bytes, numbers.Integral)
                                        or isinstance(piece_bytes, bool) or piece_bytes < (1 << 20)):
            raise ValueError(f"piece_bytes must be an integer of at least 1 MiB, not {piece_bytes!r}")
        self.piece_bytes = None if piece_bytes is None else int(piece_bytes)
        self.call_bytes = _call_bytes(imported)
        self.max_call_bytes = max(_call_bytes(imported, c) for c in range(n))
        # kept: an in-flight Runner (in_flight.py) makes a candidate slot of
        # its own per evaluation in flight from the same settings
        self._processes_args = dict(
            device=device, sandbox=sandbox, staging=staging, cache_dir=cache_dir, ref_source=ref_source,
            problem={"layouts": self.layouts, "init_inputs": self.init_inputs, "values": self.values,
                     "state_names": self.state_names},
            inputs_from=inputs, staged=staged,
            region_bytes=region_bytes(self.layouts, self.batch_bytes, self.max_call_bytes),
            # what a batch can stage at most: a small problem's batch is
            # its MAX_CALLS calls, far under batch_bytes (its workers'
            # staging buffers no larger)
            staging_bytes=region_bytes(self.layouts, min(self.batch_bytes, MAX_CALLS * self.max_call_bytes),
                                       self.max_call_bytes),
            max_call_bytes=self.max_call_bytes, spare=spare, compile_baseline=baseline == "compile",
            timeout_s=timeout_s, cuda_arch=cuda_arch, pch_dir=pch_dir, baseline_memo=baseline_memo,
            spare_ahead=spare_ahead, attribution=attribution, zygote=zygote, shared_bytes=self.piece_bytes)
        self._processes = Processes(**self._processes_args)

    def slot_processes(self):
        """Workers for one more candidate in flight (in_flight.py): a
        Processes with this Runner's settings as they are now, whose
        candidate worker and spare are its own (its baseline stays unused:
        the Runner's serves every slot)."""
        # "auto" decided once: after a fallback, "init" for every worker
        sandbox = "init" if self._processes.sandbox_fallback is not None else self._processes_args["sandbox"]
        p = Processes(**dict(self._processes_args, sandbox=sandbox))
        for name in ("staged", "inputs_from", "timeout_s", "keep_spare", "spare_ahead", "attribution",
                     "ipc_why", "sandbox_fallback"):
            setattr(p, name, getattr(self._processes, name))
        return p

    # ---- settings the workers' owner keeps (processes.Processes)
    @property
    def staged(self):
        """Whether a worker stages its inputs to its device (a GPU's way; set
        True on the CPU before the first evaluation to test it there)."""
        return self._processes.staged

    @staged.setter
    def staged(self, value):
        self._processes.staged = value

    @property
    def inputs_from(self):
        """Who makes a timed batch's inputs: "caller" or "worker"."""
        return self._processes.inputs_from

    @inputs_from.setter
    def inputs_from(self, value):
        self._processes.inputs_from = value

    @property
    def timeout_s(self):
        return self._processes.timeout_s

    @timeout_s.setter
    def timeout_s(self, value):
        self._processes.timeout_s = value

    @property
    def spare(self):
        return self._processes.keep_spare

    @spare.setter
    def spare(self, value):
        self._processes.keep_spare = value

    @property
    def spare_ahead(self):
        """Whether the spare starts while the candidate before it runs."""
        return self._processes.spare_ahead

    @spare_ahead.setter
    def spare_ahead(self, value):
        self._processes.spare_ahead = value

    @property
    def attribution(self):
        """"cupti" or "torch": how the next started worker attributes."""
        return self._processes.attribution

    @attribution.setter
    def attribution(self, value):
        self._processes.attribution = _check_attribution(value)

    @property
    def sandbox(self):
        """The sandbox workers start in now: "start", "init" or None."""
        return self._processes.sandbox

    @property
    def sandbox_fallback(self):
        """"auto": why "start" gave way to "init" (None while it has not)."""
        return self._processes.sandbox_fallback

    @property
    def ipc_why(self):
        """Why a GPU worker gets no shared device buffer (None: it does)."""
        return self._processes.ipc_why

    @property
    def cache_dir(self):
        return self._processes.cache_dir

    # ---- lifetime
    def close(self):
        """Ends the baseline worker and the spare (a later evaluation starts
        them again). From another thread it ends an evaluation in progress
        too (its workers die: the result says so); a worker's shared buffer
        is freed only between the evaluation's copies into it (its lock)."""
        processes = getattr(self, "_processes", None)
        if processes is not None:
            processes.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    # ---- evaluation
    def _on_device(self):
        """This Runner's GPU as the thread's current device while it works:
        Triton launches (the mask, the commitment) on the current device's
        stream whatever device their tensors are on, so with a trainer's
        thread on another GPU the mask would run unordered with the copies
        after it (or fault) (helper-36)."""
        if self.device == "cpu":
            return contextlib.nullcontext()
        return torch.cuda.device(self.device)

    def _evaluation(self, processes=None, gate=NO_GATE):
        """The components of one evaluation, made from the settings now
        (processes: an in-flight slot's, in_flight.Slot; gate: its lane's)."""
        caller_s = collections.Counter()  # this process's own seconds per step (results' ops_s)
        transfer = Transfer(layouts=self.layouts, device=self.device, staged=self.staged,
                            call_timeout_s=self.call_timeout_s, caller_s=caller_s,
                            chunk_bytes=self._processes.shared_bytes)  # (a chunk fills a buffer)
        timing = Timing(transfer=transfer, inputs_from=self.inputs_from, staged=self.staged,
                        call_timeout_s=self.call_timeout_s, caller_s=caller_s, batch_us=self.batch_us,
                        batch_bytes=self.batch_bytes, call_bytes=self.call_bytes)
        verification = Verification(imp=self.imp, layouts=self.layouts, device=self.device, reference=self.ref,
                                    transfer=transfer, timing=timing, caller_s=caller_s,
                                    timeout_s=self.timeout_s, gate=gate,
                                    profile_go=os.environ.get("KR_PROFILE", "0") not in ("", "0"))
        return Evaluation(processes=processes or self._processes, timing=timing, verification=verification,
                          device=self.device, staged=self.staged, baseline_kind=self.baseline_kind,
                          expected_paths=self._expected_paths, timeout_s=self.timeout_s,
                          call_timeout_s=self.call_timeout_s, eval_timeout_s=self.eval_timeout_s,
                          gate=gate)

    def evaluate(self, source, seed=None, verify_seeds=2, batches=5, calls=None, checks=2,
                 baseline=True, class_name="ModelNew", next_source=None, baseline_memo=True,
                 slot=None, gate=NO_GATE):
        """calls: per timed batch; None sizes batches to batch_ms (both
        sides get the same number). seed: None (the default) takes every
        input seed from the OS; an integer makes the inputs reproducible
        (tests, debugging) and so predictable to a candidate that recovers
        the generator from the seeds it sees: not for training.
        next_source: the source evaluated next, if known, so its worker can
        start ahead in the "start" sandbox (evaluate_many passes it).
        baseline_memo: False, this evaluation times the baseline in full
        and adds nothing to the memo (the "precise" preset: the C path's
        precise never shares either); Runner(baseline_memo=False) turns it
        off for every evaluation.
        slot, gate: one of several candidates in flight (in_flight.py says
        who passes them): the slot's own candidate worker beside the
        others', this Runner's baseline, the gate deciding when it is timed;
        the Runner's lock is then the in-flight Runner's to hold."""
        def run():
            return self._evaluation(slot, gate).run(source, seed, verify_seeds, batches, calls, checks,
                                                    baseline, class_name, next_source, baseline_memo)
        if slot is not None:
            with self._on_device():
                res = run()
        else:
            with self._processes.lock, self._on_device():
                res = run()
        # the problem's own verdict on itself (soundness.py): every report says it
        res.setdefault("weak_problem", self.imp.weak)
        keep_warm(self._processes)
        return res

    def evaluate_many(self, sources, **kw):
        """evaluate() for each source in turn, a result each in order; each
        candidate's worker starts while the one before runs (spare_ahead;
        else while it finishes: its baseline timed, its processes ended) in
        either sandbox."""
        sources = list(sources)
        return [self.evaluate(src, next_source=sources[i + 1] if i + 1 < len(sources) else None, **kw)
                for i, src in enumerate(sources)]

    def wait_spare(self):
        """Waits until the spare worker's start is over (its ready read and
        kept for the candidate that takes it), for a caller about to time
        something else on this device (bench/bench_kernelbench.py: a spare
        started at an evaluation's end, after a candidate that failed
        before its timed batches, would start beside KernelBench's timing).
        None, or why there is no spare (none kept, or it failed and was
        ended)."""
        with self._processes.lock:
            if self._processes.spare is None:
                return "no spare worker"
            return self._processes.spare_ready()

    def baseline_us(self, batches=5, calls=None):
        """The reference Model alone in the baseline worker, on evaluate's
        schedule: per-call us (median of the batches)."""
        with self._processes.lock, self._on_device():
            us = self._evaluation().baseline_alone(batches, calls)
        keep_warm(self._processes)
        return us


def evaluate_modelnew(imported, source, device="cuda", **kw):
    """One ModelNew source on one imported problem: a result dict (verdict,
    feedback, cases, time_us, baseline_us, speedup, compile_seconds,
    torch_fallback, kernels, reward)."""
    with Runner(imported, device, spare=False) as runner:
        return runner.evaluate(source, **kw)
