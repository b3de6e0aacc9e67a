"""The pool: untrusted candidates evaluated in sandboxed worker processes
(kr_pool, include/kreward/pool.h, docs/pool.md).

A kernel that faults poisons the CUDA context of the process it runs in, and
a hung one cannot be stopped from inside it. A Pool runs candidates in
`kreward-worker` processes the library starts (one per GPU, a warm spare per
GPU, compile workers on the CPUs), so the caller's own CUDA context (a
trainer's) never sees them.

    with kreward.Pool() as pool:
        t = pool.submit(problem, source, reward=reward)
        report = pool.wait(t)

What stays in this process: golden callbacks (the pool calls the problem's
golden callback from its own thread; ctypes takes the GIL for it) and
scoring. Scoring is done here, by the thread that collects a report (wait,
next, evaluate_batch), with the job's Reward, one score at a time per Reward
(Reward.score holds its lock): the same kr_reward_score the library would
call, but an exception in a Python term is raised from the call that
collected the report, as Context.evaluate raises it.

Lifetimes and threads:
- A Pool may be used from several threads at once (submit, wait, next,
  status, evaluate_batch). The problem and reward of a job are kept alive
  until its report is collected (the library holds pointers to them); what
  else a job points to is copied at submission.
- The worker processes die with the thread that started them (the library
  sets PR_SET_PDEATHSIG, which follows the starting *thread*): kr_pool_new
  and kr_pool_free run on a thread of the Pool's own, which lives as long as
  the pool, so a Pool made in a short-lived thread (an executor's) keeps its
  workers.
- close() (or the end of a with-block) stops the workers once no call is in
  the library; wait() and next() look every quarter second, so they never
  hold it up, while a running evaluate_batch is waited for. Jobs that were
  pending then get a report with verdict error and the message "the pool was
  freed" (jobs already done keep theirs): wait() and next() still hand every
  ticket its one report after close().
- Never call close() from a golden callback (it runs on the pool's thread,
  which close() waits for)."""
import asyncio
import atexit
import collections
import ctypes
import math
import os
import re
import threading
import time
import weakref

from . import _lib, constants
from ._lib import fn
from .core import Plan, Problem, Report
from .errors import KrewardError
from .reward import Reward

_SLICE_S = 0.25  # the longest a wait or next stays in the library at once

_OPEN, _CLOSING, _CLOSED = 0, 1, 2

FREED_MESSAGE = "the pool was freed"
# Verdicts that are not the candidate's doing (no GPU here, the environment
# failed) stay unscored, as kr_evaluate leaves them: a trainer drops them
# (they get no number) rather than learn from them.
UNSCORED = frozenset({"none", "not_run", "error"})


def _code(name):
    return constants.Status[name]


class _Record:
    """What the library points to while a job is in flight (its problem),
    and what collecting its report needs (its reward)."""
    __slots__ = ("problem", "reward")

    def __init__(self, problem, reward):
        self.problem, self.reward = problem, reward


