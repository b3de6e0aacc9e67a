"""A lane's GPU gate (in_flight.py): several ModelNew candidates in flight
on one GPU, their timed phases one at a time.

A readers-writer gate with writer preference:
- shared steps (readers): a verify case (build, a batch, its checks: the
  worker's requests and this process's golden outputs and masking on the
  GPU), the seal, a Runner's construction. Any number at once;
- the exclusive phase (the writer): a candidate's timed batches, its
  attribution, its end and its baseline's timing. One at a time, in the
  order they asked; it waits for the shared steps in progress to end (each
  ends with its worker synchronized: no GPU work of theirs is queued), and
  from its request on, no new shared step starts; a candidate's step
  that has run longer than OVERDUE_S is not waited for (below);
- while it runs, every other worker of the lane is frozen (freezer.py:
  SIGSTOP to its whole process tree), since a candidate's own threads can
  work between requests (an overdue step's worker too, its request in
  flight: its own timeout keeps running, which a hang meets anyway); then
  an optional probe (gpu_probe.py) waits for what a frozen process had
  already queued on the device to drain.
Time a worker spends waiting at the gate or frozen is added back to its
evaluation limit, and the scheduler's backstop does not count it
(freezer.pause, resume, lost_seconds): it is the lane's, not the
candidate's. So is every wait of an evaluation's thread here, with a
candidate worker or without one (its baseline's phase, a spare's start):
the thread's clock (bind_clock) is paused with the worker.

The exclusive phase belongs to a thread; that thread's own shared steps
(a baseline replaced inside its phase) pass straight through. NO_GATE is
what an evaluation without one (in_flight 1: the Runner's lock already
makes it alone) uses: every call does nothing."""
import collections
import contextlib
import threading
import time

from .freezer import pause, resume

# how long the exclusive phase waits for a candidate's shared step in
# progress: a candidate that hangs in verify (a loop in forward, a
# ModelNew(...) that sleeps) would otherwise hold every timed phase of the
# lane for its whole request timeout (a minute, or ten for a build); past
# this, its worker is frozen with the others and the phase goes on. Longer
# than a first call's Triton compiles, which a shared step may hold.
OVERDUE_S = 5.0


class Gate:
    def __init__(self, freezer=None, probe=None, overdue_s=OVERDUE_S):
        """freezer: a freezer.Freezer (or a fake with freeze(keep) and
        thaw()), or None (no freeze); probe: called after the freeze, before
        the exclusive phase is granted; returns None or a note (the GPU did
        not look idle in time); overdue_s: how long the exclusive phase
        waits for a candidate's shared step (below)."""
        self.freezer, self.probe = freezer, probe
        self.overdue_s = overdue_s
        self._cond = threading.Condition()
        self._reading = {}                  # each shared step in progress -> (start, overdue_s)
        self._owner = None                  # the thread in the exclusive phase
        self._queue = collections.deque()   # threads waiting for it, in order
        self._local = threading.local()     # this thread's shared-step depth, its clock
        self.counters = collections.Counter()

    def bind_clock(self, clock):
        """This thread's evaluation clock (an object freezer.pause and resume
        keep lost time on), paused in every wait of this thread here; None:
        none."""
        self._local.clock = clock

    def _clock(self):
        return getattr(self._local, "clock", None)

    @contextlib.contextmanager
    def shared(self, worker=None, candidate=True):
        """A shared step: waits while an exclusive phase runs or is asked
        for. worker: the evaluation's candidate worker, whose limit gets the
        wait back (freezer.resume). candidate: the step runs a candidate's
        code (it can hang: waited for overdue_s at most); False: this
        process's own (a Runner's construction, a spare's start), always
        waited for."""
        me = threading.get_ident()
        depth = getattr(self._local, "depth", 0)
        if self._owner == me or depth:
            yield  # inside its own exclusive phase, or a step already in progress
            return
        clock = self._clock()
        pause(worker)
        pause(clock)
        try:
            with self._cond:
                while self._owner is not None or self._queue:
                    self._cond.wait()
                key = object()
                self._reading[key] = (time.monotonic(), self.overdue_s if candidate else None)
        finally:
            resume(clock)
            resume(worker)
        self._local.depth = 1
        try:
            yield
        finally:
            self._local.depth = 0
            with self._cond:
                del self._reading[key]
                self._cond.notify_all()

    def _young(self, now):
        """Seconds until the shared steps in progress are all overdue (lock
        held): 0 when none is left to wait for, None to wait for a notify."""
        left = 0.0
        for start, overdue in self._reading.values():
            if overdue is None:
                return None
            left = max(left, start + overdue - now)
        return left

    def enter_exclusive(self, keep=()):
        """Waits for the exclusive phase (this thread's turn, no shared step
        in progress), then freezes the lane's other workers (all but keep:
        this evaluation's candidate worker and its baseline). Facts for the
        result: seconds waited, processes stopped, the probe's note."""
        me = threading.get_ident()
        t0 = time.monotonic()
        clock = self._clock()
        for w in keep:
            pause(w)
        pause(clock)
        try:
            with self._cond:
                if self._owner == me:
                    raise RuntimeError("this thread is already in the exclusive phase")
                self._queue.append(me)
                try:
                    while True:
                        if self._owner is None and self._queue[0] == me:
                            left = self._young(time.monotonic())
                            if left is not None and left <= 0:
                                break
                            self._cond.wait(left)
                        else:
                            self._cond.wait()
                finally:
                    self._queue.remove(me)
                self._owner = me
                overdue = len(self._reading)
                self.counters["exclusive"] += 1
                self.counters["overdue_steps"] += overdue
        finally:
            resume(clock)
            for w in keep:
                resume(w)
        waited = time.monotonic() - t0
        facts = {"waited_s": round(waited, 4)}
        if overdue:
            facts["overdue_steps"] = overdue  # frozen mid-request (their workers' time given back)
        try:
            if self.freezer is not None:
                facts["stopped"] = self.freezer.freeze(keep)
                if getattr(self.freezer, "unsettled", 0):
                    # (a process not seen stopped within SETTLE_S: said,
                    # the idle probe below still asks the GPU)
                    facts["not_stopped"] = self.freezer.unsettled
            if self.probe is not None:
                note = self.probe()
                if note:
                    facts["probe"] = note
        except BaseException:
            self.leave_exclusive()
            raise
        return facts

    def leave_exclusive(self):
        """Ends this thread's exclusive phase (the others thawed); nothing if
        it holds none."""
        if self._owner != threading.get_ident():
            return
        try:
            if self.freezer is not None:
                self.freezer.thaw()
        finally:
            with self._cond:
                self._owner = None
                self._cond.notify_all()

    def holder(self):
        """The thread ident in the exclusive phase, or None."""
        return self._owner

    @property
    def freezes(self):
        """Whether the exclusive phase freezes the lane's other workers (a
        spare still starting among them: Evaluation.run need not wait for
        its ready before a timed phase)."""
        return self.freezer is not None


class _NoGate:
    def bind_clock(self, clock):
        pass

    @contextlib.contextmanager
    def shared(self, worker=None, candidate=True):
        yield

    def enter_exclusive(self, keep=()):
        return None

    def leave_exclusive(self):
        pass

    freezes = False


NO_GATE = _NoGate()
