"""Several ModelNew candidates in flight per lane (the scheduler's
in_flight; kernelbench/gate.py, freezer.py, in_flight.py), on the CPU: fake
lanes through the real gate show the rules (one timed phase at a time, no
other candidate's request or own thread during it, frozen and thawed
around it, one result each in order, faster than one at a time); the real
freezer on a real process tree; the real Runner with two candidates in
flight."""
import collections
import os
import pathlib
import signal
import subprocess
import sys
import threading
import time
import types

import pytest

from kreward.kernelbench import freezer as freezer_mod
from kreward.kernelbench.gate import Gate
from kreward.kernelbench.gpu_probe import wait_idle
from kreward.kernelbench.scheduler import Scheduler

ROOT = pathlib.Path(__file__).resolve().parents[4]
KB = ROOT / "examples" / "kernelbench"


class Problem:
    def __init__(self, key):
        self.key = self.name = key


class Log:
    """Every gated step, timed, in one place: what the assertions read."""

    def __init__(self):
        self.lock = threading.Lock()
        self.requests = []      # (token, start, end)
        self.exclusive = []     # (token, start, end)
        self.violations = []    # a worker's own thread that ran during another's timed phase
        self.holder = None

    def span(self, kind, token, t0):
        with self.lock:
            getattr(self, kind).append((token, t0, time.monotonic()))


class FakeWorker:
    """A candidate's worker: a thread of its own code that works between
    requests until it is frozen (the fake freezer's SIGSTOP)."""

    def __init__(self, token, log):
        self.token, self.log = token, log
        self.running = threading.Event()
        self.running.set()          # cleared: frozen
        self.stop = threading.Event()
        self.deadline = None
        # (started once tracked, as a real worker's process is stopped at
        # its start when a freeze is in progress: freezer.Freezer.track)
        self.thread = threading.Thread(target=self._own_code, daemon=True)

    def _own_code(self):
        while not self.stop.is_set():
            self.running.wait()
            with self.log.lock:
                holder = self.log.holder
                # (checked under the log's lock: a freeze sets holder after it stops us)
                if holder is not None and holder != self.token and self.running.is_set():
                    self.log.violations.append((self.token, holder))
            time.sleep(0.001)

    def end(self):
        self.stop.set()
        self.running.set()


class FakeFreezer:
    """Records each freeze (who was stopped, who kept) and thaw."""

    def __init__(self, log, real=True):
        self.log, self.real = log, real
        self.workers, self.calls = [], []
        self.lock = threading.Lock()
        self.frozen = False

    def track(self, w):
        with self.lock:
            self.workers.append(w)
            if self.frozen and self.real:
                w.running.clear()
        w.thread.start()

    def freeze(self, keep):
        with self.lock:
            self.frozen = True
            others = [w for w in self.workers if w not in keep and not w.stop.is_set()]
            self.paused = others
            for w in others:
                freezer_mod.pause(w)
                if self.real:
                    w.running.clear()
        with self.log.lock:
            self.log.holder = keep[0].token
        self.calls.append(("freeze", keep[0].token, sorted(w.token for w in others)))
        return len(others)

    def thaw(self):
        with self.log.lock:
            token, self.log.holder = self.log.holder, None
        with self.lock:
            self.frozen = False
            for w in self.paused:
                freezer_mod.resume(w)
            for w in self.workers:
                w.running.set()
        self.calls.append(("thaw", token))
        return 0.0


class InFlightFakeLane:
    """Evaluates like Evaluation.run through a real gate: start_and_load
    (not gated: its worker is frozen instead), verify in `cases` shared
    steps, then the exclusive phase. Sources: "pass", "dead" (its worker
    dies in verify: crash), "hang" (hangs in its timed phase until
    aborted), "error", "stuck" (each verify step takes 1.5 s)."""

    def __init__(self, log, load_s=0.05, verify_s=0.05, timed_s=0.01, cases=5, freeze=True,
                 overdue_s=5.0):
        self.log = log
        self.freezer = FakeFreezer(log, real=freeze)
        self.gate = Gate(self.freezer, overdue_s=overdue_s)
        self.load_s, self.verify_s, self.timed_s, self.cases = load_s, verify_s, timed_s, cases
        self.aborts, self.workers = {}, {}
        self.lock = threading.Lock()
        self.calls = []

    def evaluate(self, problem, source, next_source=None, options=None, token=None):
        aborted = threading.Event()
        with self.lock:
            self.calls.append(token)
            self.aborts[token] = aborted
        w = FakeWorker(token, self.log)
        with self.lock:
            self.workers[token] = w
        self.freezer.track(w)
        try:
            time.sleep(self.load_s)                                 # start_and_load
            for case in range(self.cases):                          # verify
                with self.gate.shared(w):
                    t0 = time.monotonic()
                    time.sleep(self.verify_s / self.cases if source != "stuck" else 1.5)
                    self.log.span("requests", token, t0)
                if source == "dead" and case == 1:
                    return {"verdict": "crash", "feedback": "the worker died"}
            if source == "error":
                return {"verdict": "error", "feedback": "the environment"}
            self.gate.enter_exclusive(keep=(w,))
            try:
                t0 = time.monotonic()
                if source == "hang":
                    aborted.wait(30)
                    return {"verdict": "crash", "feedback": "killed"}
                time.sleep(self.timed_s)
                self.log.span("exclusive", token, t0)
            finally:
                self.gate.leave_exclusive()
            return {"verdict": "pass", "token": token}
        finally:
            w.end()

    def abort(self, token=None):
        with self.lock:
            events = list(self.aborts.values()) if token is None else [self.aborts.get(token)]
        for e in events:
            if e is not None:
                e.set()

    def lost_s(self, token):
        with self.lock:
            w = self.workers.get(token)
        return freezer_mod.lost_seconds(w)

    def healthy(self):
        return True

    def close(self):
        self.abort()


def _collect(s, timeout=60):
    got = []
    while True:
        try:
            got.append(s.next(timeout=timeout))
        except LookupError:
            return got


def _overlaps(a, b):
    return a[1] < b[2] and b[1] < a[2]


def _batch(lane, sources, in_flight, **kw):
    problems = [Problem(f"p{i}") for i in range(8)]
    with Scheduler({"cuda:0": lane}, in_flight=in_flight, **kw) as s:
        tickets = [s.submit(problems[i % 8], src) for i, src in enumerate(sources)]
        return tickets, _collect(s)


def test_one_timed_phase_at_a_time_no_other_request_during_it_and_the_rest_frozen():
    log = Log()
    lane = InFlightFakeLane(log, load_s=0.02, verify_s=0.03, timed_s=0.01)
    tickets, got = _batch(lane, ["pass"] * 12, in_flight=3)
    assert [t for t, _ in got] == tickets and all(r["verdict"] == "pass" for _, r in got)
    assert len(log.exclusive) == 12
    # (a) never two timed phases at once
    ex = sorted(log.exclusive, key=lambda x: x[1])
    assert all(a[2] <= b[1] for a, b in zip(ex, ex[1:]))
    # (b) no request of another candidate during a timed phase
    assert not [(r, e) for r in log.requests for e in log.exclusive if r[0] != e[0] and _overlaps(r, e)]
    # ...and candidates were in flight together (the test would pass trivially one at a time)
    assert any(a[0] != b[0] and _overlaps(a, b) for a in log.requests for b in log.requests)
    # (c) every timed phase between a freeze of the others and their thaw,
    # and no candidate's own thread ran during another's
    freezes = [c for c in lane.freezer.calls if c[0] == "freeze"]
    assert len(freezes) == 12 and lane.freezer.calls[-1][0] == "thaw"
    assert all(a[0] == "freeze" and b[0] == "thaw" and a[1] == b[1]
               for a, b in zip(lane.freezer.calls[::2], lane.freezer.calls[1::2]))
    assert any(stopped for _, _, stopped in freezes)           # others were there to freeze
    assert all(holder not in stopped for _, holder, stopped in freezes)
    assert log.violations == []