class _Job:
    """A kr_job and everything it points to, alive until submitted."""

    def __init__(self, problem, source=None, binary=None, plan=None, name="candidate.cu",
                 reward=None, preset="fast", seed=0, verify_only=False, compile_options=None,
                 verify_options=None, bench_options=None):
        from .context import _bench_options, _verify_options, compile_options as _compile
        if not isinstance(problem, Problem):
            raise TypeError("a job's problem is a kreward.Problem (Context.problem() makes one), "
                            f"not {type(problem).__name__}")
        if (source is None) == (binary is None):
            raise ValueError("a job needs a source, or a binary (CUBIN/PTX) and its plan")
        if binary is not None and not isinstance(plan, Plan):
            raise ValueError("a binary job needs its plan (a kreward.Plan)")
        if plan is not None and not isinstance(plan, Plan):
            raise TypeError(f"plan is a kreward.Plan, not {type(plan).__name__}")
        if reward is not None and not isinstance(reward, Reward):
            raise TypeError("reward is a kreward.Reward (Context.reward() makes one) or None, "
                            f"not {type(reward).__name__}")
        if preset not in constants.BENCH_PRESETS:
            raise ValueError(f"unknown preset {preset!r} (one of {list(constants.BENCH_PRESETS)})")
        j = self.job = _lib.Job()
        fn.job_init(ctypes.byref(j), _lib.JOB_VERSION)
        self.keep = []
        j.problem = problem.handle.value
        if source is not None:
            src = _lib.encode(source)
            if not isinstance(src, bytes):
                raise TypeError(f"source is str or bytes, not {type(source).__name__}")
            self.keep.append(src)
            j.source, j.len = src, len(src)
        else:
            data = bytes(binary)
            if not data:
                raise ValueError("the binary is empty")
            buf = ctypes.create_string_buffer(data, len(data))
            self.keep.append(buf)
            j.binary, j.binary_len = ctypes.cast(buf, ctypes.c_void_p).value, len(data)
        if plan is not None:
            j.plan = plan.handle.value
            self.keep.append(plan)
        j.name = _lib.encode(name)
        j.flags = constants.EVALUATE_NO_BENCH if verify_only else 0
        self.verify = _verify_options(**{"seed": seed, **(verify_options or {})})
        self.bench = _bench_options(preset, **{"seed": seed, **(bench_options or {})})
        j.verify, j.bench = ctypes.pointer(self.verify), ctypes.pointer(self.bench)
        if compile_options:
            self.compile, keep = _compile(**{"name": name, **compile_options})
            self.keep.append(keep)
            j.compile = ctypes.pointer(self.compile)
        # the reward is not given to the library: the report is scored here
        # (see the module's docstring), so j.reward stays NULL
        self.record = _Record(problem, reward)


def _job_of(spec):
    if isinstance(spec, _Job):
        return spec
    if isinstance(spec, dict):
        return _Job(**spec)
    if isinstance(spec, (tuple, list)):
        return _Job(*spec)
    raise TypeError("a batch job is a dict of Pool.submit's arguments or a (problem, source) "
                    f"tuple, not {type(spec).__name__}")


# ---- options ----

_GPU_LIST = re.compile(r"^\d+(,\d+)*$")


def _gpus(gpus):
    if gpus is None:
        return None
    if isinstance(gpus, str):
        text = gpus.replace(" ", "")
        if text == "none" or _GPU_LIST.match(text):
            return text.encode()
        raise ValueError(f"gpus={gpus!r}: device ordinals such as '0,1', a list of them, or "
                         "'none' (a pool that only compiles)")
    if isinstance(gpus, int) and not isinstance(gpus, bool):
        gpus = [gpus]
    try:
        ordinals = list(gpus)
    except TypeError:
        raise TypeError(f"gpus is a string, a list of device ordinals or None, not "
                        f"{type(gpus).__name__}") from None
    if not ordinals:
        raise ValueError("gpus=[]: no GPU given; gpus='none' makes a pool that only compiles")
    for d in ordinals:
        if isinstance(d, bool) or not isinstance(d, int) or d < 0:
            raise ValueError(f"gpus: {d!r} is not a device ordinal (an int >= 0)")
    return ",".join(map(str, ordinals)).encode()


def _count(name, value, limit=2**32 - 1):
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= limit:
        raise ValueError(f"{name}={value!r}: a whole number from 0 (the default) to {limit}")
    return value


def _seconds(name, value):
    if isinstance(value, bool) or not isinstance(value, (int, float)) or \
            not math.isfinite(value) or value < 0:
        raise ValueError(f"{name}={value!r}: seconds, finite and >= 0 (0: the default)")
    return float(value)


def _path(name, value):
    if value is None:
        return None
    if not isinstance(value, (str, bytes, os.PathLike)):
        raise TypeError(f"{name} is a path, not {type(value).__name__}")
    return os.fsencode(value)


