"""Freezing the process trees of a lane's other ModelNew workers while one
candidate (or its baseline) is timed (gate.py, in_flight.py).

A candidate's own code runs in its worker and in whatever that worker
starts, and can keep threads busy between the caller's requests: waiting
at the gate for its next request is not enough to keep it off the GPU
and the CPUs while another candidate is timed. So every process below a
tracked worker's supervisor (the worker, and the candidate's processes,
which the supervisor keeps below it as their subreaper: worker.py) gets
SIGSTOP for the exclusive phase and SIGCONT after. The supervisor itself
is left running: it runs no candidate code, and a `reap` (a backstop's
abort, close()) must still reach it; SIGKILL ends stopped processes too.

What a freeze cannot stop: GPU work a process queued before it stopped
(an asynchronous launch by the candidate's own thread just before the
SIGSTOP) still runs on the device; gate.py waits for the other
evaluations' requests to return first (each ends with a synchronize) and
can probe the GPU for idleness (gpu_idle_probe), which narrows but does
not close that window (docs/kernelbench.md).

Processes are signalled through pidfds where the kernel has them (Linux
5.3+), each opened while its parent is still the one the walk saw, so a
pid reused by an unrelated process after its owner exited is never
stopped; without pidfds, by pid (a reuse within the walk's microseconds
is the residual risk there)."""
import os
import signal
import threading
import time
import weakref

# the worker's supervisor walks process trees the same way (supervisor.py
# imports the standard library only, so this costs the caller nothing)
from .supervisor import _children, _stat

# how long a freeze waits for every process to be seen stopped (a process
# inside a driver call stops when the call returns); then it goes on
STOP_WAIT_S = 0.5
# rounds of walk-and-stop: a process that forked just before its SIGSTOP
# has a child the next walk finds
MAX_ROUNDS = 20
# then how long a freeze waits, at most, for every process it signalled to
# be seen stopped before the exclusive phase goes on: one inside a long
# driver call (a CUDA context's creation, a large mapping: a worker still
# starting) stops only when the call returns, and until then runs beside
# the timed phase (helper-40: a candidate's own spare, started ahead, could
# be made to start in its baseline's). Past it the phase goes on and says
# how many were not seen stopped (Freezer.unsettled; the gate's facts).
# Every thread of a process counts (a driver call is a thread's). A
# worker's tree that outlasted it once is not waited for again, whatever
# processes it makes later: a candidate that keeps processes in an
# uninterruptible wait (a vfork's parent, its child stopped) would
# otherwise cost every later timed phase of the lane SETTLE_S (helper-41)
SETTLE_S = 5.0


def descendants(root):
    """Every process below root as (pid, parent), parents first (root itself
    not included)."""
    out, todo = [], [root]
    while todo:
        parent = todo.pop()
        for kid in sorted(_children(parent)):
            out.append((kid, parent))
            todo.append(kid)
    return out


class _Stopped:
    """One process this freeze stopped, held by pidfd where possible."""
    __slots__ = ("pid", "fd")

    def __init__(self, pid, parent, fd=None):
        """fd: a pidfd of pid already held (its own, closed with it): no
        check of the parent then."""
        self.pid, self.fd = pid, fd
        if fd is None and hasattr(os, "pidfd_open"):
            try:
                self.fd = os.pidfd_open(pid)
            except OSError:
                raise ProcessLookupError(pid) from None
            # the pidfd names whatever process had the pid when it was
            # opened: still the walk's one only if its parent is unchanged
            if _stat(pid)[1] != parent:
                os.close(self.fd)
                raise ProcessLookupError(pid)

    def signal(self, sig):
        try:
            if self.fd is not None:
                signal.pidfd_send_signal(self.fd, sig)
            else:
                os.kill(self.pid, sig)
            return True
        except OSError:  # gone (or a zombie): nothing to stop or continue
            return False

    def close(self):
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

    @classmethod
    def root(cls, proc):
        """A worker's supervisor: an exec'd one is this process's child (its
        pidfd checked against this process as its parent); a forked one is
        the zygote's (zygote.ForkedProcess), held by a copy of the pidfd it
        came with, which names it whatever its parent."""
        dup = getattr(proc, "dup_pidfd", None)
        if dup is None:
            return cls(proc.pid, os.getpid())
        return cls(proc.pid, None, dup())  # (ProcessLookupError once it ended)