def test_a_candidate_stuck_in_verify_holds_the_timed_phases_back_only_until_overdue():
    log = Log()
    lane = InFlightFakeLane(log, load_s=0.01, verify_s=0.02, timed_s=0.01, cases=1, overdue_s=0.3)
    tickets, got = _batch(lane, ["stuck"] + ["pass"] * 6, in_flight=3)
    assert [r["verdict"] for _, r in got] == ["pass"] * 7
    stuck = [r for r in log.requests if r[0] == tickets[0]][0]
    during = [e for e in log.exclusive if e[0] != tickets[0] and _overlaps(stuck, e)]
    # the others were timed while it was stuck, each past its first 0.3 s,
    # with its worker frozen (its own thread never ran meanwhile)
    assert during and all(e[1] >= stuck[1] + 0.3 for e in during)
    assert all(tickets[0] in stopped for _, holder, stopped in lane.freezer.calls[::2]
               if holder in {e[0] for e in during})
    assert log.violations == [] and lane.gate.counters["overdue_steps"] >= len(during)


def test_this_processes_own_shared_steps_are_always_waited_for():
    gate = Gate(overdue_s=0.05)
    inside, done = threading.Event(), threading.Event()

    def own_step():
        with gate.shared(candidate=False):
            inside.set()
            time.sleep(0.4)
        done.set()
    t = threading.Thread(target=own_step)
    t.start()
    inside.wait(5)
    gate.enter_exclusive()
    assert done.is_set()         # not granted before the step ended
    gate.leave_exclusive()
    t.join(5)


def test_without_the_freeze_a_candidates_own_thread_is_caught_running():
    # the check above can fail: the same lane with a freezer that stops nothing
    log = Log()
    lane = InFlightFakeLane(log, load_s=0.02, verify_s=0.03, timed_s=0.02, freeze=False)
    _batch(lane, ["pass"] * 8, in_flight=3)
    assert log.violations


def test_a_dead_and_a_hung_candidate_in_flight_each_get_one_result_in_order():
    log = Log()
    lane = InFlightFakeLane(log, load_s=0.02, verify_s=0.02, timed_s=0.005)
    sources = ["pass", "dead", "pass", "hang", "pass", "pass", "error", "pass", "dead", "pass"]
    tickets, got = _batch(lane, sources, in_flight=3, job_timeout_s=1.0, watchdog_s=0.05,
                          max_attempts=2)
    assert [t for t, _ in got] == tickets                      # each once, in order
    want = {"pass": "pass", "dead": "crash", "hang": "timeout", "error": "error"}
    assert [r["verdict"] for _, r in got] == [want[s] for s in sources]
    # the hung one held the gate until the backstop aborted it alone: the
    # others, waiting at the gate meanwhile, were not its backstop's (their
    # wait is the lane's: lost_s), and went on; each evaluated once (the
    # error has no other lane to be tried on)
    assert sorted(lane.calls) == tickets
    assert len(log.exclusive) == sources.count("pass")


class RetiringLane:
    """"error" fails at once and the health check then fails (the lane is
    retired, closed); "slow" waits for that close, and then says what an
    evaluation whose workers the close killed says: crash."""

    def __init__(self):
        self.closed = threading.Event()

    def evaluate(self, problem, source, next_source=None, options=None, token=None):
        if source == "error":
            return {"verdict": "error", "feedback": "the device is lost"}
        return {"verdict": "crash" if self.closed.wait(10) else "pass", "feedback": "the worker died"}

    def abort(self, token=None):
        pass

    def healthy(self):
        return "the device is gone"

    def close(self):
        self.closed.set()


def test_candidates_in_flight_on_a_retired_lane_are_the_environments_failure_not_theirs():
    with Scheduler({"cuda:0": RetiringLane()}, in_flight=3) as s:
        tickets = [s.submit(Problem("p"), "slow"), s.submit(Problem("p"), "slow")]
        time.sleep(0.2)  # both in flight
        tickets.append(s.submit(Problem("p"), "error"))
        got = _collect(s)
    assert [t for t, _ in got] == tickets
    assert [r["verdict"] for _, r in got] == ["error"] * 3   # never "crash": judged for the lane's end
    assert all("retired while it ran" in r["feedback"] for _, r in got[:2])
    assert s.counters["lanes_retired"] == 1


def test_candidates_in_flight_finish_a_batch_clearly_faster():
    def wall(k):
        lane = InFlightFakeLane(Log(), load_s=0.05, verify_s=0.05, timed_s=0.01)
        t0 = time.monotonic()
        _, got = _batch(lane, ["pass"] * 16, in_flight=k)
        assert len(got) == 16
        return time.monotonic() - t0
    one, four = wall(1), wall(4)
    # one at a time: 16 x 110 ms; four in flight: the timed phases (16 x 10
    # ms) and a quarter of the rest, about 0.6 s
    assert one / four > 1.8, (one, four)


def test_the_gate_makes_readers_wait_for_a_waiting_writer_and_gives_back_the_wait():
    gate = Gate()

    class W:
        deadline = 100.0
    w = W()
    order = []
    gate.enter_exclusive()
    t = threading.Thread(target=lambda: (gate.shared(w).__enter__(), order.append("reader")))
    t.start()
    time.sleep(0.1)
    order.append("writer done")
    gate.leave_exclusive()
    t.join(5)
    assert order == ["writer done", "reader"]
    assert w.deadline >= 100.09   # its wait is not charged to its limit
    assert wait_idle(iter([900.0, 50.0, 60.0, 70.0]).__next__, budget_s=5) is None
    assert "did not look idle" in wait_idle(lambda: 900.0, budget_s=0.01)


def test_the_freezer_stops_and_continues_a_whole_process_tree():
    class Worker:  # a supervisor's place: the tree below it is frozen, not it
        ended, deadline = None, 10.0

    # a shell whose child starts a grandchild in a session of its own
    proc = subprocess.Popen(["sh", "-c", "sleep 30 & setsid sleep 30 & wait"], start_new_session=True)
    w, kept = Worker(), Worker()
    w.proc = proc
    kept.proc = subprocess.Popen(["sh", "-c", "sleep 30 & wait"], start_new_session=True)
    try:
        deadline = time.monotonic() + 5
        while len(freezer_mod.descendants(proc.pid)) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        f = freezer_mod.Freezer()
        f.track(w)
        f.track(kept)
        tree = [pid for pid, _ in freezer_mod.descendants(proc.pid)]
        assert f.freeze(keep=(kept,)) == len(tree) >= 2
        assert {freezer_mod._stat(p)[0] for p in tree} == {"T"}
        assert freezer_mod._stat(proc.pid)[0] != "T"            # the supervisor's place runs
        assert all(freezer_mod._stat(p)[0] != "T" for p, _ in freezer_mod.descendants(kept.proc.pid))
        time.sleep(0.05)
        frozen_s = f.thaw()
        assert frozen_s >= 0.05 and w.deadline >= 10.05        # given back to its limit
        # (read until it shows: a CI run's wheel stage read one still "T"
        # right after thaw, on a busy two-core host)
        deadline = time.monotonic() + 2
        while time.monotonic() < deadline:
            states = {p: freezer_mod._stat(p)[0] for p in tree}
            if set(states.values()) <= {"S", "R"}:
                break
            time.sleep(0.01)
        assert set(states.values()) <= {"S", "R"}, states
    finally:
        for p in (proc, kept.proc):
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
        for pid in tree:  # (the setsid one left the group)
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass


def _tiny_relu(tmp_path):
    """KernelBench's ReLU at a size the CPU checks in moments (4096 x 4096
    takes minutes on a busy two-core host)."""
    from kreward.problems import KernelBenchProblem
    tiny = tmp_path / "relu_small.py"
    tiny.write_text((KB / "level1" / "01_relu.py").read_text()
                    .replace("batch_size = 4096", "batch_size = 16").replace("dim = 4096", "dim = 256"))
    return KernelBenchProblem(str(tiny))


