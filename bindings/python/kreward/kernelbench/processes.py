"""The life of a Runner's ModelNew workers (worker_process.WorkerProcess):
- starting them: the candidate's (the spare, if one started ahead can
  take its source), the spare for the next candidate (started while the
  candidate before it runs, its start over before that one's timed
  batches, or once that one is done), and the baseline's,
  which loads Model, builds, seals and calibrates while the candidate is
  verified and lives as long as the Runner;
- the sandbox each starts in: "start" or "init", and the "auto" decision
  (the first "start" worker that fails for the sandbox's reason turns
  every later one to "init", once);
- their build folders (folders.py: a source's, or a "start" spare's fresh
  one) and what their builds depend on besides (build_env.py: the CUDA
  architectures and the precompiled header, as the compile stage had
  them), their input region and shared device buffer (one per worker);
- ending them: close(), and the Runners past KEEP_WARM ending theirs
  (keep_warm).
The spare's own life (started ahead, waited for, kept under the lane's
cap, handed to another problem's slot) is spare_workers.py's; the
baseline's worker and its memo baseline_worker.py's: both mixins of
Processes. What the workers are asked once started is the evaluation's
(evaluation.py, timing.py, verification.py)."""
import collections
import contextlib
import os
import re
import threading
import time
import weakref

import torch

from .. import _lib
from . import folders, triton_cache, triton_launchers
from .baseline_memo import BaselineMemo
from .baseline_worker import BaselineWorker
from .build_env import build_env
from .cuda_ipc import OUT_OF_MEMORY, new_buffer
from .spare_workers import SpareWorkers, _give_back_place
from .worker_process import (WorkerDied, WorkerProcess, WorkerProtocolError, WorkerTimeout, optional_number,
                             printable, worker_environment)
from .zygote import ZygoteLost, ZygoteUnavailable, shared_zygote

KEEP_WARM = 8             # Runners whose workers stay between evaluations (the most recent)
# a GPU worker's own device buffer (cuda_ipc.py), through which a masked
# chunk reaches it in pieces of this size at most (smaller where a batch's
# inputs are: staging_bytes): one per worker, on the caller's GPU. A piece
# costs a copy, a wait and a request: at 32 MiB a 2 GiB batch was 64 of
# them, and `stage` took as long as write_region (0.13 s a side of a
# 4096^2 relu's timed phase, 9d75b9e on an H100); at 128 MiB 16, and a
# side's stage 0.044 s against 0.018 at 512 MiB (4), its write_region 0.053
# against 0.034 (the chunk as large: fewer mask launches), the GRPO batch
# 1.18 against 1.47 candidates/s (0c05482, H100; docs/results.md). Workers
# kept: KEEP_WARM Runners' three (12 GiB at most, only where a problem's
# batches are that large); with K in flight a lane's Runners' baselines, K
# candidate workers and at most its max_spares spares (in_flight.LaneSpares:
# 16 workers, 8 GiB, at K = 4 and the defaults). A worker whose buffer the
# device refuses (out of memory) stages through the host region instead:
# slower, never wrong. Runner(piece_bytes=) sets it per Runner.
SHARED_BYTES = 512 << 20


def library_path():
    """The libkreward file this process loaded (the worker loads it by path:
    the sandbox, the input region's mask)."""
    return os.path.realpath(_lib.path) if os.path.exists(_lib.path) else _lib.path


def start_sandbox_refused(ready):
    """Whether a failed ready reply is the "start" sandbox's doing: the
    sandbox not applied, or CUDA refused inside it (error 304, "OS call
    failed", as the H200's driver said until /proc/self/task could be
    truncated); not memory, a busy device or anything else."""
    why = str(ready.get("error", ""))
    return (bool(ready.get("sandbox_failed")) or "OS call failed" in why
            or re.search(r"\b(error|returned) 304\b", why, re.IGNORECASE) is not None)


_warm = collections.OrderedDict()  # id(Processes) -> weakref, the most recently used last
_warm_lock = threading.RLock()  # a Runner's __del__ may come while it is held