def pool_options(gpus=None, compile_workers=0, job_timeout_s=0.0, compile_timeout_s=0.0,
                 compile_memory_bytes=0, max_attempts=0, cache_dir=None, worker_path=None,
                 cuda_home=None, no_sandbox=False, no_spare=False):
    """A kr_pool_options from keyword arguments, checked (ValueError or
    TypeError saying what is wrong) before the library sees them."""
    o = _lib.PoolOptions()
    fn.pool_options_init(ctypes.byref(o), _lib.POOL_OPTIONS_VERSION)
    o.gpus = _gpus(gpus)
    o.compile_workers = _count("compile_workers", compile_workers, 256)
    o.job_timeout_s = _seconds("job_timeout_s", job_timeout_s)
    o.compile_timeout_s = _seconds("compile_timeout_s", compile_timeout_s)
    o.compile_memory_bytes = _count("compile_memory_bytes", compile_memory_bytes, 2**64 - 1)
    o.max_attempts = _count("max_attempts", max_attempts, 1000)
    o.cache_dir = _path("cache_dir", cache_dir)
    o.worker_path = _path("worker_path", worker_path)
    # the library refuses a worker_path (or $KREWARD_WORKER) that is not an
    # executable without saying why: said here
    for what, path in (("worker_path", o.worker_path),
                       ("KREWARD_WORKER", None if o.worker_path else
                        os.environ.get("KREWARD_WORKER") or None)):
        if path is not None and not (os.path.isfile(path) and os.access(path, os.X_OK)):
            raise ValueError(f"{what}={os.fsdecode(path)!r}: not an executable file (the "
                             "kreward-worker program)")
    o.cuda_home = _path("cuda_home", cuda_home)
    o.flags = (constants.POOL_NO_SANDBOX if no_sandbox else 0) | \
        (constants.POOL_NO_SPARE if no_spare else 0)
    return o


# ---- the thread that owns the workers ----

class _Owner(threading.Thread):
    """Starts the pool (kr_pool_new), lives while it does, and frees it
    (kr_pool_free) when told to stop: the workers' parent thread. keep: what
    the library may still point to, released only after kr_pool_free."""

    def __init__(self, options, keep):
        super().__init__(name="kreward-pool", daemon=True)
        self.options, self.keep = options, keep
        self.started_up, self.stop, self.freed = threading.Event(), threading.Event(), \
            threading.Event()
        self.ptr, self.error = None, None

    def run(self):
        out = ctypes.c_void_p()
        try:
            fn.pool_new(ctypes.byref(out), ctypes.byref(self.options),
                        ctypes.pointer(ctypes.c_void_p()))
            self.ptr = out.value
        except BaseException as e:  # noqa: B036 -- raised in the thread that made the Pool
            self.error = e
        self.started_up.set()
        if self.ptr is None:
            return
        self.stop.wait()
        fn.pool_free(self.ptr)
        self.keep = None
        self.freed.set()


_live = weakref.WeakSet()


@atexit.register
def _close_all():
    # at exit, pools nobody closed: free them (their temporary compile cache
    # goes with them) unless a call is still inside the library
    for pool in list(_live):
        pool._close(wait_s=5.0)