def test_a_hung_candidate_in_flight_is_frozen_past_overdue_and_aborted_alone(tmp_path):
    pytest.importorskip("torch", reason="the ModelNew runner needs torch")
    from kreward.kernelbench.lanes import RunnerLane
    lane = RunnerLane("cpu", {"cache_dir": str(tmp_path), "timeout_s": 120, "call_timeout_s": 300},
                      in_flight=2)
    lane.gate.overdue_s = 1.0
    problem = _tiny_relu(tmp_path)
    hung = ("import time, torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n"
            "        time.sleep(1000)\n        return x\n")
    good = ("import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n"
            "        return x.clamp_min(0)\n")
    opts = {"seed": 3, "batches": 3, "calls": 4, "checks": 2}
    got = {}

    def run(token, src):
        got[token] = lane.evaluate(problem, src, None, opts, token=token)
    try:
        threads = {t: threading.Thread(target=run, args=(t, src)) for t, src in (("hung", hung),
                                                                                  ("good", good))}
        threads["hung"].start()
        # the good one starts once the hung one is in verify (a candidate's
        # shared step: its worker's start holds the gate for its spawn only)
        deadline = time.monotonic() + 120
        while not any(overdue is not None for _, overdue in list(lane.gate._reading.values())):
            assert time.monotonic() < deadline, "the hung candidate never reached verify"
            time.sleep(0.01)
        threads["good"].start()
        threads["good"].join(600)
        # timed while the other hung in verify: not waited for past overdue, frozen meanwhile
        assert got["good"]["verdict"] == "pass", got["good"].get("feedback")
        assert got["good"]["gate"].get("overdue_steps") == 1 and got["good"]["gate"]["stopped"] >= 1
        assert threads["hung"].is_alive()
        t0 = time.monotonic()
        lane.abort("hung")                               # that evaluation only
        threads["hung"].join(60)
        assert not threads["hung"].is_alive() and time.monotonic() - t0 < 60
        assert got["hung"]["verdict"] in ("crash", "timeout", "error"), got["hung"]
    finally:
        lane.abort()
        lane.close()


# zygote: every slot's workers forked from the Runner's one zygote;
# spare_ahead "after_load": the next spare asked for after the load
@pytest.mark.parametrize("zygote,spare_ahead", [(False, True), (True, True), (True, "after_load")])
def test_two_candidates_in_flight_through_the_real_runner_on_the_cpu(tmp_path, monkeypatch, zygote, spare_ahead):
    pytest.importorskip("torch", reason="the ModelNew runner needs torch")
    from kreward.kernelbench.lanes import RunnerLane

    lane = RunnerLane("cpu", {"cache_dir": str(tmp_path), "timeout_s": 120, "call_timeout_s": 30,
                              "zygote": zygote, "spare_ahead": spare_ahead}, in_flight=2)
    freezes = []
    real_freeze = lane.gate.freezer.freeze

    def freeze(keep):
        n = real_freeze(keep)
        freezes.append(n)
        return n
    lane.gate.freezer.freeze = freeze
    # the slot's clock is the candidate worker's before its first request
    # (its load): a freeze during the load is the lane's time
    from kreward.kernelbench.processes import Processes
    loads, real_send_load = [], Processes._send_load
    # per slot, in order: its spares' starts asked for ahead, its loads
    by_slot, real_start_spare = {}, Processes.start_spare

    def send_load(self, w, *args, **kw):
        loads.append(getattr(w, "clock", None))
        if class_name_of(args, kw) == "ModelNew":
            by_slot.setdefault(id(self), []).append("load")
        return real_send_load(self, w, *args, **kw)

    def start_spare(self, next_source=None, ahead=False):
        if ahead:
            by_slot.setdefault(id(self), []).append("spare")
        return real_start_spare(self, next_source, ahead=ahead)

    def class_name_of(args, kw):
        return kw.get("class_name", args[1] if len(args) > 1 else None)
    monkeypatch.setattr(Processes, "_send_load", send_load)
    monkeypatch.setattr(Processes, "start_spare", start_spare)
    problem = _tiny_relu(tmp_path)
    good = ("import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n"
            "        return x.clamp_min(0)\n")
    wrong = ("import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n"
             "        return x.abs()\n")
    opts = {"seed": 3, "batches": 3, "calls": 4, "checks": 2}
    with Scheduler({"cpu": lane}, in_flight=2) as s:
        tickets = [s.submit(problem, src, opts) for src in (good, wrong, good)]
        got = _collect(s, timeout=600)
    assert [t for t, _ in got] == tickets
    assert [r["verdict"] for _, r in got] == ["pass", "wrong", "pass"], [r.get("feedback") for _, r in got]
    assert {r["worker_start"] for _, r in got} == {"zygote" if zygote else "exec"}, got
    for _, r in (got[0], got[2]):
        assert r["baseline_us"] > 0 and "gate" in r and "gate" in r["phases_s"]
        assert "gate_baseline" in r and "gate_baseline" in r["phases_s"]
    # two exclusive phases per passing candidate (its timed batches, then
    # its baseline's), its attribution and end a shared step between them
    assert len(freezes) == 4
    assert lane.gate.counters["exclusive"] == 4
    candidate_loads = [c for c in loads if c is not None]
    assert len(candidate_loads) == 3 and len({id(c) for c in candidate_loads}) == 3, loads
    # spares were started ahead, and none was waited for (the gate freezes
    # one still starting with the others, and waits until it is seen
    # stopped: test_a_freeze_waits_for_a_process_slow_to_stop_once_and_says_so)
    phases = [list(r["phases_s"]) for _, r in got]
    assert any("start_spare" in p for p in phases), phases
    assert not any("spare_ready" in p for p in phases), phases
    # each evaluation asked for the next spare before its candidate's load
    # was sent (as soon as its worker was taken), not after its load
    first = "load" if spare_ahead == "after_load" else "spare"
    assert by_slot and all(seq[0] == first and seq.count("spare") == seq.count("load")
                           for seq in by_slot.values()), by_slot


def test_a_worker_started_during_a_freeze_is_stopped_unless_the_freezing_thread_started_it():
    class Worker:
        ended, deadline = None, None

        def __init__(self):
            # (a supervisor's place, with the worker below it)
            self.proc = subprocess.Popen(["sh", "-c", "sleep 30 & wait"], start_new_session=True)

    f = freezer_mod.Freezer()
    workers = []
    try:
        f.freeze(keep=())
        mine = Worker()                       # a baseline replaced inside its own timed phase
        workers.append(mine)
        theirs = Worker()                     # another evaluation's, started meanwhile
        workers.append(theirs)
        for w in workers:
            deadline = time.monotonic() + 5
            while not freezer_mod.descendants(w.proc.pid) and time.monotonic() < deadline:
                time.sleep(0.01)
        f.track(mine)
        t = threading.Thread(target=f.track, args=(theirs,))
        t.start()
        t.join(10)
        state = lambda w: {freezer_mod._stat(p)[0] for p, _ in freezer_mod.descendants(w.proc.pid)}  # noqa: E731
        assert state(theirs) == {"T"} and "T" not in state(mine)
        f.thaw()
        assert "T" not in state(theirs)
    finally:
        for w in workers:
            os.killpg(w.proc.pid, signal.SIGKILL)
            w.proc.wait()


def test_a_supervisor_that_has_not_forked_its_worker_yet_is_frozen_too():
    """A worker started just before or during a freeze: its supervisor
    forks the worker later, so a walk of its children alone found nothing
    to stop and the worker's whole start ran in another's timed phase
    (review helper-15, checked on the real Freezer)."""
    class Worker:
        ended, deadline = None, None

        def __init__(self):
            # no child until its own work is done (as worker.py's supervisor)
            self.proc = subprocess.Popen(
                [sys.executable, "-c", "import subprocess, time; time.sleep(0.3); subprocess.run(['sleep', '30'])"],
                start_new_session=True)

    f = freezer_mod.Freezer()
    w = Worker()
    try:
        f.freeze(keep=())
        t = threading.Thread(target=f.track, args=(w,))
        t.start()
        t.join(10)
        time.sleep(0.8)  # past the supervisor's own sleep: it would have forked by now
        tree = {freezer_mod._stat(p)[0] for p, _ in freezer_mod.descendants(w.proc.pid)}
        assert freezer_mod._stat(w.proc.pid)[0] == "T" and tree <= {"T"}, tree
        f.thaw()
        deadline = time.monotonic() + 5
        while not freezer_mod.descendants(w.proc.pid) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert freezer_mod._stat(w.proc.pid)[0] != "T" and freezer_mod.descendants(w.proc.pid)
    finally:
        os.killpg(w.proc.pid, signal.SIGKILL)
        w.proc.wait()