def keep_warm(processes):
    """Marks these workers as the most recently used; ends those of the
    Runners past KEEP_WARM (each holds a torch process or two, with a CUDA
    context each: a program that makes a Runner per problem and keeps them
    would otherwise keep them all). Workers in use (their lock held: an
    evaluation) are skipped; ended ones start again when next used."""
    with _warm_lock:
        _warm.pop(id(processes), None)
        _warm[id(processes)] = weakref.ref(processes)
        old = [(k, ref) for k, ref in _warm.items()][:max(0, len(_warm) - KEEP_WARM)]
    for key, ref in old:
        other = ref()
        if other is None:
            with _warm_lock:
                _warm.pop(key, None)
        elif other.lock.acquire(blocking=False):
            try:
                other.close()
            finally:
                other.lock.release()


def _start_split(w, ready):
    """Where a worker's start went, seconds (the worker's word on its own
    clock readings, kept as numbers in range; for the record only): from
    its spawn to the start of its ready (fork, sandbox, modules), the
    ready's wall (frozen time included) and its steps outside the warm."""
    began, ended = optional_number(ready.get("began_at")), optional_number(ready.get("ended_at"))
    split = {}
    if began is not None and ended is not None and w.started <= began <= ended <= time.monotonic():
        split = {"to_ready": round(began - w.started, 4), "ready": round(ended - began, 4)}
    steps = ready.get("ready_steps_s")
    if isinstance(steps, dict):
        for k, v in list(steps.items())[:6]:
            v = optional_number(v)
            if v is not None and 0 <= v < 1e4:
                split[f"ready.{str(k)[:24]}"] = round(v, 4)
    return split


