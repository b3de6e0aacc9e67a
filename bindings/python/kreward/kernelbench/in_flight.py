"""Several ModelNew candidates of one problem in flight on one lane (the
scheduler's in_flight > 1; issue 31): each starts, loads, verifies and
seals beside the others, and is timed alone (gate.py).

The design, and why it is this one: a Runner (runner.py) holds what a
problem needs once (the imported problem, the reference run here for the
golden outputs, its settings) and one Processes (processes.py: the
baseline worker, a candidate worker, a spare), behind a lock that makes
its evaluations one at a time. Several Runners per problem would also
mean several baseline workers (a CUDA context each, a start and a
torch.compile each, timed against different processes), so instead an
InFlightRunner keeps one Runner and gives each evaluation in flight a
slot: a Processes of its own for its candidate worker and its spare
(Runner.slot_processes: same settings), and the Runner's Processes for the
baseline, shared (Slot). Evaluation.run is unchanged but for the gate's
three calls: it asks its `processes` for both sides, and a Slot answers
each from the right one.

The shared baseline:
- started and waited for under one lock (two evaluations never read its
  replies at once, nor start two);
- timed only inside the exclusive phase of the gate (Evaluation.run), so
  one at a time, after the timed candidate's whole process tree ended;
- a Slot's `baseline` is the worker this evaluation saw ready: if it died
  and another evaluation started a new one meanwhile, this one's requests
  fail (no baseline time, said in its notes) rather than read the new
  worker's start replies, and ending it leaves the new one alone (without
  waiting for the lock, which the evaluation waiting for the new one's
  start holds while that start is frozen by this one's phase).
While any evaluation is in flight the Runner's own lock is held, so
keep_warm (processes.py) does not end its baseline under it; a Runner
closed by the lane closes every slot.

Memory: each slot keeps its own spare (as a Runner does), so a lane may
hold up to keep_warm x (1 + K) workers, each with a CUDA context: lower
keep_warm with a larger K."""
import contextlib
import threading
import types

from .freezer import Freezer, lost_seconds, pause, resume
from .gate import Gate
from .worker_process import watch_starts


class Slot:
    """What Evaluation.run sees as its processes: the candidate side (start_candidate,
    start_spare, the sandbox) from `own`, the baseline from the Runner's
    `shared` Processes, under `lock`."""

    def __init__(self, own, shared, lock, gate=None):
        self.own, self.shared, self.lock, self.gate = own, shared, lock, gate
        self._seen = None   # the baseline worker this evaluation saw ready
        self.thread = None  # the thread of the evaluation using the slot
        # held while an abort ends this slot's workers: the slot is not given
        # to the next evaluation before that is over (it would end the next
        # one's workers)
        self.aborting = threading.Lock()

    @property
    def clock(self):
        """This evaluation's lost time (freezer.pause, resume): its thread's
        waits at the gate and for the baseline's lock, and its candidate
        worker's waits and freezes (the worker's `clock`, given by `own`),
        counted once; the scheduler's backstop does not count it (lost_s)."""
        return self.own.clock

    def __getattr__(self, name):  # (only what the Slot does not define itself)
        return getattr(self.own, name)

    def start_candidate(self, *args, **kw):
        got = self.own.start_candidate(*args, **kw)
        if self.own.sandbox_fallback and self.shared.sandbox == "start":
            # "auto" gave way to "init" here: the baseline follows, as a
            # Runner's own fallback restarts it (processes._fall_back_to_init)
            with self._locked():
                if self.shared.sandbox == "start":
                    self.shared._fall_back_to_init(self.own.sandbox_fallback)
        return got

    def start_spare(self, next_source=None, ahead=False):
        # a shared step: its start (a fork of this process, a staging
        # buffer allocated on the GPU here) never during another's timed phase
        if self.gate is None:
            return self.own.start_spare(next_source, ahead=ahead)
        with self.gate.shared(candidate=False):
            return self.own.start_spare(next_source, ahead=ahead)

    def start_baseline(self):
        b = self.shared.baseline
        if b is not None and b.alive():
            return  # (not waiting for the lock another evaluation holds in baseline_ready)
        with self._locked():
            self.shared.start_baseline()

    def baseline_ready(self):
        with self._locked():
            why = self.shared.baseline_ready()
            self._seen = self.shared.baseline if why is None else None
            return why

    @contextlib.contextmanager
    def _locked(self):
        """The baseline's lock; the wait for it is the lane's time (another
        evaluation holds it while its baseline starts), not this one's."""
        pause(self.clock)
        try:
            self.lock.acquire()
        finally:
            resume(self.clock)
        try:
            yield
        finally:
            self.lock.release()

    # (inside the exclusive phase, neither call waits for the lock where the
    # baseline it saw was replaced: the evaluation holding the lock may be
    # waiting for the new one's start, frozen until this phase ends)
    def note_baseline(self, **facts):
        if self.shared.baseline is self._seen:
            self.shared.note_baseline(**facts)

    def end_baseline(self):
        seen, self._seen = self._seen, None
        if seen is not None and self.shared.baseline is not seen:
            seen.end()  # a newer one is another evaluation's to use
            return
        with self._locked():
            if seen is None or self.shared.baseline is seen:
                self.shared.end_baseline()

    @property
    def baseline(self):
        return self._seen if self._seen is not None else self.shared.baseline

    @property
    def baseline_facts(self):
        return self.shared.baseline_facts

    @property
    def baseline_memo(self):
        # the baseline worker's recent times (baseline_memo.py): every slot
        # times the one shared worker, so they share its memo; read and
        # added to only inside the gate's exclusive phase, one at a time
        return self.shared.baseline_memo