def test_a_slot_times_the_baseline_it_saw_ready_and_leaves_a_newer_one_alone():
    from kreward.kernelbench.in_flight import Slot

    class B:
        def __init__(self):
            self.ended = False

        def end(self):
            self.ended = True

        def alive(self):
            return not self.ended

    class Shared:
        sandbox = "init"

        def __init__(self):
            self.baseline, self.baseline_facts, self.starts = None, {}, 0

        def start_baseline(self):
            if self.baseline is None or not self.baseline.alive():
                self.baseline, self.starts = B(), self.starts + 1

        def baseline_ready(self):
            self.baseline_facts = {"ready": True}

        def note_baseline(self, **facts):
            self.baseline_facts.update(facts)

        def end_baseline(self):
            self.baseline.end()
            self.baseline, self.baseline_facts = None, {}

    shared, lock = Shared(), threading.RLock()
    own = types.SimpleNamespace  # (a Processes: only its clock is read here)
    a, b = Slot(own(clock=None), shared, lock), Slot(own(clock=None), shared, lock)
    a.start_baseline()
    b.start_baseline()
    assert shared.starts == 1                        # one baseline for both slots
    assert a.baseline_ready() is None and a.baseline is shared.baseline
    first = a.baseline
    first.end()                                      # it died; b starts a new one
    b.start_baseline()
    assert shared.starts == 2 and a.baseline is first and shared.baseline is not first
    a.note_baseline(per_call_us=5.0)                 # facts of a dead worker: not the new one's
    assert "per_call_us" not in shared.baseline_facts
    held = threading.Event()
    release = threading.Event()
    t = threading.Thread(target=lambda: (lock.acquire(), held.set(), release.wait(10), lock.release()))
    t.start()
    held.wait(5)
    t0 = time.monotonic()
    a.end_baseline()                                 # no wait for the lock another holds
    assert time.monotonic() - t0 < 1 and not shared.baseline.ended
    release.set()
    t.join(5)


def test_a_timed_phase_on_a_gpu_that_was_not_idle_is_not_judged():
    """The probe's note (work a frozen process had queued still running)
    makes the evaluation the environment's error, never a number: a
    baseline slowed so would inflate the candidate's speedup (review
    helper-15)."""
    pytest.importorskip("torch", reason="kreward.kernelbench's evaluation needs torch")
    from kreward.kernelbench.evaluation import _idle_or_error
    _idle_or_error({"waited_s": 0.1}, "its timed batches")  # idle: nothing said
    with pytest.raises(RuntimeError, match="not idle for its baseline's timing"):
        _idle_or_error({"waited_s": 0.1, "probe": "3 probes over 300 us in 0.25 s"}, "its baseline's timing")


def test_a_slots_workers_take_the_runners_settings_as_they_are_now(tmp_path):
    pytest.importorskip("torch", reason="the ModelNew runner needs torch")
    from kreward.kernelbench.importer import import_problem
    from kreward.kernelbench.runner import Runner

    r = Runner(import_problem(_tiny_relu(tmp_path).path), "cpu", cache_dir=str(tmp_path))
    try:
        r.spare_ahead, r.spare, r.timeout_s = False, False, 77
        p = r.slot_processes()
        assert (p.spare_ahead, p.keep_spare, p.timeout_s) == (False, False, 77)
        r.spare_ahead = True
        assert r.slot_processes().spare_ahead is True
    finally:
        r.close()


def test_an_abort_ends_its_own_evaluations_workers_never_the_next_ones():
    """An abort reads its slot, then ends its workers; the evaluation may
    end meanwhile and give the slot back. The slot must not reach the next
    evaluation before the abort's close is over, or that close ends the
    next evaluation's workers."""
    import threading
    import time

    from kreward.kernelbench.in_flight import InFlightRunner

    class Own:
        def __init__(self):
            self.candidate, self.closing, self.closed_at = None, threading.Event(), None

        def close(self):
            self.closing.set()
            time.sleep(0.3)  # ending a worker tree takes a while
            self.closed_at = time.monotonic()

    class Runner:
        def __init__(self):
            self._processes = type("P", (), {"lock": threading.Lock()})()

        def slot_processes(self):
            return Own()

    class Gate:
        def holder(self):
            return None

        def bind_clock(self, clock):
            pass

    r = InFlightRunner(Runner(), Gate())
    slot = r._acquire("first")
    aborting = threading.Thread(target=r.abort, args=("first",))
    aborting.start()
    assert slot.own.closing.wait(5)
    r._release("first")  # the evaluation ended (its workers died) while the abort closes
    released_at = time.monotonic()
    assert slot.own.closed_at is not None and slot.own.closed_at <= released_at
    nxt = r._acquire("second")
    assert nxt is slot  # reused, but only after the first abort was over
    closed = slot.own.closed_at
    r.abort("first")   # a late abort of the finished one touches nothing
    assert slot.own.closed_at == closed
    aborting.join()
    r._release("second")


def test_every_wait_for_the_lane_is_kept_off_the_backstop_with_or_without_a_candidate_worker():
    """The scheduler's backstop does not count an evaluation's lost time
    (lost_s). Waits that pause no candidate worker count too: the wait for
    its baseline's exclusive phase (its candidate already ended) and for
    the baseline's lock another evaluation holds."""
    import threading
    import time

    from kreward.kernelbench.gate import Gate
    from kreward.kernelbench.in_flight import InFlightRunner

    class Shared:
        lock = threading.Lock()
        baseline = None

        def baseline_ready(self):
            return "no baseline here"

    class Runner:
        def __init__(self):
            self._processes = Shared()

        def slot_processes(self):
            return type("Own", (), {"candidate": None, "clock": None})()

    gate = Gate()
    r = InFlightRunner(Runner(), gate)
    other_in, other_out, waiting = threading.Event(), threading.Event(), threading.Event()

    def other():  # another evaluation's exclusive phase
        gate.enter_exclusive()
        other_in.set()
        other_out.wait(10)
        gate.leave_exclusive()
    t = threading.Thread(target=other)
    t.start()
    assert other_in.wait(5)
    got = {}

    def mine():
        slot = r._acquire("mine")
        try:
            t0 = time.monotonic()
            waiting.set()
            gate.enter_exclusive(keep=())  # its baseline's phase: no candidate worker in keep
            got["gate_wait"] = time.monotonic() - t0
            gate.leave_exclusive()
            got["after_gate"] = r.lost_s("mine")
            held = threading.Event()

            def holder():  # another evaluation holds the baseline's lock a while
                with r.baseline_lock:
                    held.set()
                    time.sleep(0.3)
            h = threading.Thread(target=holder)
            h.start()
            held.wait(5)
            t0 = time.monotonic()
            slot.baseline_ready()  # waits for the lock: the lane's time
            got["lock_wait"] = time.monotonic() - t0
            got["after_lock"] = r.lost_s("mine")
            h.join(5)
        finally:
            r._release("mine")
    m = threading.Thread(target=mine)
    m.start()
    assert waiting.wait(5)
    time.sleep(0.3)
    assert r.lost_s("mine") > 0.2  # counted while it waits, not only after
    other_out.set()
    m.join(10)
    t.join(10)
    assert got["gate_wait"] > 0.25 and got["after_gate"] >= 0.95 * got["gate_wait"] - 0.01
    assert got["lock_wait"] > 0.1
    assert got["after_lock"] - got["after_gate"] >= 0.95 * got["lock_wait"] - 0.01


def test_a_wait_with_the_candidate_worker_paused_too_counts_once():
    import time
    import types

    from kreward.kernelbench.freezer import lost_seconds, pause, resume

    clock = types.SimpleNamespace()
    worker = types.SimpleNamespace(clock=clock, deadline=100.0)
    t0 = time.monotonic()
    pause(worker)
    pause(clock)   # the thread's own wait, the same moment
    time.sleep(0.2)
    resume(clock)
    resume(worker)
    first = time.monotonic() - t0
    assert 0.19 <= lost_seconds(clock) <= first and 0.19 <= lost_seconds(worker) <= first
    assert worker.deadline >= 100.19  # the candidate's limit moved by the wait
    # the worker frozen alone (another evaluation's phase): its evaluation's clock too
    t0 = time.monotonic()
    pause(worker)
    time.sleep(0.2)
    resume(worker)
    second = time.monotonic() - t0
    assert 0.39 <= lost_seconds(clock) <= first + second