class Processes(SpareWorkers, BaselineWorker):
    """The workers of one Runner: the baseline's and the spare between
    evaluations, the candidate's during one. `lock` is held while an
    evaluation uses them (keep_warm leaves such workers alone).

    device: the workers' device; sandbox: "auto", "start", "init" or None
    (Runner's); staging: "auto" or "host" (Runner's); cache_dir: where the
    build folders are; ref_source: the problem file's text (the baseline's
    source); problem: what every load request carries of the problem
    (layouts, init_inputs, values, state_names); inputs_from: "caller"
    (each worker gets an input region of region_bytes) or "worker";
    staged: whether a worker stages its inputs to its device (then it gets
    a shared device buffer where the driver allows, of staging_bytes or
    shared_bytes (default SHARED_BYTES), the smaller; staging_bytes: the
    most a batch's inputs take in the region, None: region_bytes);
    max_call_bytes: the largest case's inputs and outputs (a reply's
    bound); spare: start the next candidate's worker ahead; spare_ahead:
    start it while the candidate before it runs, once that one is loaded
    (else once it is done); compile_baseline: the baseline is
    torch.compile(Model); timeout_s: a start's or a load's limit;
    cuda_arch: TORCH_CUDA_ARCH_LIST for load_inline builds (None: torch's
    own choice); pch_dir: the precompiled header's folder (pch.py), used
    once it exists (None: none); baseline_memo: keep the baseline's recent
    times for the next evaluations (False: every evaluation times it in
    full); attribution: how a candidate's worker attributes a call's
    kernels: "cupti" (kernel_trace.py, torch.profiler where no CUPTI
    binds) or "torch" (torch.profiler always); zygote: fork the workers
    from the process's zygote, torch imported there (zygote.py; False:
    each worker starts by exec and imports torch itself)."""

    def __init__(self, *, device, sandbox, staging, cache_dir, ref_source, problem, inputs_from, staged,
                 region_bytes, max_call_bytes, spare, compile_baseline, timeout_s, cuda_arch=None,
                 pch_dir=None, baseline_memo=True, spare_ahead=True, attribution="cupti", zygote=True,
                 staging_bytes=None, shared_bytes=None):
        self.device, self.cache_dir, self._ref_source, self._problem = device, cache_dir, ref_source, problem
        self.inputs_from, self.staged, self.region_bytes = inputs_from, staged, region_bytes
        self.staging_bytes = region_bytes if staging_bytes is None else min(staging_bytes, region_bytes)
        self.shared_bytes = SHARED_BYTES if shared_bytes is None else shared_bytes
        self.max_call_bytes, self.keep_spare, self.compile_baseline = max_call_bytes, spare, compile_baseline
        self.spare_ahead, self.attribution = spare_ahead, attribution
        self.timeout_s = timeout_s
        self.cuda_arch, self.pch_dir = cuda_arch, pch_dir
        self.sandbox = "start" if sandbox == "auto" else sandbox
        # "auto": why "start" gave way to "init" (None while it has not);
        # decided once, by the first candidate worker's ready, which runs no
        # source (start_candidate)
        self._may_fall_back, self.sandbox_fallback = sandbox == "auto", None
        # why a candidate without a spare no longer starts in a fresh folder
        # (_spawn_for), once one could not
        self.fresh_failed = None
        # the context a fresh folder's start and ready run in (in_flight.py:
        # the lane gate's shared step)
        self.start_step = contextlib.nullcontext
        if self.sandbox != "start":  # before any of its workers runs a candidate
            folders.mark_unsandboxed(cache_dir)
        # why a GPU worker gets no device buffer of its own to stage from
        # (_shared_buffer): "host" asked for, or the driver refused one here
        self.ipc_why = "asked for" if staging == "host" else None
        self.lock = threading.Lock()
        self.baseline = None       # the baseline worker, once started
        self.baseline_facts = {}   # ready, lifted, gpu_paths, launch_us, per_call_us, ...
        # the baseline worker's recent times (None: off); its samples were
        # measured in that one process (its memory, its compiled graphs),
        # so they go with it: _baseline_gone
        self.baseline_memo = BaselineMemo() if baseline_memo else None
        self.spare = None
        # in flight: the lane's cap on spares (in_flight.LaneSpares; None:
        # none), where a spare takes a place before its process starts
        self.lane_spares = None
        self.candidate = None      # the candidate's worker of the evaluation in progress
        # in flight: the evaluation's lost-time clock (in_flight.py's Slot),
        # given to its candidate worker before that worker's first request
        self.clock = None
        self.spare_source = None   # "start": the source the spare was started for
        self.spare_folder = None   # "start", no source named: the fresh folder it writes
        # the workers forked from the process's zygote (zygote=True): asked
        # for now, so torch's import in it overlaps the caller's own setup
        self.use_zygote, self.zygote_why = zygote, None
        self._zygote()

    def close(self):
        """Ends the baseline worker and the spare (a later evaluation starts
        them again). From another thread it ends an evaluation in progress
        too (its workers die: the result says so); a worker's shared buffer
        is freed only between the evaluation's copies into it (its lock)."""
        # the candidate's worker first: an evaluation in progress (another
        # thread's; a scheduler's backstop) ends with it, its result says so
        # detached first: a start waiting for this candidate's ready
        # (_spawn_for) sees at once that it was closed, not a failed start
        workers, self.candidate, self.baseline = (self.candidate, self.baseline), None, None
        for w in workers:
            if w is not None:
                w.end()
        self.end_spare()  # (its folder, its place in the lane's cap)
        self._baseline_gone()
        with _warm_lock:
            _warm.pop(id(self), None)

    def _zygote(self):
        """The process's zygote (zygote.shared_zygote: one for every Runner,
        started again where it died), or None: not asked for, or none can
        start here (zygote_why; workers start by exec, their results'
        worker_start says why)."""
        if not self.use_zygote or self.zygote_why is not None:
            return None
        try:
            return shared_zygote(worker_environment())
        except (ZygoteUnavailable, OSError) as e:
            self.zygote_why = f"{type(e).__name__}: {e}"[:400]
            return None

    # ---- starting a worker
    def _folder(self, source):
        return folders.source_folder(self.cache_dir, source)

    def _sandbox_config(self, ext):
        if not self.sandbox:
            return None
        return {"library": library_path(),
                "write": ext, "gpu": self.device != "cpu", "when": self.sandbox}

    def _config_reading(self, ext, reads):
        """_sandbox_config with the build's extra read folders (build_env)."""
        c = self._sandbox_config(ext)
        return dict(c, reads=list(reads)) if c is not None and reads else c

    def _shared_buffer(self):
        """A device buffer for one GPU worker to stage its batches' masked
        inputs from (cuda_ipc.CallerBuffer; transfer.py put): one per
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
            return new_buffer(torch, self.device, self._shared_bytes()), None
        except Exception as e:  # noqa: BLE001 - any refusal (a driver without the calls: AttributeError)
            why = f"no shared device buffer: {type(e).__name__}: {e}"[:400]
            if getattr(e, "code", None) != OUT_OF_MEMORY:
                self.ipc_why = why
            return None, why

    def _shared_bytes(self):
        """The size of the device buffer each of these workers gets."""
        return min(self.staging_bytes, self.shared_bytes)

    def _spawn(self, source=None, ext=None, launchers=False):
        """A worker process, told to get ready (torch, CUDA) at once. The
        "start" sandbox needs its write folder now (the source's, or ext: a
        fresh one for a source not yet known); "init" gets it at load.
        launchers: its ready builds Triton launchers for later candidates
        (_launchers_ahead: a spare's, never on a waiting candidate's path)."""
        if ext is None and source is not None:
            ext = self._folder(source)
        if self.sandbox != "start":  # (again: the mark may have been removed since)
            folders.mark_unsandboxed(self.cache_dir)
        # the source's folders as its environment from the start only in the
        # "start" sandbox, which is in place from the first instruction on;
        # an "init" worker gets them with load, when its sandbox comes: its
        # ready runs unsandboxed and compiles (Triton loads the .so files it
        # built from TRITON_CACHE_DIR), and a candidate's folder holds what
        # its earlier worker left there (helper-33)
        env = folders.worker_env(ext) if ext is not None and self.sandbox == "start" else None
        # decided once per worker, at its start: a "start" worker's sandbox
        # is entered then, and a header that appears later, named at load
        # but not granted, would go unused (build_env.py)
        benv, reads = build_env(self.cuda_arch, self.pch_dir)
        self._plant(ext if env is not None else None, source)
        region = self.inputs_from == "caller"
        zygote, lost = self._zygote(), None
        while True:
            shared, why = self._shared_buffer() if region and self.staged else (None, None)
            try:
                w = WorkerProcess(None if env is None else {**env, **benv},
                                  self._config_reading(ext, reads) if self.sandbox == "start" else None,
                                  region_bytes=self.region_bytes if region else 0, shared=shared,
                                  zygote=zygote)
                break
            except ZygoteLost as e:
                # sent, its answer lost: what the zygote forked may hold that
                # start's descriptors and device buffer, so this start is by
                # exec with new ones (the zygote is ended; the next worker
                # gets another)
                if shared is not None:
                    shared.close()
                zygote, lost = None, f"exec (the zygote lost this start: {e})"[:400]
            except BaseException:
                if shared is not None:
                    shared.close()
                raise
        if lost:
            w.started_by = lost
        w.build_env = (benv, reads)
        w.folder = ext  # its build folder, where known now ("start": the one it may write)
        w.beside = False  # whether its ready ran beside another candidate (start_spare)
        if region and self.staged and w.shared is None and w.staging is None:
            w.staging = f"host ({why})"
        w.max_payload = self._payload_bound()
        w.launchers_asked = self._launchers_ahead(env, source) if launchers else []  # (settled by _name_fresh)
        try:
            w.send({"op": "ready", "device": self.device, "library": library_path(),
                    "shared_bytes": w.shared.nbytes if w.shared is not None else None,
                    "triton_driver": self._trusted_cache(env, source), "tracer": self.attribution,
                    "launchers": w.launchers_asked})
        except BaseException:
            w.end()
            raise
        return w

    def _payload_bound(self):
        # a reply carries at most one call's outputs (a fetch): the caller
        # never reads more than twice the largest case's inputs and outputs
        # (a scaled case may grow a size: "odd" rounds up)
        return 2 * self.max_call_bytes + (1 << 20)

    def _trusted_cache(self, env, source):
        """Whether a worker may load from its Triton cache in ready, before
        its isolation filter (Triton's driver's helper module, the library's
        kernels' launchers): only where no candidate can have written that
        cache: the caller's own ("init": env None), a fresh folder (source
        None), the reference's; never a source's folder (an earlier worker
        of that source, its build in the compile stage, or a candidate
        running now may have put a module there), and no folder of a
        cache_dir where workers outside the "start" sandbox ran (their
        candidates' threads could write any of it: folders.unsandboxed)."""
        if env is None:
            return True
        return (source is None or source == self._ref_source) and self._no_unsandboxed_writers()

    def _launchers_ahead(self, env, source):
        """The Triton launchers a worker's ready builds for later candidates
        (triton_launchers.to_build): only a "start" worker's fresh folder,
        which is remembered after its ready (_name_fresh) and planted in
        every later candidate's; none on the CPU."""
        if self.device == "cpu" or env is None or source is not None or not self._no_unsandboxed_writers() \
                or not triton_cache.launcher_room():
            return []
        return triton_launchers.to_build()

    def _no_unsandboxed_writers(self):
        """Whether no worker outside the "start" sandbox can have written a
        folder of this cache_dir: none ran on it (folders.unsandboxed, any
        process's), and none ran in this process on any cache_dir (their
        candidates' threads have the user's file access)."""
        return not folders.unsandboxed(self.cache_dir) and not folders.any_unsandboxed()

    def _plant(self, ext, source):
        """The mask's and the commitment's Triton kernels, copied into a
        "start" candidate worker's folder ext (its Triton cache), so they
        are not compiled again in every candidate's folder: a source's
        folder gets those the reference's worker compiled and those fresh
        folders compiled (the process's memo, triton_cache.remember); a
        fresh folder (source None) the memo's alone: what it holds after
        its ready is remembered, and the reference's folder, written by the
        problem's code, must not reach another problem's workers that way.
        Nothing where ext is None (the worker's cache is not a folder of
        its own) or on the CPU."""
        if ext is None or source == self._ref_source or self.device == "cpu" or \
                folders.unsandboxed(self.cache_dir):
            return 0
        memo = None if folders.any_unsandboxed() else triton_cache.remembered()
        try:
            return triton_cache.plant(None if source is None else
                                      os.path.join(self._folder(self._ref_source), "triton"),
                                      os.path.realpath(ext),  # (a source's name may link a spare's folder)
                                      extra=memo)
        except Exception:  # noqa: BLE001 - then its worker compiles them, as before
            return 0

    def plant_late(self, w, source):
        """The library's kernels planted in candidate worker w's folder again,
        just before its verify: a problem's first candidate's worker starts
        beside the reference's, before that one compiled them (all or some),
        and compiled them itself in its first batch (the unmasking took
        2.2-2.8 s of its first `go` on an H200 at 518f1ee); by its verify the
        reference's worker has. Entries already there are skipped, so a
        worker planted in full gets nothing new (the reference's entries are
        read again: a few MB). Safe after the candidate's code ran:
        triton_cache.plant writes nothing through a path the candidate's
        folder could hold, and what the candidate left there under a
        kernel's name is its own worker's business."""
        if self.sandbox == "start":
            self._plant(getattr(w, "folder", None), source)

    def _send_load(self, w, source, class_name, ext=None):
        ext = ext or self._folder(source)
        benv, reads = getattr(w, "build_env", None) or build_env(self.cuda_arch, self.pch_dir)
        w.send({"op": "load", "source": source, "class_name": class_name, "device": self.device,
                "ext": ext,
                "library": library_path(),
                **self._problem, "cache_dir": self.cache_dir,
                "env": {**folders.worker_env(ext), **benv},
                "sandbox": self._config_reading(ext, reads)},
               # (a source larger than the pipe waits for the worker's ready)
               timeout_s=self.timeout_s)

    # ---- the candidate's worker and the spare
    def _after_taken(self, w, on_taken):
        """on_taken (start_candidate), then: a close() from another thread
        meanwhile (an abort) ended w, which the wait for its ready says; the
        spare started for the next candidate after that close goes too."""
        on_taken()
        if self.candidate is not w:
            self.end_spare()

    def start_candidate(self, source, class_name, limit=(None, None), on_taken=None, take_spare=True):
        """The candidate's worker (the spare if there is one that can take
        this source) and its load reply. limit: (time.monotonic() deadline,
        why) past which no reply of this worker is waited for
        (WorkerProcess.limit_until). on_taken: called once the slot's spare
        is taken (or, with none, once the candidate's own worker is
        spawned), before any wait for that worker's ready: the evaluation
        starts the next candidate's spare there, so its start has the
        wait, the load and the whole evaluation to run in, not what is
        left after the load. take_spare False: a worker of its own (a retry
        after the spare failed: the spare there now is the next
        candidate's)."""
        t_turn = time.monotonic()
        w = spare_source = spare_ext = None
        if take_spare:
            if self.spare is None and self.lane_spares is not None and self.keep_spare:
                # in flight: another problem's idle slot's spare, where one fits
                self.lane_spares.hand_over(self, source)
            w, self.spare = self.spare, None
            # taken, the spare is this slot's candidate worker (a lane has K
            # at most, one per evaluation in flight): its place in the cap is
            # free; and close() from another thread ends it from now on, also
            # while its ready is waited for below (helper-34)
            _give_back_place(w)
            spare_source, self.spare_source = self.spare_source, None
            spare_ext, self.spare_folder = self.spare_folder, None
        self.candidate = w
        if w is not None and on_taken is not None:
            on_taken, taken = None, on_taken
            self._after_taken(w, taken)
        # a "start" worker's sandbox lets it write one build folder only: a
        # spare started for another source cannot take this one; one started
        # with a fresh folder (no source named) takes a source that has
        # none yet
        ext = spare_failed = None
        # why this candidate's worker starts now, at its turn (None: a spare
        # takes it): the bench counts them, so where starts go cold shows
        cold = "no spare in its slot" if w is None else None
        if w is not None and self.sandbox == "start" and spare_source != source:
            # its ready over first (read once, kept: receive_ready): a
            # fresh folder's spare warms the library's kernels there in
            # ready, loading the launchers planted in it, and from the
            # adoption on the folder is the source's, which every other
            # worker of that source (another slot's, another lane's) may
            # write: before its isolation filter a spare must load nothing
            # from a folder a candidate can write (helper-31)
            w.clock = self.clock  # (its wait, frozen or not, on this evaluation's limit)
            w.limit_until(*limit)
            fresh = spare_source is None and spare_ext
            if fresh:
                ext, spare_failed = self._name_fresh(w, spare_ext, source)
            if ext is None:
                w.end()
                folders.discard(spare_ext)
                w = None
                cold = "its spare's ready failed" if spare_failed else "its spare was started for another source"
        if w is not None and not w.alive():
            w.end()
            w = None
            cold = "its spare had ended"
        ahead = w is not None
        # a spare whose ready ran beside the candidate before it measured its
        # launch time against that one's work: it is measured again now,
        # before its load, with that candidate gone
        again = ahead and w.beside
        # a worker measured now beside the baseline's own start measures its
        # launch time against that start's load (launch_luck: none then)
        overlapped = (again or not ahead) and self.baseline is not None and not self.baseline_facts.get("ready")
        if ahead:
            # (a spare started beside the first candidate may have come
            # before the reference's worker compiled the library's kernels)
            self._plant(w.folder if self.sandbox == "start" else None, source)
        if w is None:
            w, ext = self._spawn_for(source, limit)
        self.candidate = w  # close() from another thread ends it
        w.clock = self.clock
        w.limit_until(*limit)
        if on_taken is not None:
            self._after_taken(w, on_taken)
        try:
            try:
                # (read already where the evaluation before waited for it,
                # or its fresh folder was named). Read before the load is
                # sent: once the candidate's code runs in the worker it could
                # read an unread reply off its pipe and write its own
                # (helper-41), a failed ready among them
                ready = w.receive_ready(self.timeout_s)
                # (a fresh folder's spare was waited for at its naming, a
                # worker started now at its start: all of it since the turn)
                t_ready = time.monotonic() - t_turn
                probe = w.request({"op": "launch"}, self.timeout_s)[0] if again and ready["ok"] else None
            except (WorkerDied, WorkerTimeout, WorkerProtocolError, OSError) as e:
                if not ahead or self.candidate is not w:  # (closed meanwhile: an abort stands)
                    raise
                # a spare that died or hung before its ready's reply, no
                # source sent to it yet, is the harness's loss, never the
                # candidate's: in flight nothing waited for it before (the
                # gate froze it instead)
                w.end()
                w, loaded = self.start_candidate(source, class_name, limit, take_spare=False)
                loaded["spare_failed"] = printable(f"{type(e).__name__}: {e}")[:400]
                return w, loaded
            if not ready["ok"] and self.sandbox == "start" and self._may_fall_back and \
                    start_sandbox_refused(ready):
                # the worker failed in its ready, before it ran any source
                # (it refuses load after a failed ready), on this Runner's
                # first "start" worker and for the sandbox's reason only: a
                # candidate cannot make a later worker fail and so weaken
                # the sandbox of the candidates after it
                w.end()
                self._fall_back_to_init(ready["error"])
                return self.start_candidate(source, class_name, limit)
            if not ready["ok"] and ahead:
                # a spare that did not start is the harness's loss, never the
                # candidate's: it gets a worker of its own, started now
                w.end()
                w, loaded = self.start_candidate(source, class_name, limit, take_spare=False)
                loaded["spare_failed"] = printable(ready["error"])[:400]
                return w, loaded
            if not ready["ok"]:
                raise RuntimeError(f"the worker did not start: {ready['error']}")
            if self.sandbox == "start":
                self._may_fall_back = False  # decided: it starts here
            launch_us = ready.get("launch_us")
            if probe is not None:
                launch_us = probe["launch_us"] if probe["ok"] else None
            self._send_load(w, source, class_name, ext)
            loaded = w.receive(self.timeout_s)[0]
            loaded["no_subreaper"] = ready.get("no_subreaper")
            loaded["launch_us"] = launch_us
            loaded["launch_overlapped"] = overlapped
            loaded["started_ahead"] = ahead
            loaded["started_cold_why"] = cold
            loaded["ready_wait_s"] = t_ready  # (its turn's wait until its worker was ready)
            loaded["worker_start"] = w.started_by
            loaded["warm_s"] = optional_number(ready.get("warm_s"))
            steps = ready.get("warm_steps_s")
            if isinstance(steps, dict):  # (the worker's word: numbers only, a few names)
                loaded["warm_steps_s"] = {str(k)[:40]: optional_number(v) for k, v in list(steps.items())[:8]}
            loaded["worker_start_s"] = _start_split(w, ready)
            if spare_failed:
                loaded["spare_failed"] = spare_failed
            return w, loaded
        except BaseException:
            w.end()
            raise

    def _spawn_for(self, source, limit):
        """A worker for source where no spare takes it, and its build folder
        (None: the source's own, given at load). In the "start" sandbox a
        source that needs no folder of its own (_needs_own_folder: a new
        candidate) gets a fresh folder, as a spare would: its ready warms
        Triton's driver and the library's kernels there (planted from what
        earlier fresh folders compiled, remembered), where in the source's
        folder nothing may be loaded before the isolation filter and the
        first verify batch compiled them all (2.5-2.9 s of a problem's first
        candidate's verify on an H100 at 7335438). Its ready is waited for,
        then the folder takes the source's name. A ready that fails, or a
        name that cannot be given, leaves it to a worker in the source's
        folder, started now (its ready says why, as before)."""
        if self.sandbox != "start" or self._needs_own_folder(source) or not self._no_unsandboxed_writers() \
                or self.fresh_failed:
            return self._spawn(source), None
        fresh = folders.fresh_folder(self.cache_dir)
        w, ext = None, None
        try:
            # the spawn (a fork of this process, its staging buffer allocated
            # on the GPU here) a shared step, as a spare's; its ready runs in
            # the worker, which the lane tracks (frozen in every timed phase
            # like a spare still starting): holding the gate for the whole
            # ready (~1.3 s) made every timed phase wait for it, and every
            # shared step queue behind that wait (gate 0.99 s, gate_baseline
            # 0.83 s a candidate at four in flight on an H100 at dc3b6f0)
            with self.start_step():
                w = self._spawn(ext=fresh)
                # (before any other thread's freeze can pause it: its clock
                # gets that time back; a close() ends it from now on)
                self.candidate = w
                w.clock = self.clock
                w.limit_until(*limit)
            ext, failed = self._name_fresh(w, fresh, source)
        except BaseException:
            if w is not None:
                w.end()
            folders.discard(fresh)
            raise
        if ext is not None:
            return w, ext
        w.end()
        folders.discard(fresh)
        if self.candidate is not w:  # close() ended it: no other worker for this evaluation
            raise RuntimeError("the evaluation was closed while its worker started")
        ready = w.ready_reply or {}
        refused = failed and ready.get("ok") is False  # its ready answered that it failed
        if refused and self._may_fall_back and start_sandbox_refused(ready):
            # the Runner's first "start" worker, refused for the sandbox's
            # reason before it ran any source: "auto" gives way to "init"
            # now (as start_candidate does for a worker of the source's)
            self._fall_back_to_init(ready.get("error") or failed)
        elif refused and "out of memory" not in str(ready.get("error", "")).lower():
            # once: every candidate after it starts in its source's folder
            # (a start its ready refused here is refused there too, and
            # said by that one's ready); a worker that died or took too
            # long (the evaluation's limit), or found the GPU's memory
            # taken by the lane's others, says nothing of the next one
            self.fresh_failed = failed
        return self._spawn(source), None

    def _name_fresh(self, w, fresh, source):
        """A fresh folder's worker w, its ready over, gives its folder to
        source: (the source's name for it, or None where it has one already;
        None, or why w's ready failed: then no name). What the library
        compiled there in that ready is remembered first, before any worker
        of the source may write it."""
        failed = self._ready_failed(w)
        if failed is not None:
            return None, failed
        if self._remember_library(fresh):
            # (its ready's word, said before any candidate's code ran there:
            # what it built, and where, against what the memo kept)
            triton_launchers.settle(getattr(w, "launchers_asked", None),
                                    (w.ready_reply or {}).get("launchers_ready"),
                                    triton_cache.remembered_names())
        return folders.adopt(self.cache_dir, fresh, source), None

    def _remember_library(self, ext):
        """The library's kernels a fresh folder's worker compiled in its
        ready, kept for every later worker's folder (triton_cache.remember):
        read before the folder takes a source's name, so only the library's
        code has run there; never in a cache_dir where workers outside the
        "start" sandbox ran (folders.unsandboxed), nor in a process that ran
        such workers anywhere (their candidates' threads could write this
        folder too: what one of them dropped there would then reach every
        later worker of every problem, not one spare). Whether it was read."""
        if self.device == "cpu" or not self._no_unsandboxed_writers():
            return False
        try:
            triton_cache.remember(os.path.join(ext, "triton"))
        except Exception:  # noqa: BLE001 - later workers then compile them, as before
            return False
        return True

    def _ready_failed(self, w):
        """None where w's ready reply came and says it started, else why
        not (the caller ends such a spare and starts a worker instead)."""
        try:
            ready = w.receive_ready(self.timeout_s)
        except (WorkerDied, WorkerTimeout, WorkerProtocolError, OSError) as e:
            return printable(str(e))[:400] or type(e).__name__
        return None if ready.get("ok") else printable(str(ready.get("error")))[:400]

    def _fall_back_to_init(self, why):
        """"auto": a "start" worker could not start (CUDA inside the sandbox,
        or the sandbox itself): every worker from now on is an "init" one,
        the baseline's too (started again)."""
        self.sandbox, self._may_fall_back = "init", False
        self.sandbox_fallback = str(why)[:400]
        folders.mark_unsandboxed(self.cache_dir)
        self.end_spare()
        if self.baseline is not None:
            self.end_baseline()
            self.start_baseline()
