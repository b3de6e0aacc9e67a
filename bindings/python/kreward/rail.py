"""One rail for both kinds of candidate: the Pool's ticket interface
(submit, wait, next, results, evaluate_batch, status, close) over the C pool
(kreward problems: CUDA or Triton kernels, run by kreward-worker processes)
and the ModelNew scheduler (KernelBench problems: kernelbench/scheduler.py,
one lane per GPU). The Evaluator, `kreward serve` and the Ray actors use
it, so every front door takes either kind, in one batch.

What a caller sees is the same for both kinds:
- tickets rise in submission order; every ticket gets exactly one
  kreward.Report (wait by ticket, next in order), also after close()
  (verdict error, "the pool was freed", for what was still pending);
- a report is scored with the job's Reward (the reward table, the same
  presets for both kinds) in the thread that finished it, unless its
  verdict is one that was not judged (pool.UNSCORED); an exception of a
  Python term or golden callback is kept and raised from the call that
  collects the report, with .report and .ticket;
- GPUs are shared by turns: a kind's jobs are dispatched only while no job
  of the other kind is in flight, in submission order (a ModelNew lane and
  a kreward-worker on one GPU would time candidates at the same moment);
  a ModelNew candidate's build (load_inline) needs no GPU, so it starts at
  submit, in the scheduler's compile stage, whosever turn it is.

The C pool is collected by a thread of the rail's own (Pool.next), the
scheduler calls back when a candidate is done: nothing waits on the wrong
kind."""
import asyncio
import collections
import itertools
import threading
import time

from . import problems as _problems
from .pool import FREED_MESSAGE, UNSCORED


class _Entry:
    __slots__ = ("ticket", "kind", "spec", "inner", "reward", "problem", "state", "report",
                 "error", "done", "claimed")

    def __init__(self, ticket, kind, spec, reward, problem):
        self.ticket, self.kind, self.spec = ticket, kind, spec
        self.reward, self.problem = reward, problem
        self.inner = None
        self.state = "held"        # held -> inflight -> done
        self.report = self.error = None
        self.done = threading.Event()
        self.claimed = False


def _freed_report():
    from .core import Report
    r = Report()
    r.verdict = "error"
    r.set_text("message", FREED_MESSAGE)
    return r


def unavailable_report(why):
    """The report of a candidate its kind's pool could not take (no GPU for
    ModelNew candidates, say): verdict error (never scored), the reason as
    its message and as the text "unavailable", which the trainer adapters
    turn into EvaluationUnavailable (a run without the means to judge stops,
    it does not train on nothing)."""
    from .core import Report
    r = Report()
    r.verdict = "error"
    text = str(why.message if hasattr(why, "message") else why)
    r.set_text("message", f"not evaluated: {text}")
    r.set_text("unavailable", text)
    return r