def test_a_clock_given_to_a_paused_worker_is_neither_resumed_nor_counted():
    """A worker can be frozen before its evaluation gives it a clock (its
    load is under way); the freeze's end must end what it started, and
    leave the new clock alone (resumed unpaused, a clock would count
    forever: the backstop would never fire)."""
    import types

    from kreward.kernelbench.freezer import lost_seconds, pause, resume

    worker = types.SimpleNamespace()
    pause(worker)
    clock = worker.clock = types.SimpleNamespace()
    resume(worker)
    assert getattr(clock, "lost_depth", 0) == 0 and lost_seconds(clock) == 0.0
    pause(worker)  # paused again: now with its clock
    resume(worker)
    assert clock.lost_depth == 0 and lost_seconds(clock) >= 0.0
    resume(worker)  # one resume too many changes nothing
    assert worker.lost_depth == 0 and clock.lost_depth == 0


def test_a_scheduler_runs_as_many_per_lane_as_its_lanes_take_and_never_more():
    """Scheduler(in_flight=None) takes its lanes' own in_flight; lanes that
    disagree, or more threads than a lane's gate was made for (two
    candidates timed on one GPU at once), are refused."""
    class Declared:
        def __init__(self, k):
            self.in_flight = k

        def close(self):
            pass

    with Scheduler({"cuda:0": Declared(3)}) as s:
        assert s.in_flight == 3
    with Scheduler({"cuda:0": Declared(3)}, in_flight=2) as s:
        assert s.in_flight == 2  # fewer threads than the gate allows: fine
    with pytest.raises(ValueError, match="different numbers"):
        Scheduler({"cuda:0": Declared(1), "cuda:1": Declared(4)})
    with pytest.raises(ValueError, match="more than these lanes take"):
        Scheduler({"cuda:0": Declared(1)}, in_flight=4)
    with Scheduler({"cuda:0": RetiringLane()}) as s:
        assert s.in_flight == 1  # a lane that says nothing takes one


class QuietLane:
    """A fake lane's other duties: nothing to abort or close, always healthy."""

    def abort(self, token=None):
        pass

    def healthy(self):
        return True

    def close(self):
        pass


class CrowdedLane(QuietLane):
    """In flight without a GPU: "victim" runs out of memory when another
    evaluation ran beside it, "liar" always says it ran out of memory,
    "error" says the GPU was not idle when it had company; every other
    source passes. Records each run: (token, source, whether anything ran
    beside it at any moment)."""

    def __init__(self, run_s=0.05):
        self.run_s, self.lock = run_s, threading.Lock()
        self.running, self.runs = {}, []   # token -> crowded so far; finished runs

    def evaluate(self, problem, source, next_source=None, options=None, token=None):
        with self.lock:
            for t in self.running:
                self.running[t] = True
            self.running[token] = bool(self.running)
        try:
            time.sleep(self.run_s)
        finally:
            with self.lock:
                crowded = self.running.pop(token)
                self.runs.append((token, source, crowded))
        if source == "liar" or (source == "victim" and crowded):
            return {"verdict": "crash", "feedback": "torch.OutOfMemoryError: CUDA out of memory."}
        if source == "error" and crowded:
            return {"verdict": "error", "feedback": "the GPU was not idle for the timed batches"}
        return {"verdict": "pass", "token": token}


def test_a_candidate_its_neighbours_may_have_failed_runs_again_alone_and_that_stands():
    """In flight, an out-of-memory crash or a GPU that was not idle may be a
    neighbour's doing: the candidate runs once more on its lane with nothing
    beside it (the lane drains first), and that result stands: the victims
    pass, the one that always claims it is judged crash after at most one
    run alone, and nothing runs a third time."""
    lane = CrowdedLane()
    sources = ["victim", "pass", "pass", "liar", "error", "pass", "victim", "pass"]
    with Scheduler({"cuda:0": lane}, in_flight=3) as s:
        problems = [Problem(f"p{i}") for i in range(8)]
        tickets = [s.submit(problems[i], src) for i, src in enumerate(sources)]
        got = dict(_collect(s))
        counters = dict(s.counters)
    verdicts = [got[t]["verdict"] for t in tickets]
    assert verdicts == ["pass", "pass", "pass", "crash", "pass", "pass", "pass", "pass"], verdicts
    assert "out of memory" in got[tickets[3]]["feedback"]
    by_token = collections.defaultdict(list)
    for token, _, crowded in lane.runs:
        by_token[token].append(crowded)
    again = {t: r for t, r in by_token.items() if len(r) > 1}
    # the first three start together: the first victim ran beside others
    assert tickets[0] in again and counters["alone_reruns"] == len(again), (counters, by_token)
    # run again only after a crowded first run, then alone, and never a third time
    assert all(r == [True, False] for r in again.values()), again
    assert all(sources[tickets.index(t)] != "pass" for t in again)


def test_one_at_a_time_nothing_is_run_again():
    """in_flight 1: no neighbour, so an out-of-memory crash is the candidate's own."""
    lane = CrowdedLane()
    with Scheduler({"cuda:0": lane}, in_flight=1) as s:
        t = s.submit(Problem("p0"), "liar")
        assert s.wait(t, 30)["verdict"] == "crash"
        assert s.counters["alone_reruns"] == 0


# ---- a lane's cap on spare workers (in_flight.LaneSpares, max_spares)

class _Spawned:
    """A spare's process in the cap's unit tests: alive until ended, and
    enough of the protocol for a candidate to take it (start_candidate)."""

    def __init__(self, live):
        self.ended, self.started_by = None, "fake"
        self.build_env = ({}, [])
        live.append(self)

    def alive(self):
        return self.ended is None

    def end(self, timeout_s=None):
        self.ended = self.ended or {"clean": True, "strays": 0, "why": None}
        return self.ended

    def limit_until(self, deadline, why):
        pass

    def send(self, obj, timeout_s=None):
        pass

    def receive_ready(self, timeout_s):
        return {"ok": True}

    def receive(self, timeout_s):
        return [{"ok": True, "launch_us": 1.0}]

    def request(self, obj, timeout_s):
        return self.receive(timeout_s)[0], b""


def _spare_lane(tmp_path, monkeypatch, cap, region=None):
    """A lane's LaneSpares, the live fake processes, and a maker of its
    problems' InFlightRunners (real Processes and Slots, fake workers).
    region: the fake workers' input region's size (None: they have none,
    so no slot's spare fits another's: Processes.spare_fits); a Runner
    made with region_bytes=n asks that much of its workers."""
    pytest.importorskip("torch", reason="kreward.kernelbench.processes needs torch")
    from kreward.kernelbench.in_flight import InFlightRunner, LaneSpares
    from kreward.kernelbench.processes import Processes

    live = []

    def spawn(self, source=None, ext=None, **kw):
        w = _Spawned(live)
        w.region, w.shared = (None if region is None else bytearray(region)), None
        return w
    monkeypatch.setattr(Processes, "_spawn", spawn)

    def processes(region_bytes):
        return Processes(device="cpu", sandbox="init", staging="auto", cache_dir=str(tmp_path), ref_source="",
                         problem={}, inputs_from="caller", staged=False, region_bytes=region_bytes,
                         max_call_bytes=1, spare=True, compile_baseline=False, timeout_s=5, zygote=False)

    class Runner:
        def __init__(self, region_bytes=0):
            self.region_bytes = region_bytes
            self._processes = processes(region_bytes)

        def slot_processes(self):
            return processes(self.region_bytes)

        def close(self):
            self._processes.close()

    spares = LaneSpares(cap)
    return spares, live, lambda region_bytes=0: InFlightRunner(Runner(region_bytes), Gate(), spares)


def _alive(live):
    return sum(w.alive() for w in live)


