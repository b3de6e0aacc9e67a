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

Memory: a slot keeps a spare (as a Runner does) only with a place in its
lane's LaneSpares (max_spares, default K), so a lane holds at most its
Runners' baselines, K candidate workers and max_spares spares, each with a
CUDA context and a staging buffer (16 at K = 4 and the defaults, where a
spare per slot made up to 40)."""
import collections
import contextlib
import threading
import types
import weakref

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
        try:
            return self.own.start_candidate(*args, **kw)
        finally:
            # (also where the "init" worker started after the fallback failed)
            if self.own.sandbox_fallback and self.shared.sandbox == "start":
                # "auto" gave way to "init" here: the baseline follows, as a
                # Runner's own fallback restarts it (processes._fall_back_to_init)
                with self._locked():
                    if self.shared.sandbox == "start":
                        self.shared._fall_back_to_init(self.own.sandbox_fallback)

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


class LaneSpares:
    """A lane's cap on spare candidate workers with several candidates in
    flight (RunnerLane's max_spares, default its in_flight K).

    Why: every slot kept a spare (Processes.start_spare), so a lane that had
    run K candidates of each of its keep_warm problems at once kept
    keep_warm x K spares (32 at K = 4), each a process with a CUDA context
    and a staging buffer, where what spares are for (the next candidate's
    worker starting while the one before it runs) takes one per evaluation
    in flight.

    How: a spare takes a place here before its process starts and gives it
    back once a candidate takes it (it is then one of the lane's K
    candidate workers) or it is ended (its process gone), so the lane's
    spares never number more than `cap`. A counter, not a semaphore to wait
    on: a spare saves its candidate a start, never worth an evaluation's
    wait. Where no place is free, the spare of an idle slot (a problem not
    evaluated at the moment), oldest place first, is ended and its place
    taken, so the places follow the evaluations in flight instead of
    staying with problems the lane ran earlier; a spare of a slot in use
    (started ahead for the candidate after the one running) is never ended
    here: its evaluation's thread owns it. With none idle, no spare starts
    (the next candidate's worker starts at its turn, as with spare=False).
    With cap >= K a slot in use always finds one: the other K - 1 hold at
    most K - 1."""

    def __init__(self, cap):
        self.cap = max(0, int(cap))
        self._lock = threading.Lock()
        self._places = collections.OrderedDict()  # the places held, oldest first (a set in order)
        self._runners = weakref.WeakSet()          # the lane's InFlightRunners (reclaim_spare)
        self.counters = collections.Counter()      # taken, reclaimed (idle spares ended), refused

    def add_runner(self, runner):
        with self._lock:
            self._runners.add(runner)

    def held(self):
        """The places held now (the lane's live spares, and one per spare
        starting)."""
        with self._lock:
            return len(self._places)

    def take(self, holder):
        """A place for holder's (a slot's Processes) next spare: a _Place
        to give back once that spare is taken or ended, or None."""
        # (each round takes a place, or ends an idle spare and tries again:
        # another slot may take the place it freed first)
        for _ in range(self.cap + 1):
            with self._lock:
                if len(self._places) < self.cap:
                    place = _Place(self, holder)
                    self._places[place] = None
                    self.counters["taken"] += 1
                    return place
                holders = [p.holder for p in self._places]
                runners = list(self._runners)
            # (outside the lock: a Runner's lock is taken inside, and ending a
            # worker takes a while)
            if not any(r.reclaim_spare(h) for h in holders for r in runners):
                break
            with self._lock:
                self.counters["reclaimed"] += 1
        with self._lock:
            self.counters["refused"] += 1
        return None

    def full(self):
        """Whether every place is held (a new spare would end an idle one)."""
        with self._lock:
            return len(self._places) >= self.cap

    def hand_over(self, taker, source=None):
        """Gives taker (a slot's Processes with no spare) the spare of
        another problem's idle slot that fits it and the source it is for,
        where known (Processes.spare_fits), place and all: True if one was
        handed over.

        Why: a slot's spare is started for the next candidate of its own
        problem, so a lane that goes on to the next problem (the scheduler
        takes a batch problem by problem) left its K spares idle in the last
        problem's slots and started the new problem's first K candidates
        cold (~1.5-4 s of start_and_load each, 63 of issue 31's GRPO batch
        of 128 on an H100 at f3146c5), while what a fresh folder's spare
        did in its ready (CUDA, the libraries' warm-up, the library's
        kernels and launchers in a folder no candidate wrote) is the same
        for every problem. The same problem's idle slots are not taken
        from: the slot choice (_idle_slot) already prefers them."""
        with self._lock:
            holders = [p.holder for p in self._places if p.holder is not None and p.holder is not taker]
            runners = list(self._runners)
        for holder in holders:
            for runner in runners:
                if runner.hand_over_spare(holder, taker, source):
                    with self._lock:
                        self.counters["handed_over"] += 1
                    return True
        return False

    def _give_back(self, place):
        with self._lock:
            self._places.pop(place, None)
        place.holder = None


class _Place:
    """One spare's place in its lane's cap (LaneSpares.take), kept with its
    worker (spare_workers._give_back_place); given back once."""

    def __init__(self, spares, holder):
        self.spares, self.holder = spares, holder

    def give_back(self):
        self.spares._give_back(self)


class InFlightRunner:
    """One problem's Runner with up to as many evaluations in flight as the
    lane runs; evaluate() may be called from several threads at once.
    spares: the lane's LaneSpares (None: every slot keeps a spare)."""

    def __init__(self, runner, gate, spares=None):
        self.runner, self.gate, self.spares = runner, gate, spares
        self.baseline_lock = threading.RLock()
        self._lock = threading.Lock()
        self._idle = []        # slots no evaluation uses now
        self._busy = {}        # token -> Slot
        if spares is not None:
            spares.add_runner(self)

    def _idle_slot(self, source):
        """The idle slot to evaluate source in (lock held), taken out of the
        idle list, or None: the one whose spare can take source (started
        for it, or in "init" any spare), else one with a fresh folder's
        spare (it takes a source with no folder yet), else one with no
        spare (a spare is kept for the candidate it was started for),
        else the last released. Taking the last released whatever its
        spare (as before) left a spare started ahead for this very
        candidate in another slot, and the candidate started cold: most of
        the 1.26 s start_and_load median of issue 31's GRPO batch at four
        in flight (an H100, b0dfbc0)."""
        if not self._idle:
            return None
        # a fresh folder's spare takes only a source with no folder of its
        # own (Processes._needs_own_folder: one that builds, or has one)
        own0 = self._idle[0].own
        fresh_ok = source is not None and hasattr(own0, "_needs_own_folder") and \
            not own0._needs_own_folder(source)

        def rank(slot):
            own = slot.own
            spare = getattr(own, "spare", None)
            if spare is None:
                return 2
            if getattr(own, "sandbox", None) != "start" or own.spare_source == source:
                return 0
            if fresh_ok and own.spare_source is None and getattr(own, "spare_folder", None):
                return 1
            return 3
        # (the most recently released first among equals, as before)
        best = min(reversed(range(len(self._idle))), key=lambda i: rank(self._idle[i]))
        return self._idle.pop(best)

    def _acquire(self, token, source=None):
        with self._lock:
            if not self._busy:
                # keep_warm leaves a Runner whose lock is held alone: its
                # baseline serves every evaluation in flight
                self.runner._processes.lock.acquire()
            slot = self._idle_slot(source)
            if slot is None:
                own = self.runner.slot_processes()
                own.lane_spares = self.spares
                # a fresh folder's worker started for a candidate: its spawn
                # a shared step (never beside a timed phase), its ready
                # frozen in each timed phase like a spare's (tracked)
                own.start_step = lambda gate=self.gate: gate.shared(candidate=False)
                slot = Slot(own, self.runner._processes, self.baseline_lock, self.gate)
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

    def start_baseline_ahead(self):
        """Starts the baseline's worker now, before any evaluation of this
        problem asked for it (RunnerLane.prepare_ahead: a candidate of this
        problem is queued behind others): its start (CUDA, the reference's
        load, build and seal, two calibration batches) runs beside the
        lane's other candidates, a shared step to start and its worker
        frozen with the others in every timed phase (the caller tracks it),
        so the candidate finds it ready instead of waiting 1.6-2.6 s for it
        (an H100 at 267f017). True if it started one; False where one is
        alive or an evaluation of this Runner is in flight (it starts its
        own)."""
        lock = self.runner._processes.lock
        if not lock.acquire(blocking=False):
            return False
        try:
            with self.baseline_lock:
                b = self.runner._processes.baseline
                if b is not None and b.alive():
                    return False
                with self.gate.shared(candidate=False):
                    self.runner._processes.start_baseline()
                return True
        finally:
            lock.release()

    def _idle_slot_of(self, processes):
        """The idle slot whose workers are `processes`, or None (under
        self._lock)."""
        return next((s for s in self._idle if s.own is processes), None)

    def reclaim_spare(self, processes):
        """Ends the spare of this Runner's idle slot whose workers are
        `processes` (LaneSpares: its place goes to a slot in use): True if
        it did. The slot is out of the idle list while its spare ends, so
        no evaluation takes it (and that spare) meanwhile; a slot in use is
        never touched here (its evaluation's thread owns its spare)."""
        with self._lock:
            slot = self._idle_slot_of(processes)
            if slot is None or processes.spare is None:
                return False
            self._idle.remove(slot)
        try:
            processes.end_spare()
        finally:
            with self._lock:
                self._idle.insert(0, slot)  # (taken last: the idle slots with a spare go first)
        return True

    def hand_over_spare(self, processes, taker, source=None):
        """Hands the spare of this Runner's idle slot whose workers are
        `processes` to taker, another Runner's slot (LaneSpares.hand_over),
        where it fits: True if it did. Under this Runner's lock, so no
        evaluation takes that slot meanwhile; a slot in use is never
        touched (its evaluation's thread owns its spare), nor one of this
        Runner's own (taker is never this Runner's)."""
        with self._lock:
            mine = any(s.own is taker for s in self._busy.values())
            slot = self._idle_slot_of(processes)
            if mine or slot is None or not processes.spare_fits(taker, source):
                return False
            w, folder = processes.give_spare()
        taker.take_spare(w, folder)
        return True

    def evaluate(self, token, source, next_source=None, **options):
        """One candidate in a slot of its own (token: the caller's name for
        this evaluation, for abort)."""
        slot = self._acquire(token, source)
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