class Rail:
    def __init__(self, pool=None, scheduler_factory=None):
        """pool: a kreward.Pool for kreward problems (None: such jobs are
        refused); scheduler_factory: makes the ModelNew scheduler on first
        use (None: ModelNew jobs are refused)."""
        self.pool = pool
        self._make_scheduler = scheduler_factory
        self._scheduler = None
        self._cond = threading.Condition()
        self._entries = {}                 # ticket -> _Entry, until collected
        self._held = collections.deque()   # entries waiting for their kind's turn
        self._inflight = collections.Counter()
        self._by_inner = {}                # C pool ticket -> _Entry
        self._tickets = itertools.count(1)
        self._closed = False
        self._collector = None

    # ---- state ----
    @property
    def closed(self):
        return self._closed

    @property
    def scheduler(self):
        """The ModelNew scheduler (made on first use)."""
        with self._cond:
            if self._scheduler is None:
                if self._make_scheduler is None:
                    raise ValueError("this evaluator takes no KernelBench problems")
                self._scheduler = self._make_scheduler()
            return self._scheduler

    @property
    def pending(self):
        with self._cond:
            return sorted(self._entries)

    def status(self):
        out = {"rail": {"held": len(self._held), "inflight": dict(self._inflight),
                        "pending": len(self._entries)}}
        if self.pool is not None and not self.pool.closed:
            out["pool"] = self.pool.status()
        if self._scheduler is not None:
            out["kernelbench"] = self._scheduler.status()
        return out

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # ---- submitting ----
    def submit(self, problem, source=None, binary=None, plan=None, name="candidate.cu",
               reward=None, preset="fast", seed=0, verify_only=False, compile_options=None,
               verify_options=None, bench_options=None):
        """A ticket for a candidate of either kind. problem: a kreward.Problem
        (the C pool's job, every other argument as Pool.submit takes it) or
        a KernelBenchProblem (source: the ModelNew module; preset "fast" or
        "precise"; seed 0: fresh from the OS)."""
        if isinstance(problem, _problems.KernelBenchProblem):
            if source is None or binary is not None or plan is not None:
                raise ValueError("a ModelNew candidate is a source (a Python module defining "
                                 "ModelNew): no binary or plan")
            from .kernelbench.lanes import PRESETS
            if preset not in PRESETS:
                raise ValueError(f"unknown preset {preset!r} (one of {list(PRESETS)})")
            options = dict(PRESETS[preset])
            if seed:
                options["seed"] = seed
            if verify_only:
                options.update(baseline=False, batches=1)
            spec = {"source": source, "name": name, "options": options}
            kind = _problems.KERNELBENCH
        else:
            if self.pool is None:
                raise ValueError("this evaluator takes no kreward problems")
            from .pool import _Job
            # built now: a bad argument is the caller's error at once
            spec = _Job(problem, source, binary, plan, name, reward, preset, seed, verify_only,
                        compile_options, verify_options, bench_options)
            kind = _problems.KREWARD
        with self._cond:
            if self._closed:
                raise ValueError("the evaluator is closed")
            entry = _Entry(next(self._tickets), kind, spec, reward, problem)
            self._entries[entry.ticket] = entry
            self._held.append(entry)
            self._pump()
            # (dispatched at once: the scheduler's submit started its build)
            ahead = kind == _problems.KERNELBENCH and entry.state == "held"
        if ahead:
            self._build_ahead(spec["source"])
        return entry.ticket

    def _build_ahead(self, source):
        """A ModelNew source's build, started now in the scheduler's compile
        stage (CPU workers), not at its GPU turn; nothing when the
        scheduler cannot be made (its dispatch says why)."""
        try:
            self.scheduler.build_ahead(source)
        except Exception:  # noqa: BLE001 - the job's dispatch reports what is wrong
            pass

    def _pump(self):
        """Dispatches held entries in order while their kind may run (lock
        held): a kind waits until no job of the other is in flight."""
        while self._held:
            head = self._held[0]
            others = sum(n for k, n in self._inflight.items() if k != head.kind)
            if others:
                return
            self._held.popleft()
            try:
                self._dispatch(head)
            except Exception as e:  # noqa: BLE001 - a job its pool could not take: its report
                self._settle(head, unavailable_report(e), None)

    def _dispatch(self, entry):
        """Hands an entry to its kind's pool (lock held)."""
        entry.state = "inflight"
        self._inflight[entry.kind] += 1
        if entry.kind == _problems.KREWARD:
            entry.inner = self.pool._submit_job(entry.spec)
            self._by_inner[entry.inner] = entry
            if self._collector is None or not self._collector.is_alive():
                self._collector = threading.Thread(target=self._collect, daemon=True,
                                                   name="kreward-rail-collect")
                self._collector.start()
        else:
            s = entry.spec
            entry.inner = self.scheduler.submit(entry.problem, s["source"], s["options"],
                                                on_done=lambda job, e=entry: self._modelnew_done(e, job))

    # ---- completions ----
    def _collect(self):
        """The C pool's reports, as they finish (Pool.next scores them)."""
        while True:
            with self._cond:
                if not self._by_inner:
                    self._collector = None
                    return
            try:
                inner, report = self.pool.next(timeout=0.25)
                error = None
            except TimeoutError:
                continue
            except LookupError:
                if self.pool.closed:  # drained: close() answers whatever is left
                    with self._cond:
                        self._collector = None
                    return
                time.sleep(0.01)
                continue
            except ValueError:  # the pool was closed under us: close() answers the rest
                with self._cond:
                    self._collector = None
                return
            except Exception as e:  # noqa: BLE001 - a term's or golden's, with its report
                inner, report, error = getattr(e, "ticket", None), getattr(e, "report", None), e
                if inner is None:
                    raise
            with self._cond:
                entry = self._by_inner.pop(inner, None)
            if entry is not None:
                self._settle(entry, report, error)
            elif report is not None:
                report.close()

    def _modelnew_done(self, entry, job):
        """A scheduler job finished (its thread): its report, scored."""
        from .kernelbench.report import to_report
        report, error = None, None
        try:
            p = entry.problem
            # the problem's soundness verdict travels in the result (the
            # Runner's): asking the problem here would import it in this process
            report = to_report(job.result, p.name, entry.spec["name"], entry.spec["source"])
            if entry.reward is not None and report.verdict not in UNSCORED:
                entry.reward.score(report)
        except BaseException as e:  # noqa: B036 - raised from the call that collects it
            error = e
        self._settle(entry, report, error)
        with self._cond:
            if self._scheduler is not None:
                try:
                    self._scheduler.wait(job.ticket, 0)  # forget it there
                except (KeyError, TimeoutError):
                    pass

    def _settle(self, entry, report, error):
        with self._cond:
            if entry.done.is_set():
                if report is not None:
                    report.close()
                return
            if entry.state == "inflight":
                self._inflight[entry.kind] -= 1
            entry.state = "done"
            entry.report, entry.error = report, error
            entry.done.set()
            self._pump()
            self._cond.notify_all()

    # ---- collecting ----
    def _take(self, entry):
        with self._cond:
            self._entries.pop(entry.ticket, None)
        if entry.error is not None:
            e = entry.error
            try:
                e.report, e.ticket = entry.report, entry.ticket
            except AttributeError:
                pass
            raise e
        return entry.report

    def wait(self, ticket, timeout=None):
        """The Report of a ticket (TimeoutError when not done in time; KeyError
        for a ticket not submitted here or already collected)."""
        with self._cond:
            entry = self._entries.get(ticket)
            if entry is None or entry.claimed:
                raise KeyError(f"ticket {ticket}: not submitted here, or already collected")
            entry.claimed = True
        try:
            if not entry.done.wait(timeout):
                raise TimeoutError(f"ticket {ticket} is not done after {timeout} s")
        except BaseException:
            with self._cond:
                entry.claimed = False
                self._cond.notify_all()
            raise
        return self._take(entry)

    def next(self, timeout=None):
        """(ticket, Report) of the oldest ticket not collected nor being
        collected; TimeoutError when it is not done in time, LookupError
        when nothing is pending."""
        with self._cond:
            free = [t for t, e in self._entries.items() if not e.claimed]
            if not free:
                raise LookupError("nothing is pending")
            entry = self._entries[min(free)]
            entry.claimed = True
        try:
            if not entry.done.wait(timeout):
                raise TimeoutError(f"ticket {entry.ticket} is not done after {timeout} s")
        except BaseException:
            with self._cond:
                entry.claimed = False
                self._cond.notify_all()
            raise
        return entry.ticket, self._take(entry)

    def results(self, timeout=None):
        while True:
            try:
                yield self.next(timeout)
            except LookupError:
                return

    async def wait_async(self, ticket, timeout=None):
        """wait() for an event loop: never blocks it."""
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
        """reports[i] for jobs[i] (dicts of submit()'s arguments or (problem,
        source) tuples), in order. A Python term's exception is raised once
        every job is collected, with .reports."""
        tickets = []
        for spec in jobs:
            if isinstance(spec, dict):
                tickets.append(self.submit(**spec))
            elif isinstance(spec, (tuple, list)):
                tickets.append(self.submit(*spec))
            else:
                raise TypeError("a batch job is a dict of submit()'s arguments or a (problem, "
                                f"source) tuple, not {type(spec).__name__}")
        reports, first = [], None
        for t in tickets:
            try:
                reports.append(self.wait(t))
            except BaseException as e:  # noqa: B036 - the first is raised once all are in
                reports.append(getattr(e, "report", None))
                first = first or e
        if first is not None:
            first.reports = reports
            raise first
        return reports

    # ---- closing ----
    def close(self):
        """Stops both kinds' workers. Every pending ticket keeps its one
        report: jobs still pending get verdict error, "the pool was freed"."""
        with self._cond:
            if self._closed:
                return
            self._closed = True
            held, self._held = list(self._held), collections.deque()
        for entry in held:
            self._settle(entry, _freed_report(), None)
        if self._scheduler is not None:
            self._scheduler.close()  # its callbacks settle what was in flight
        if self.pool is not None:
            # the pool hands every pending job its report on close; the
            # collector takes them (Pool.next after close drains them)
            self.pool.close()
            with self._cond:
                collector = self._collector
            if collector is not None:
                collector.join(timeout=30)
            with self._cond:
                left = list(self._by_inner.values())
                self._by_inner.clear()
            for entry in left:
                self._settle(entry, _freed_report(), None)
        with self._cond:
            stray = [e for e in self._entries.values() if not e.done.is_set()]
        for entry in stray:
            self._settle(entry, _freed_report(), None)