def test_a_lanes_spares_stay_under_its_cap_and_go_to_the_slots_in_use(tmp_path, monkeypatch):
    spares, live, new_runner = _spare_lane(tmp_path, monkeypatch, cap=2)
    p, q = new_runner(), new_runner()
    # problem p: two candidates in flight, each slot left with its spare
    a, b = p._acquire("a"), p._acquire("b")
    a.start_spare(ahead=True)
    b.start_spare(ahead=True)
    p._release("a")
    p._release("b")
    assert _alive(live) == 2 and spares.held() == 2
    # problem q's candidates now: each spare ends an idle one of p's for its place
    c, d = q._acquire("c"), q._acquire("d")
    c.start_spare(ahead=True)
    assert c.spare is not None and _alive(live) == 2 and [a.spare, b.spare].count(None) == 1
    d.start_spare(ahead=True)
    assert d.spare is not None and a.spare is None and b.spare is None
    assert _alive(live) == 2 and spares.counters["reclaimed"] == 2
    # a third in flight finds no idle one: it gets none, and the slots in
    # use keep theirs (each is its evaluation's)
    e = q._acquire("e")
    e.start_spare(ahead=True)
    assert e.spare is None and c.spare.alive() and d.spare.alive()
    assert _alive(live) == 2 and spares.counters["refused"] == 1
    # taken by its slot's next candidate, a spare frees its place (the
    # candidate workers are bounded by in_flight)
    q._release("c")
    assert q._acquire("c2") is c
    w, loaded = c.start_candidate("class ModelNew: pass", "ModelNew")
    assert loaded["started_ahead"] and w.alive() and spares.held() == 1
    e.start_spare(ahead=True)
    assert e.spare is not None and spares.held() == 2
    # ended, a spare frees its place too; closing ends the rest
    d.end_spare()
    assert spares.held() == 1 and _alive(live) == 2   # e's spare and c2's candidate
    for runner, tokens in ((q, ("c2", "d", "e")), (p, ())):
        for t in tokens:
            runner._release(t)
        runner.close()
    assert spares.held() == 0 and _alive(live) == 0


def test_another_problems_idle_spare_goes_to_a_slot_without_one_instead_of_a_new_start(tmp_path, monkeypatch):
    """LaneSpares.hand_over: a lane going on to its next problem takes the
    spares the last problem's idle slots hold (started for no source: the
    problem comes with load), for a candidate with none and for a spare
    asked for while every place is held, where they fit; a slot in use
    keeps its own, and one whose workers get less (a smaller input region)
    is not given to a problem that needs more."""
    spares, live, new_runner = _spare_lane(tmp_path, monkeypatch, cap=2, region=1 << 20)
    p, q = new_runner(), new_runner(region_bytes=1 << 20)
    a, b = p._acquire("a"), p._acquire("b")
    a.start_spare(ahead=True)
    b.start_spare(ahead=True)
    held = {a.spare, b.spare}
    p._release("a")
    # b is still in use: q's first candidate gets a's idle spare, no new process
    c = q._acquire("c")
    w, loaded = c.start_candidate("class ModelNew: pass", "ModelNew")
    assert loaded["started_ahead"] and w in held and w.alive() and len(live) == 2
    assert a.spare is None and b.spare is not None and spares.counters["handed_over"] == 1
    assert spares.held() == 1  # taken by a candidate, its place given back
    # its launch time measured again before its load (its ready ran beside other work)
    assert loaded["launch_us"] == 1.0
    p._release("b")
    # a place is free: a spare asked for ahead starts, b's idle one stays b's
    c.start_spare(ahead=True)
    assert len(live) == 3 and b.spare is not None and spares.held() == 2
    # every place held: the next one asked for is b's idle spare, handed over, none ended
    d = q._acquire("d")
    d.start_spare(ahead=True)
    assert d.spare in held and b.spare is None and len(live) == 3 and _alive(live) == 3
    assert spares.counters["handed_over"] == 2 and not spares.counters.get("reclaimed")
    assert d.spare.lane_place.holder is d.own  # its place is d's now (reclaim, give back)
    # a problem whose workers need a larger region than p's spares have takes none of them
    q._release("c")
    q._release("d")
    p2 = p._acquire("a2")
    p2.start_spare(ahead=True)  # (the lane full: one of q's idle spares)
    assert p2.spare is not None and spares.counters["handed_over"] == 3 and len(live) == 3
    p._release("a2")
    big = new_runner(region_bytes=2 << 20)
    e = big._acquire("e")
    w, loaded = e.start_candidate("class ModelNew: pass", "ModelNew")
    assert not loaded["started_ahead"] and p2.spare is not None and spares.counters["handed_over"] == 3
    big._release("e")
    for runner in (p, q, big):
        runner.close()
    assert _alive(live) == 0 and spares.held() == 0


def test_a_spare_is_handed_over_only_where_it_can_serve(tmp_path, monkeypatch):
    """helper-42: in the "start" sandbox a fresh folder's spare cannot take a
    source with a folder of its own (one that builds, or was built): handed
    to it, it was waited for and ended unused. Nor does a spare without a
    device buffer go to a slot whose workers get one (its candidate would
    stage through the host), nor any to a slot that keeps no spares."""
    spares, live, new_runner = _spare_lane(tmp_path, monkeypatch, cap=2, region=1 << 20)  # (skips without torch)
    from kreward.kernelbench.processes import Processes
    p, q = new_runner(), new_runner()
    a = p._acquire("a")
    a.start_spare(ahead=True)
    p._release("a")
    given = a.own.spare
    c = q._acquire("c")
    for own in (a.own, c.own):
        own.sandbox = "start"
    a.own.spare_folder = str(tmp_path / "fresh")
    monkeypatch.setattr(Processes, "_needs_own_folder", lambda self, source: source == "BUILDS")
    assert not spares.hand_over(c.own, "BUILDS") and a.own.spare is given
    # staged workers that get a device buffer: one without is not handed over
    for own in (a.own, c.own):
        own.staged = True
    assert given.shared is None and c.own.ipc_why is None
    assert not spares.hand_over(c.own, "NEW") and a.own.spare is given
    for own in (a.own, c.own):
        own.ipc_why = "asked for"  # (staging "host": no device buffer for anyone)
    # a slot that keeps no spares takes none at its start
    c.own.keep_spare = False
    monkeypatch.setattr(Processes, "_spawn_for", lambda self, source, limit: (_Spawned(live), None))
    w, loaded = c.start_candidate("NEW", "ModelNew")
    assert w is not given and a.own.spare is given and not loaded["started_ahead"]
    c.own.keep_spare = True
    assert spares.hand_over(c.own, "NEW") and c.own.spare is given and a.own.spare is None
    assert c.own.spare_folder == str(tmp_path / "fresh")
    q._release("c")
    p.close()
    q.close()


def test_no_spare_without_a_place_and_a_failed_start_gives_its_place_back(tmp_path, monkeypatch):
    spares, live, new_runner = _spare_lane(tmp_path, monkeypatch, cap=0)
    r = new_runner()
    s = r._acquire("a")
    s.start_spare()
    assert s.spare is None and live == [] and spares.counters["refused"] == 1
    spares.cap = 1
    from kreward.kernelbench.processes import Processes

    def no_process(self, source=None, ext=None):
        raise OSError("no process now")
    monkeypatch.setattr(Processes, "_spawn", no_process)
    with pytest.raises(OSError):
        s.start_spare()
    assert spares.held() == 0   # not kept by a spare that never started
    r._release("a")
    r.close()


def _relu_problems(tmp_path, n):
    """n small KernelBench ReLU problems, each a key of its own (sizes differ)."""
    from kreward.problems import KernelBenchProblem
    text = (KB / "level1" / "01_relu.py").read_text()
    out = []
    for i in range(n):
        f = tmp_path / f"relu_{i}.py"
        f.write_text(text.replace("batch_size = 4096", f"batch_size = {16 + i}").replace("dim = 4096", "dim = 256"))
        out.append(KernelBenchProblem(str(f)))
    return out


def _count_workers(monkeypatch):
    """Counts the ModelNew worker processes alive at once: one counts from
    before its start until its end() is over (its processes reaped), so
    the peak can only be over, never under, the true one."""
    from kreward.kernelbench import processes

    lock, live, seen = threading.Lock(), set(), {"peak": 0, "started": 0}

    class Counted(processes.WorkerProcess):
        def __init__(self, *args, **kw):
            with lock:
                live.add(id(self))
                seen["peak"], seen["started"] = max(seen["peak"], len(live)), seen["started"] + 1
            try:
                super().__init__(*args, **kw)
            except BaseException:
                with lock:
                    live.discard(id(self))
                raise

        def end(self, *args, **kw):
            try:
                return super().end(*args, **kw)
            finally:
                with lock:
                    live.discard(id(self))

    monkeypatch.setattr(processes, "WorkerProcess", Counted)
    return live, seen