class Freezer:
    """The workers of one lane (track: every WorkerProcess its evaluation
    threads start, worker_process.watch_starts), and the freeze of all but
    the ones kept. One freeze at a time (the gate's exclusive phase)."""

    def __init__(self):
        self._lock = threading.Lock()
        self._workers = weakref.WeakSet()
        self._stopped = None      # {pid: _Stopped} while frozen, else None
        self._trees = {}          # while frozen: each worker's root pid -> the pids stopped in its tree
        self._kept = ()
        self._since = None
        self._by = None           # the thread that froze the others
        self._frozen_workers = []
        self.unsettled = 0        # processes of the last freeze not seen stopped within SETTLE_S
        self._slow = weakref.WeakSet()  # workers whose tree outlasted SETTLE_S once: not waited for again
        self.counters = {"freezes": 0, "stopped": 0, "unsettled": 0}

    def track(self, worker):
        """A worker started by one of the lane's evaluations; stopped at once
        if a freeze is in progress (it was started after the walk), unless
        the thread that froze the others started it (a baseline replaced
        inside its own timed phase: verification.check_baseline_paths)."""
        with self._lock:
            self._workers.add(worker)
            if self._stopped is not None and threading.get_ident() != self._by:
                pause(worker)
                self._stop_trees([worker])
                self._frozen_workers.append(worker)
                self._settle([worker])

    def freeze(self, keep=()):
        """Stops every process below each tracked worker's supervisor except
        the kept workers'; the number of processes stopped."""
        with self._lock:
            if self._stopped is not None:
                raise RuntimeError("already frozen")
            self._stopped, self._kept, self._since = {}, tuple(k for k in keep if k is not None), \
                time.monotonic()
            self._trees = {}
            self._by = threading.get_ident()
            others = [w for w in list(self._workers) if w not in self._kept and _alive(w)]
            self._frozen_workers = others
            for w in others:
                pause(w)
            self._stop_trees(others)
            self.unsettled = 0
            self._settle(others)
            self.counters["freezes"] += 1
            self.counters["stopped"] += len(self._stopped)
            return len(self._stopped)

    def _settle(self, workers):
        """Waits until every process this freeze stopped in the workers'
        trees is seen stopped, each of its threads (or gone), SETTLE_S at
        most (no wait for a worker whose tree outlasted it before); the
        processes that were not are counted in unsettled."""
        def late(w):
            return [pid for pid in self._trees.get(w.proc.pid, ()) if not _all_threads_stopped(pid)]
        deadline = time.monotonic() + SETTLE_S
        waiting = [w for w in workers if w not in self._slow]
        while waiting and time.monotonic() < deadline:
            waiting = [w for w in waiting if late(w)]
            if waiting:
                time.sleep(0.001)
        for w in workers:
            n = len(late(w))
            if n:
                self._slow.add(w)
                self.unsettled += n
                self.counters["unsettled"] += n

    def _stop_trees(self, workers):
        roots = [w.proc.pid for w in workers]
        deadline = time.monotonic() + STOP_WAIT_S
        stopped_roots = []
        for w in workers:
            root = w.proc.pid
            if root not in self._stopped and not descendants(root):
                # its supervisor has not forked the worker yet (a start
                # just sent): stopped itself, it forks nothing while the
                # others are frozen; a fork that beat the signal is a child
                # the walk below finds
                try:
                    s = _Stopped.root(w.proc)
                except ProcessLookupError:
                    continue
                self._stopped[root] = s
                self._trees.setdefault(root, []).append(root)
                s.signal(signal.SIGSTOP)
                stopped_roots.append(root)
        # seen stopped before the walk: a fork in progress when the signal
        # came has returned by then, its child listed (a forked supervisor
        # forks its worker within microseconds of its own start)
        _wait_stopped(stopped_roots, deadline)
        for _ in range(MAX_ROUNDS):
            new = [(pid, parent, root) for root in roots for pid, parent in descendants(root)
                   if pid not in self._stopped]
            if not new:
                return
            for pid, parent, root in new:
                try:
                    s = _Stopped(pid, parent)
                except ProcessLookupError:
                    continue
                self._stopped[pid] = s
                self._trees.setdefault(root, []).append(pid)
                s.signal(signal.SIGSTOP)
            # stopped processes fork no more: wait until they are seen
            # stopped, so the next walk's list is complete
            _wait_stopped([pid for pid, _, _ in new], deadline)

    def thaw(self):
        """Continues every process the freeze stopped; the seconds frozen
        are the lane's, not the candidates' (resume); the seconds frozen."""
        with self._lock:
            stopped, self._stopped = self._stopped, None
            workers, self._frozen_workers, self._kept = self._frozen_workers, [], ()
            if stopped is None:
                return 0.0
            for s in stopped.values():
                s.signal(signal.SIGCONT)
                s.close()
            for w in workers:
                resume(w)
            return time.monotonic() - self._since