class InFlightRunner:
    """One problem's Runner with up to as many evaluations in flight as the
    lane runs; evaluate() may be called from several threads at once."""

    def __init__(self, runner, gate):
        self.runner, self.gate = runner, gate
        self.baseline_lock = threading.RLock()
        self._lock = threading.Lock()
        self._idle = []        # slots no evaluation uses now
        self._busy = {}        # token -> Slot

    def _acquire(self, token):
        with self._lock:
            if not self._busy:
                # keep_warm leaves a Runner whose lock is held alone: its
                # baseline serves every evaluation in flight
                self.runner._processes.lock.acquire()
            slot = self._idle.pop() if self._idle else None
            if slot is None:
                slot = Slot(self.runner.slot_processes(), self.runner._processes, self.baseline_lock,
                            self.gate)
            slot._seen, slot.thread = None, threading.get_ident()
            slot.own.candidate = None  # (the last evaluation's, ended)
            slot.own.clock = types.SimpleNamespace()
            self._busy[token] = slot
        self.gate.bind_clock(slot.clock)
        return slot

    def _release(self, token):
        self.gate.bind_clock(None)
        with self._lock:
            slot = self._busy.pop(token, None)
            if not self._busy:
                self.runner._processes.lock.release()
        if slot is None:
            return
        with slot.aborting:  # an abort of this evaluation ending its workers: over first
            pass
        with self._lock:
            self._idle.append(slot)

    def evaluate(self, token, source, next_source=None, **options):
        """One candidate in a slot of its own (token: the caller's name for
        this evaluation, for abort)."""
        slot = self._acquire(token)
        try:
            return self.runner.evaluate(source, next_source=next_source, slot=slot, gate=self.gate,
                                        **options)
        finally:
            self._release(token)

    def lost_s(self, token):
        """Seconds the evaluation waited for the lane (at the gate, for the
        baseline's lock) or had its candidate worker frozen, counted once
        (freezer.lost_seconds of the slot's clock)."""
        with self._lock:
            slot = self._busy.get(token)
        return lost_seconds(slot.clock) if slot is not None else 0.0

    def abort(self, token):
        """Ends one evaluation's workers (its candidate's, its spare); if it
        holds the gate, the baseline's too (what it times may be what
        hangs). The evaluation then ends on its own thread (WorkerDied)."""
        with self._lock:
            slot = self._busy.get(token)
            # taken while the slot is still this evaluation's (not blocking:
            # an abort of it already under way does the work)
            if slot is None or not slot.aborting.acquire(blocking=False):
                return
        try:
            slot.own.close()
            seen = slot._seen
            if seen is not None and self.gate.holder() == slot.thread:
                seen.end()
        finally:
            slot.aborting.release()

    def close(self):
        """Ends every slot's workers and the Runner's (in-flight evaluations
        end: their workers die); as Runner.close, a later evaluation starts
        them again."""
        with self._lock:
            slots = self._idle + list(self._busy.values())
            self._idle = []
        for slot in slots:
            slot.own.close()
        self.runner.close()


def lane_gate(device, probe=True):
    """A lane's gate: a freezer for its workers, and on a GPU the idle probe
    (gpu_probe.py) unless probe is False."""
    from .gpu_probe import idle_probe
    return Gate(Freezer(), idle_probe(device) if probe and device != "cpu" else None)


def tracked(gate):
    """A context manager: every worker this thread starts is tracked by the
    gate's freezer (so frozen with the others)."""
    freezer = getattr(gate, "freezer", None)
    return watch_starts(freezer.track if freezer is not None else None)