GOOD = "import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return x.clamp_min(0)\n"
WRONG = "import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return x.abs()\n"


# a cap of 1 (tight), the default (in_flight, one per evaluation in flight;
# "init": a spare starts as its slot's evaluation ends, so the next one
# there takes it), and 99: no cap in effect (a spare per slot, as before),
# which must go over the default's bound: the count can see a lane over it
@pytest.mark.parametrize("sandbox, max_spares", [("start", 1), ("init", None), ("start", 99)])
def test_a_lane_with_four_in_flight_keeps_its_workers_under_the_cap(tmp_path, monkeypatch, sandbox, max_spares):
    pytest.importorskip("torch", reason="the ModelNew runner needs torch")
    from kreward.kernelbench.lanes import RunnerLane

    live, seen = _count_workers(monkeypatch)
    if max_spares == 99:
        # (and no spare handed between problems: a slot per problem and
        # evaluation in flight, each with its spare, as before the cap)
        from kreward.kernelbench.in_flight import LaneSpares
        monkeypatch.setattr(LaneSpares, "hand_over", lambda self, taker, source=None: False)
    k, problems = 4, _relu_problems(tmp_path, 2)
    lane = RunnerLane("cpu", {"cache_dir": str(tmp_path), "timeout_s": 120, "call_timeout_s": 60,
                              "sandbox": sandbox}, in_flight=k, max_spares=max_spares)
    cap = lane.spares.cap
    assert cap == (k if max_spares is None else max_spares)
    # eight new candidates per problem (twice the lane's K: a slot's
    # next candidate can take its spare), one of four wrong
    sources = [[src + f"# {n} {i}\n" for i, src in enumerate([GOOD, WRONG, GOOD, GOOD] * 2)]
               for n in range(len(problems))]
    opts = {"seed": 3, "batches": 2, "calls": 4, "checks": 1}
    try:
        with Scheduler({"cpu": lane}, in_flight=k) as s:
            tickets = [s.submit(p, src, opts) for p, mine in zip(problems, sources) for src in mine]
            got = _collect(s, timeout=600)
    finally:
        lane.close()
    assert [t for t, _ in got] == tickets
    assert [r["verdict"] for _, r in got] == ["pass", "wrong", "pass", "pass"] * 4, \
        [r.get("feedback") for _, r in got]
    # a baseline per problem, a candidate per evaluation in flight, the spares
    bound = len(problems) + k + cap
    counters = dict(lane.spares.counters)
    if max_spares == 99:
        assert seen["peak"] > len(problems) + 2 * k, seen
    else:
        assert seen["peak"] <= bound, (seen, bound)
    if max_spares is None:
        # every slot in use that asked for a spare got one (the other
        # problem's idle ones handed over: LaneSpares.hand_over), and
        # candidates took them
        assert counters.get("refused", 0) == 0 and counters["handed_over"] > 0, counters
        assert any(r["started_ahead"] for _, r in got)
    assert not live and lane.spares.held() == 0  # every worker ended with the lane


def test_max_spares_reaches_the_lanes_from_the_front_doors():
    pytest.importorskip("torch", reason="the ModelNew scheduler needs torch")
    from kreward.kernelbench.lanes import make_scheduler
    from kreward.serve.__main__ import kernelbench_options, parser

    def caps(options):
        with make_scheduler(dict(options, builds=False)) as s:
            return [None if lane.spares is None else lane.spares.cap for lane in s._lanes.values()]
    args = ["--kernelbench-devices", "cpu", "--kernelbench-in-flight", "3", "--kernelbench-max-spares", "1"]
    assert caps(kernelbench_options(parser().parse_args(args))) == [1]
    assert caps({"devices": ["cpu"], "in_flight": 3}) == [3]   # the default: in_flight
    assert caps({"devices": ["cpu"]}) == [None]                # one at a time: a spare per Runner, as ever
    for options, want in (({}, True), ({"prepare_ahead": False}, False)):
        with make_scheduler(dict(options, devices=["cpu"], in_flight=2, builds=False)) as s:
            assert s.prepare_ahead is want
    with pytest.raises(ValueError, match="prepare_ahead"):
        make_scheduler({"devices": ["cpu"], "in_flight": 2, "builds": False, "prepare_ahead": "false"})
    for options, want in (({}, 30.0), ({"affinity_s": 0}, 0.0), ({"affinity_s": 2.5}, 2.5)):
        with make_scheduler(dict(options, devices=["cpu"], builds=False)) as s:
            assert s.affinity_s == want
    for bad in ("30", -1, True, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="affinity_s"):
            make_scheduler({"devices": ["cpu"], "builds": False, "affinity_s": bad})


class PreparingLane(QuietLane):
    """In flight without a GPU: each evaluation takes run_s; prepare_ahead
    records the problem it was asked for and which problems were running
    on the lane at that moment."""

    def __init__(self, run_s=0.1):
        self.run_s, self.lock = run_s, threading.Lock()
        self.running, self.asked = collections.Counter(), []

    def evaluate(self, problem, source, next_source=None, options=None, token=None):
        with self.lock:
            self.running[problem.key] += 1
        try:
            time.sleep(self.run_s)
        finally:
            with self.lock:
                self.running[problem.key] -= 1
        return {"verdict": "pass"}

    def prepare_ahead(self, problem):
        with self.lock:
            self.asked.append((problem.key, {k for k, n in self.running.items() if n}))
        return True


def test_in_flight_a_queued_problems_baseline_is_prepared_ahead_once():
    """A GRPO step's batch, interleaved (every problem's k-th candidate
    before any k+1-th), two in flight: the lane's threads keep to the
    problem it ran last while it has queued candidates (affinity), and the
    lane is asked to prepare the problems queued behind it, each once,
    never one whose candidate runs there nor the first (it ran at once);
    one at a time, or with prepare_ahead off, nothing is asked."""
    class P:
        def __init__(self, key):
            self.key = key
    problems = [P(k) for k in "ABCDEF"]
    lane = PreparingLane()
    with Scheduler({"cpu": lane}, in_flight=2) as s:
        for _ in range(3):
            for p in problems:
                s.submit(p, "src")
        got = _collect(s, timeout=60)
        prepared = s.counters["prepared_ahead"]
    assert len(got) == 18 and all(r["verdict"] == "pass" for _, r in got)
    keys = [k for k, _ in lane.asked]
    assert keys and len(keys) == len(set(keys)), lane.asked  # each asked once
    assert "A" not in keys, lane.asked  # the first ran at once: never asked
    assert {"B", "C", "D"} <= set(keys), lane.asked  # queued behind it: asked while it ran
    assert all(k not in running for k, running in lane.asked), lane.asked
    assert prepared == len(keys)
    one = PreparingLane(run_s=0.01)
    with Scheduler({"cpu": one}, in_flight=1) as s:
        for p in problems:
            s.submit(p, "src")
        _collect(s, timeout=60)
    assert one.asked == []
    off = PreparingLane(run_s=0.05)
    with Scheduler({"cpu": off}, in_flight=2, prepare_ahead=False) as s:
        for p in problems:
            s.submit(p, "src")
        _collect(s, timeout=60)
    assert off.asked == []  # turned off (its gain measured against it)