_STOPPED = (None, "T", "t", "Z", "X")  # a process's state once stopped (or gone)


def _all_threads_stopped(pid):
    """Whether every thread of pid is stopped (or gone): /proc/<pid>/stat
    is the group leader's alone, which may read stopped (or a zombie, its
    thread exited) while another thread is still in a driver call."""
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return True
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if state not in _STOPPED:
            return False
    return True


def _wait_stopped(pids, deadline):
    """Until every one of pids is seen stopped or gone (or the deadline)."""
    while time.monotonic() < deadline and any(_stat(pid)[0] not in _STOPPED for pid in pids):
        time.sleep(0.0005)


_lost_lock = threading.Lock()


def pause(worker):
    """The lane's time starts for this worker (it waits at the gate, or is
    frozen): not the candidate's. Paired with resume; nested pauses count
    once. A worker's `clock` (its evaluation's: in_flight.py's Slot) is
    paused with it, so the evaluation's lost time is the union of its
    own waits and its candidate's; the clock paused is the one the worker
    had at its first pause, and the same one is resumed (a clock given to
    a worker while it is paused is left alone)."""
    if worker is None:
        return
    with _lost_lock:
        _start(worker)
        if worker.lost_depth == 1:
            clock = worker.paused_clock = getattr(worker, "clock", None)
            if clock is not None:
                _start(clock)


def resume(worker):
    """The lane's time ends: what it took is added to the worker's lost
    seconds and moves its evaluation limit (WorkerProcess.limit_until)
    later by as much (its clock's too)."""
    if worker is None:
        return
    with _lost_lock:
        if _stop(worker):
            clock, worker.paused_clock = getattr(worker, "paused_clock", None), None
            if clock is not None:
                _stop(clock)


def _start(held):
    depth = getattr(held, "lost_depth", 0)
    if depth == 0:
        held.lost_since = time.monotonic()
    held.lost_depth = depth + 1


def _stop(held):
    """One pause of held over; True when it was the last (its time added)."""
    depth = getattr(held, "lost_depth", 0)
    if depth <= 0:
        return False  # (never paused: nothing to end)
    held.lost_depth = depth - 1
    if held.lost_depth:
        return False
    seconds = time.monotonic() - held.lost_since
    held.lost_s = getattr(held, "lost_s", 0.0) + seconds
    if getattr(held, "deadline", None) is not None:
        held.deadline += seconds
    return True


def lost_seconds(worker):
    """Seconds this worker has spent waiting at the gate or frozen, so far
    (the scheduler's backstop does not count them)."""
    if worker is None:
        return 0.0
    with _lost_lock:
        ongoing = time.monotonic() - worker.lost_since if getattr(worker, "lost_depth", 0) else 0.0
        return getattr(worker, "lost_s", 0.0) + ongoing


def _alive(w):
    try:
        return w.ended is None and w.proc.poll() is None
    except Exception:  # noqa: BLE001 - a fake or half-made worker: not frozen
        return False