class Pool:
    """Worker processes evaluating candidates (kr_pool). Options (defaults
    from the library when 0 or None):

    gpus: None (every GPU CUDA_VISIBLE_DEVICES shows; KREWARD_DEVICE=none
        makes it compile-only), "none" (compile and check only: jobs that
        need a GPU end not_run), "0,1" or [0, 1];
    compile_workers (one per two CPUs, at most 8), job_timeout_s (300),
    compile_timeout_s (60), compile_memory_bytes (8 GiB), max_attempts (3),
    cache_dir (a private one, removed at close), worker_path (found next to
    the library), cuda_home; no_sandbox (for debugging the library),
    no_spare (no warm spare per GPU).

    Starting fails with KrewardError saying why (e.g. no GPU worker could
    start): never a silent fallback."""

    def __init__(self, gpus=None, compile_workers=0, job_timeout_s=0.0, compile_timeout_s=0.0,
                 compile_memory_bytes=0, max_attempts=0, cache_dir=None, worker_path=None,
                 cuda_home=None, no_sandbox=False, no_spare=False):
        self._state = _CLOSED  # until started
        options = pool_options(gpus, compile_workers, job_timeout_s, compile_timeout_s,
                               compile_memory_bytes, max_attempts, cache_dir, worker_path,
                               cuda_home, no_sandbox, no_spare)
        self._cond = threading.Condition()
        self._jobs = {}                          # ticket -> _Record, not yet collected
        self._left = collections.OrderedDict()   # after close: ticket -> (Report, _Record)
        self._active = 0                         # calls inside the library now
        self._claimed = set()                    # tickets a thread is collecting now
        self._owner = _Owner(options, self._jobs)
        self._owner.start()
        self._owner.started_up.wait()
        if self._owner.error is not None:
            err, self._owner.error = self._owner.error, None
            raise err
        self._ptr = self._owner.ptr
        self._state = _OPEN
        # collected without close(): the owner thread frees the pool, then
        # lets go of the jobs' problems (never from the collecting thread,
        # which may be the pool's own, running a golden callback)
        self._finalizer = weakref.finalize(self, self._owner.stop.set)
        self._finalizer.atexit = False
        _live.add(self)

    # ---- state ----
    @property
    def closed(self):
        return self._state != _OPEN

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        state = {_OPEN: "open", _CLOSING: "closing", _CLOSED: "closed"}[self._state]
        return f"<kreward.Pool {state}, {len(self._jobs)} pending>"

    @property
    def pending(self):
        """Tickets submitted here whose report has not been collected."""
        with self._cond:
            return sorted(self._jobs) + list(self._left)

    def _enter(self):
        """Counts a call into the library; False once the pool is closing
        (lock held)."""
        if self._state != _OPEN:
            return False
        self._active += 1
        return True

    def _leave(self):
        with self._cond:
            self._active -= 1
            self._cond.notify_all()

    def _wait_closed(self):
        """Closing in another thread: wait until it is done (lock held)."""
        while self._state != _CLOSED:
            self._cond.wait()

    def _sleep(self, deadline):
        """Waits for a change (a ticket released or collected, the pool
        closing), at most until the deadline (lock held)."""
        left = _SLICE_S if deadline is None else min(_SLICE_S, deadline - time.monotonic())
        if left > 0:
            self._cond.wait(left)

    # ---- jobs ----
    def submit(self, problem, source=None, binary=None, plan=None, name="candidate.cu",
               reward=None, preset="fast", seed=0, verify_only=False, compile_options=None,
               verify_options=None, bench_options=None):
        """Queues a candidate; returns its ticket (tickets rise in submission
        order). source: CUDA C++ with its plan as annotations; or binary (a
        CUBIN/PTX image, bytes) and plan (a kreward.Plan). reward: a
        kreward.Reward scoring the report when collected (None: unscored).
        preset ("fast", "precise") and seed as for Context.evaluate;
        verify_only: no benchmark; compile_options (Context.compile's
        options), verify_options (seeds_per_case, timeout_s, single_run),
        bench_options (kr_bench_options fields): dicts."""
        return self._submit_job(_Job(problem, source, binary, plan, name, reward, preset, seed,
                                     verify_only, compile_options, verify_options, bench_options))

    def _submit_job(self, job):
        """submit() of a job already built (kreward.rail builds it when the
        job is queued, so that a bad argument is refused at once)."""
        ticket = ctypes.c_uint64()
        with self._cond:  # held across the call: no collector sees the ticket before _jobs does
            if self._state != _OPEN:
                raise ValueError("the Pool is closed")
            fn.pool_submit(ctypes.byref(ticket), self._ptr, ctypes.byref(job.job))
            self._jobs[ticket.value] = job.record
        return ticket.value

    # Collecting. One thread at a time is inside the library for a ticket
    # (it holds the ticket's claim): when two threads wait in the library for
    # the same job, the one that collects it frees it under the other
    # (kr_pool_wait and kr_pool_next as of this writing), and kr_pool_next
    # would also take a job that a running kr_evaluate_batch waits for. So
    # next() claims the oldest ticket submitted here that no other thread is
    # collecting and waits for it with kr_pool_wait, and tickets not
    # submitted here (a batch's) are never asked for.

    def _collect(self, ticket, deadline):
        """One look in the library for a ticket this thread has claimed (and
        counted in _active): (rc, report, record); releases both."""
        out, record, report = ctypes.c_void_p(), None, None
        try:
            rc = fn.pool_wait(ctypes.byref(out), self._ptr, ticket, self._slice(deadline))
            if rc == 0:
                report = Report._own(out.value)
                with self._cond:
                    record = self._jobs.pop(ticket, None)
        finally:
            with self._cond:
                self._claimed.discard(ticket)
                self._active -= 1
                self._cond.notify_all()
        return rc, report, record

    def wait(self, ticket, timeout=None):
        """The Report of a ticket, waiting at most timeout seconds (None:
        until done). TimeoutError when not done in time (wait again);
        KeyError for a ticket not submitted to this pool or already
        collected."""
        deadline = None if timeout is None else time.monotonic() + max(0.0, timeout)
        while True:
            with self._cond:
                while True:
                    if self._state != _OPEN:
                        self._wait_closed()
                        if ticket in self._left:
                            report, record = self._left.pop(ticket)
                            return self._finish(ticket, report, record)
                        raise KeyError(f"ticket {ticket}: not submitted to this pool, or "
                                       "already collected")
                    if ticket not in self._jobs:
                        raise KeyError(f"ticket {ticket}: not submitted to this pool, or "
                                       "already collected")
                    if ticket not in self._claimed:
                        break
                    if deadline is not None and time.monotonic() >= deadline:
                        raise TimeoutError(f"ticket {ticket} is not done after {timeout} s")
                    self._sleep(deadline)  # another thread is collecting it
                self._claimed.add(ticket)
                self._active += 1
            rc, report, record = self._collect(ticket, deadline)
            if rc == 0:
                return self._finish(ticket, report, record)
            if rc == _code("ENOTFOUND"):  # not expected: every ticket here is the library's
                raise KeyError(f"ticket {ticket}: unknown to the library")
            if deadline is not None and time.monotonic() >= deadline:
                raise TimeoutError(f"ticket {ticket} is not done after {timeout} s")

    def next(self, timeout=None):
        """(ticket, Report) of the oldest ticket submitted here that is not
        collected (nor being collected by another thread's wait or next),
        waiting at most timeout seconds (None: until done). TimeoutError when
        it is not done in time; LookupError when nothing is pending."""
        deadline = None if timeout is None else time.monotonic() + max(0.0, timeout)
        while True:
            with self._cond:
                while True:
                    if self._state != _OPEN:
                        self._wait_closed()
                        if not self._left:
                            raise LookupError("nothing is pending in this pool")
                        ticket, (report, record) = self._left.popitem(last=False)
                        return ticket, self._finish(ticket, report, record)
                    if not self._jobs:
                        raise LookupError("nothing is pending in this pool")
                    free = [t for t in self._jobs if t not in self._claimed]
                    if free:
                        ticket = min(free)
                        break
                    if deadline is not None and time.monotonic() >= deadline:
                        raise TimeoutError(f"no pending job is done after {timeout} s")
                    self._sleep(deadline)  # every pending ticket is being collected
                self._claimed.add(ticket)
                self._active += 1
            rc, report, record = self._collect(ticket, deadline)
            if rc == 0:
                return ticket, self._finish(ticket, report, record)
            if rc == _code("ENOTFOUND"):
                raise KeyError(f"ticket {ticket}: unknown to the library")
            if deadline is not None and time.monotonic() >= deadline:
                raise TimeoutError(f"the oldest pending job is not done after {timeout} s")

    def results(self, timeout=None):
        """(ticket, Report) for every pending job, in submission order
        (next() until nothing is pending)."""
        while True:
            try:
                yield self.next(timeout)
            except LookupError:
                return

    async def wait_async(self, ticket, timeout=None):
        """wait() for an event loop: never blocks it (looks with a zero
        timeout, sleeping between looks, up to 50 ms)."""
        deadline = None if timeout is None else time.monotonic() + max(0.0, timeout)
        delay = 0.002
        while True:
            try:
                return self.wait(ticket, timeout=0)
            except TimeoutError:
                pass
            if deadline is not None and time.monotonic() >= deadline:
                raise TimeoutError(f"ticket {ticket} is not done after {timeout} s")
            await asyncio.sleep(delay)
            delay = min(delay * 2, 0.05)

    def evaluate_batch(self, jobs):
        """A group in one call (kr_evaluate_batch): reports[i] for jobs[i].
        jobs: dicts of submit()'s arguments, or (problem, source) tuples.
        Identical jobs are evaluated once. Blocks until every job is done
        (close() waits for it)."""
        built = [_job_of(spec) for spec in jobs]
        n = len(built)
        if n == 0:
            return []
        array = (_lib.Job * n)(*[b.job for b in built])
        out = (ctypes.c_void_p * n)()
        with self._cond:
            if not self._enter():
                raise ValueError("the Pool is closed")
        error = None
        try:
            fn.evaluate_batch(out, self._ptr, array, n)
        except KrewardError as e:
            error = e
        finally:
            self._leave()
        reports = [Report._own(out[i]) if out[i] else None for i in range(n)]
        if error is not None:
            error.reports = reports
            raise error
        first = None
        for b, report in zip(built, reports):
            try:
                self._finish(None, report, b.record)
            except BaseException as e:  # noqa: B036 -- the first is raised once all are scored
                first = first or e
        if first is not None:
            first.reports = reports
            raise first
        return reports

    def _slice(self, deadline):
        if deadline is None:
            return _SLICE_S
        return max(0.0, min(_SLICE_S, deadline - time.monotonic()))

    def _finish(self, ticket, report, record):
        """A collected report: a golden callback's exception is raised (as
        Context.evaluate raises it), else the report is scored with the
        job's reward (unless its verdict is in UNSCORED). Either exception
        carries .report and .ticket."""
        if record is None:
            return report
        try:
            slot = record.problem._golden_slot
            if slot is not None and slot.error is not None and report.verdict == "error":
                err, slot.error = slot.error, None
                raise err from KrewardError(_code("EPLUGIN"), report.message or "")
            if record.reward is not None and report.verdict not in UNSCORED:
                record.reward.score(report)
        except BaseException as e:  # noqa: B036 -- re-raised with the report attached
            try:
                e.report, e.ticket = report, ticket
            except AttributeError:
                pass
            raise
        return report

    # ---- state ----
    @staticmethod
    def sandbox():
        """What the workers' sandbox can use on this machine, without a pool
        (kr_pool_sandbox_json): landlock, landlock_abi, landlock_why, seccomp,
        seccomp_why (a why is empty when available)."""
        import json
        out = ctypes.c_void_p()
        fn.pool_sandbox_json(ctypes.byref(out))
        return json.loads(_lib.take_string(out))

    def status(self):
        """The pool's state (kr_pool_status_json): workers (kind, device,
        state, pid, sandbox), gpus, arch, cache_dir, jobs queued, running,
        done, finished, respawns, retries, timeouts, dedup_hits, respawn
        waits."""
        import json
        with self._cond:
            if not self._enter():
                raise ValueError("the Pool is closed")
        try:
            out = ctypes.c_void_p()
            fn.pool_status_json(ctypes.byref(out), self._ptr)
            return json.loads(_lib.take_string(out))
        finally:
            self._leave()

    def close(self):
        """Stops the workers (idempotent). Reports of jobs still pending stay
        collectable: verdict error, "the pool was freed" (jobs already done
        keep their own)."""
        self._close()

    def _close(self, wait_s=None):
        with self._cond:
            if self._state == _CLOSED:
                return
            if self._state == _CLOSING:
                self._wait_closed()
                return
            self._state = _CLOSING
            self._cond.notify_all()
            deadline = None if wait_s is None else time.monotonic() + wait_s
            while self._active:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    # at exit, a daemon thread's call is still in the library:
                    # leave the pool be (its workers die with the process)
                    return
                self._cond.wait(left)
            pending = sorted(self._jobs)
        left = collections.OrderedDict()
        for ticket in pending:  # nothing else is in the library now
            out = ctypes.c_void_p()
            rc = fn.pool_wait(ctypes.byref(out), self._ptr, ticket, 0.0)
            if rc == 0:
                report = Report._own(out.value)
            else:
                report = Report()
                report.verdict = "error"
                report.set_text("message", FREED_MESSAGE)
            left[ticket] = (report, self._jobs.pop(ticket))
        self._finalizer.detach()
        self._owner.stop.set()
        self._owner.freed.wait()
        self._owner.join()
        with self._cond:
            self._left.update(left)
            self._ptr = None
            self._state = _CLOSED
            self._cond.notify_all()
        _live.discard(self)