def test_a_baseline_prepared_ahead_is_the_one_its_first_candidate_is_timed_against(tmp_path):
    """RunnerLane.prepare_ahead (in flight) makes the problem's Runner and
    starts its baseline's worker; the problem's first candidate finds that
    worker and is timed against it. Nothing is made twice, nor past
    keep_warm, nor one at a time."""
    pytest.importorskip("torch", reason="the ModelNew runner needs torch")
    from kreward.kernelbench.lanes import RunnerLane
    problem = _tiny_relu(tmp_path)
    opts = {"cache_dir": str(tmp_path), "timeout_s": 120, "call_timeout_s": 30, "spare": False}
    assert RunnerLane("cpu", opts, in_flight=1).prepare_ahead(problem) is False
    lane = RunnerLane("cpu", opts, in_flight=2, keep_warm=1)
    try:
        assert lane.prepare_ahead(problem) is True
        runner = lane._runners[problem.key]
        baseline = runner.runner._processes.baseline
        assert baseline is not None and baseline.alive()
        assert lane.prepare_ahead(problem) is False  # made already
        from kreward.problems import KernelBenchProblem
        (tmp_path / "other.py").write_text((tmp_path / "relu_small.py").read_text()
                                           .replace("dim = 256", "dim = 128"))
        other = KernelBenchProblem(str(tmp_path / "other.py"))
        assert other.key != problem.key
        assert lane.prepare_ahead(other) is False  # keep_warm 1: no room without ending another's
        assert list(lane._runners) == [problem.key]
        good = ("import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n"
                "        return x.clamp_min(0)\n")
        res = lane.evaluate(problem, good, options={"seed": 3, "batches": 3, "calls": 4, "checks": 2},
                            token="t1")
        assert res["verdict"] == "pass" and res["baseline_us"] > 0, res.get("feedback")
        assert lane._runners[problem.key] is runner
        assert runner.runner._processes.baseline is baseline  # the one started ahead, timed
    finally:
        lane.close()


def test_nothing_is_prepared_ahead_beside_a_candidate_run_again_alone():
    """A candidate whose crash a neighbour may have caused runs again with
    nothing beside it: a preparation ahead (a worker's start) neither
    starts while it runs nor is still running when it starts (helper-38
    showed one running beside it)."""
    class P:
        def __init__(self, key):
            self.key = key

    class Lane(PreparingLane):
        def __init__(self):
            super().__init__(run_s=0.3)
            self.alone_running, self.overlaps, self.calls = False, [], collections.Counter()

        def evaluate(self, problem, source, next_source=None, options=None, token=None):
            with self.lock:
                self.calls[source] += 1
                n = self.calls[source]
            if source == "oom" and n == 1:
                time.sleep(0.2)
                return {"verdict": "crash", "feedback": "torch.OutOfMemoryError: CUDA out of memory."}
            if source == "oom":  # the run alone
                with self.lock:
                    self.alone_running = True
                    if self.preparing:
                        self.overlaps.append("a preparation was running when it started")
                time.sleep(0.5)
                with self.lock:
                    self.alone_running = False
                return {"verdict": "pass"}
            return super().evaluate(problem, source, next_source, options, token)

        def prepare_ahead(self, problem):
            with self.lock:
                self.asked.append((problem.key, set()))
                self.preparing = True
                if self.alone_running:
                    self.overlaps.append(f"{problem.key} asked while it ran alone")
            time.sleep(0.4)  # a baseline's start
            with self.lock:
                self.preparing = False
                if self.alone_running:
                    self.overlaps.append(f"{problem.key} still preparing while it ran alone")
            return True

    lane = Lane()
    lane.preparing = False
    with Scheduler({"cpu": lane}, in_flight=2, affinity_s=0.0) as s:
        s.submit(P("A"), "oom")
        s.submit(P("A"), "a2")
        for k in "BCDEFG":
            s.submit(P(k), "x" + k)
        got = _collect(s, timeout=60)
        assert s.counters["alone_reruns"] == 1
    assert len(got) == 8 and all(r["verdict"] == "pass" for _, r in got), got
    assert lane.asked, "nothing was prepared: the test shows nothing"
    assert lane.overlaps == []


def test_a_candidate_gets_the_idle_slot_whose_spare_was_started_for_it(tmp_path, monkeypatch):
    """Several idle slots of a problem, each perhaps with a spare: the
    candidate takes the one whose spare was started for its source, else a
    fresh folder's spare, else one with no spare (a spare stays for its
    own candidate), and only then one whose spare is another source's
    (ending it). Before, the last released slot was taken whatever its
    spare: in the GRPO batch at four in flight most candidates started
    cold beside a spare started for them (an H100, b0dfbc0)."""
    spares, live, new_runner = _spare_lane(tmp_path, monkeypatch, cap=8)
    r = new_runner()
    slots = {t: r._acquire(t) for t in ("mine", "fresh", "none", "other")}
    for t, slot in slots.items():
        slot.own.sandbox = "start"
    for t, source, folder in (("mine", "src-A", "f1"), ("fresh", None, "f2"), ("other", "src-B", "f3")):
        slots[t].own.spare = _Spawned(live)
        slots[t].own.spare_source, slots[t].own.spare_folder = source, folder
    for t in ("mine", "fresh", "other", "none"):  # "none" released last: it was the one taken before
        r._release(t)
    assert r._acquire("x1", "src-A") is slots["mine"]
    assert r._acquire("x2", "src-C") is slots["fresh"]
    assert r._acquire("x3", "src-C") is slots["none"]
    assert r._acquire("x4", "src-C") is slots["other"]
    assert r._acquire("x5", "src-C") is not None  # a new slot once none is idle
    # a source that needs its own folder (one that builds) passes over a
    # fresh folder's spare, which could not take it
    for t in ("x2", "x3"):
        r._release(t)
    builds = "from torch.utils.cpp_extension import load_inline\nmod = load_inline(name='m', cpp_sources='')\n"
    assert r._acquire("x6", builds) is slots["none"]
    r._release("x6")
    # "init": any spare takes any source
    for t in ("x1", "x2", "x3", "x4", "x5"):
        r._release(t)
    init = r._acquire("y1")
    init.own.sandbox, init.own.spare, init.own.spare_source = "init", _Spawned(live), "src-B"
    r._release("y1")
    assert r._acquire("y2", "src-Z") is init
    for w in live:
        w.end()


def test_a_freeze_waits_for_a_process_slow_to_stop_once_and_says_so(monkeypatch):
    """helper-40/41: a process with a thread inside a long driver call (a
    worker still starting) stops only when the call returns; the freeze
    waits until every thread of every process it stopped is seen stopped
    (SETTLE_S at most), so no timed phase starts beside one. A worker whose
    tree outlasts SETTLE_S is counted (the gate's facts say not_stopped)
    and not waited for again, whatever processes it makes later: a
    candidate keeping processes in an uninterruptible wait does not cost
    every later timed phase."""
    class Worker:
        ended, deadline = None, 10.0

    procs = [subprocess.Popen(["sh", "-c", "sleep 30 & wait"], start_new_session=True) for _ in range(2)]
    slow_until = {}
    real = freezer_mod._all_threads_stopped

    def all_stopped(pid):  # a thread that reads as running for a while after the SIGSTOP
        if pid in slow_until and time.monotonic() < slow_until[pid]:
            return False
        return real(pid)
    monkeypatch.setattr(freezer_mod, "_all_threads_stopped", all_stopped)
    monkeypatch.setattr(freezer_mod, "SETTLE_S", 1.5)
    workers = []  # (held here: the freezer keeps its workers weakly)
    try:
        deadline = time.monotonic() + 5
        while not all(freezer_mod.descendants(p.pid) for p in procs) and time.monotonic() < deadline:
            time.sleep(0.01)
        late, stuck = (freezer_mod.descendants(p.pid)[0][0] for p in procs)
        f = freezer_mod.Freezer()
        for p in procs:
            workers.append(Worker())
            workers[-1].proc = p
            f.track(workers[-1])
        # late: past the freeze's own STOP_WAIT_S, within SETTLE_S
        slow_until.update({late: time.monotonic() + 0.8, stuck: time.monotonic() + 3600})
        t0 = time.monotonic()
        assert f.freeze() == 2
        waited = time.monotonic() - t0
        assert 1.4 <= waited < 3.0, waited                  # waited for both: late got there, stuck did not
        assert f.unsettled == 1 and freezer_mod._stat(late)[0] == "T"
        f.thaw()
        slow_until[late] = time.monotonic() + 0.8            # slow again: waited for again
        t0 = time.monotonic()
        f.freeze()
        assert 0.7 <= time.monotonic() - t0 < 1.4 and f.unsettled == 1  # stuck's tree not waited for
        f.thaw()
        gate = Gate(freezer=f)
        facts = gate.enter_exclusive()
        gate.leave_exclusive()
        assert facts.get("not_stopped") == 1, facts
    finally:
        for p in procs:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
