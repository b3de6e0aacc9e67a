"""The next candidate's worker started while the one before runs (issue 31),
on the CPU: started once the candidate is loaded, its start over (its ready
read) before the candidate's first timed batch and nothing asked of it
after that until its own candidate comes; that ready read once; a spare that
fails to start never the candidate's outcome; spare_ahead=False starting it
once the candidate is done, spare=False starting none. The order is read
from every request and reply of every worker (a log around WorkerProcess's
send and receive)."""
import os
import pathlib

import pytest

pytest.importorskip("torch", reason="the ModelNew runner needs torch")

from kreward.kernelbench import folders, import_problem  # noqa: E402
from kreward.kernelbench.processes import Processes  # noqa: E402
from kreward.kernelbench.runner import Runner  # noqa: E402
from kreward.kernelbench.worker_process import WorkerDied, WorkerProcess, WorkerTimeout  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[4]
KB = ROOT / "examples" / "kernelbench"
HONEST = "import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return x.clamp_min(0)\n"
OTHER = HONEST.replace("clamp_min(0)", "relu()")
WRONG = HONEST.replace("clamp_min(0)", "clamp_min(0) + 1")
KW = {"seed": 3, "verify_seeds": 1, "batches": 2, "calls": 2, "checks": 1, "baseline": False}


@pytest.fixture(scope="module")
def relu():
    return import_problem(str(KB / "level1" / "01_relu.py"))


def runner(relu, tmp_path, **kw):
    return Runner(relu, "cpu", cache_dir=str(tmp_path / "cache"), timeout_s=120, call_timeout_s=30, **kw)


@pytest.fixture
def log(monkeypatch):
    """Every request and reply of every worker, in order:
    (what, the worker's supervisor pid, op, class_name of a load)."""
    events = []
    send, receive, timed = WorkerProcess.send, WorkerProcess.receive, WorkerProcess.request_timed

    def logged_send(self, obj, *a, **k):
        out = send(self, obj, *a, **k)
        events.append(("send", self.proc.pid, obj["op"], obj.get("class_name")))
        return out

    def logged_timed(self, obj, *a, **k):  # (a timed batch's go: written by libkreward, not send)
        events.append(("send", self.proc.pid, obj["op"], None))
        return timed(self, obj, *a, **k)

    def logged_receive(self, *a, **k):
        op = self._asked[0][0] if self._asked else None
        out = receive(self, *a, **k)
        events.append(("receive", self.proc.pid, op, None))
        return out

    monkeypatch.setattr(WorkerProcess, "send", logged_send)
    monkeypatch.setattr(WorkerProcess, "receive", logged_receive)
    monkeypatch.setattr(WorkerProcess, "request_timed", logged_timed)
    return events


def at(events, what, pid, op, start=0):
    """The index of the first such event from index `start` on."""
    return next(i for i, e in enumerate(events) if i >= start and e[:3] == (what, pid, op))


def candidate_pid(events, start=0):
    """The worker the first ModelNew load from index `start` on was sent to."""
    return next(e[1] for i, e in enumerate(events) if i >= start and e[2] == "load" and e[3] == "ModelNew")


def test_the_spare_starts_once_the_candidate_loaded_and_is_ready_before_its_timed_batches(relu, tmp_path, log):
    with runner(relu, tmp_path) as r:
        first = r.evaluate(HONEST, **dict(KW, baseline=True))
        assert first["verdict"] == "pass", first
        assert first["started_ahead"] is False and first["worker_warm_s"] == 0.0  # (nothing to warm on the CPU)
        assert first["started_cold_why"] == "no spare in its slot" and first["ready_wait_s"] > 0
        cand, spare = candidate_pid(log), r._processes.spare.proc.pid
        base = next(e[1] for e in log if e[2] == "load" and e[3] == "Model")
        assert len({cand, spare, base}) == 3
        mine = [i for i, e in enumerate(log) if e[1] == spare]
        # started after the candidate's load reply, not at the evaluation's end
        assert log[mine[0]][:3] == ("send", spare, "ready")
        assert mine[0] > at(log, "receive", cand, "load")
        # its ready read before the first timed batch (the first request after seal)
        timed = next(i for i, e in enumerate(log) if i > at(log, "receive", cand, "seal") and e[:2] == ("send", cand))
        assert mine[1] == at(log, "receive", spare, "ready") < timed
        # and nothing else of it while the candidate, then the baseline, are timed
        assert len(mine) == 2 and at(log, "send", base, "go", timed) > timed
        assert list(first["phases_s"])[:2] == ["start_and_load", "start_spare"]
        assert first["phases_s"]["spare_ready"] >= 0
        assert r._processes.spare.ready_reply["ok"] is True  # kept for its candidate

        n = len(log)
        second = r.evaluate(OTHER, **KW)
        assert second["verdict"] == "pass" and second["started_ahead"] is True, second
        assert candidate_pid(log, n) == spare and "started_cold_why" not in second
        assert 0 <= second["ready_wait_s"] < first["ready_wait_s"]  # (read in the evaluation before)
        # its ready was read once, in the evaluation before; its launch time
        # measured again before its load (its ready's ran beside the first
        # candidate's verify)
        assert [e for e in log if e[:3] == ("receive", spare, "ready")] == [("receive", spare, "ready", None)]
        assert at(log, "send", spare, "launch", n) < at(log, "send", spare, "load", n)
        assert second["launch_us"]["candidate"] > 0 and "overlapped" not in second["launch_us"]
        # torch was imported in the first candidate's start, not in this one's
        assert second["phases_s"]["start_and_load"] < first["phases_s"]["start_and_load"]


def test_spare_ahead_off_starts_the_spare_once_the_candidate_is_done(relu, tmp_path, log):
    with runner(relu, tmp_path, spare_ahead=False) as r:
        assert r.spare_ahead is False
        res = r.evaluate(HONEST, **KW)
        assert res["verdict"] == "pass", res
        assert "start_spare" not in res["phases_s"] and "spare_ready" not in res["phases_s"]
        cand, spare = candidate_pid(log), r._processes.spare.proc.pid
        last = max(i for i, e in enumerate(log) if e[1] == cand)
        assert min(i for i, e in enumerate(log) if e[1] == spare) > last
        # its start over on request (the bench, before KernelBench's timing)
        assert r.wait_spare() is None and r._processes.spare.ready_reply["ok"] is True
        again = r.evaluate(OTHER, **KW)
        assert again["verdict"] == "pass" and again["started_ahead"] is True, again
        assert ("send", spare, "launch", None) not in log  # its ready ran with nothing beside it


def test_no_spare_asked_for_starts_none(relu, tmp_path, log):
    with runner(relu, tmp_path, spare=False) as r:
        res = r.evaluate(HONEST, **KW)
        assert res["verdict"] == "pass", res
        assert r._processes.spare is None
        assert {e[1] for e in log if e[2] == "ready"} == {candidate_pid(log)}  # its worker alone
        assert "start_spare" not in res["phases_s"] and "spare_ready" not in res["phases_s"]
        assert r.evaluate(OTHER, **KW)["started_ahead"] is False
        assert r.wait_spare() == "no spare worker"


def ahead_spares(monkeypatch, spoil):
    """Runs spoil(worker) on every spare started ahead, right after its start."""
    start_spare = Processes.start_spare

    def spoiled(self, next_source=None, ahead=False):
        start_spare(self, next_source, ahead)
        if ahead and self.spare is not None:
            spoil(self.spare)

    monkeypatch.setattr(Processes, "start_spare", spoiled)


def test_a_spare_that_dies_leaves_the_candidate_alone(relu, tmp_path, monkeypatch):
    # its supervisor killed: the worker goes with it (PR_SET_PDEATHSIG). By
    # its own kill (a pidfd for one forked from the zygote): a forked
    # supervisor makes its group itself, so a killpg right after its start
    # could find none yet
    ahead_spares(monkeypatch, lambda w: w.proc.kill())
    with runner(relu, tmp_path) as r:
        res = r.evaluate(HONEST, **KW)
        assert res["verdict"] == "pass" and res["reward"] > 0, res
        assert any(n.startswith("no spare worker: it did not start") for n in res["notes"]), res["notes"]
        wrong = r.evaluate(WRONG, **KW)
        assert wrong["verdict"] == "wrong", wrong  # judged as ever
        # the spare started at the end instead (the dead one ended) served it
        assert wrong["started_ahead"] is True


def spares_with_no_device(monkeypatch, which):
    """The ready of each spare which(ahead, spoiled so far) picks asks for
    a device it cannot get up (its ready fails); the list of those spares
    (None until its ready is sent)."""
    send, start_spare = WorkerProcess.send, Processes.start_spare
    spoiled = []

    def spoil_next_ready(self, obj, *a, **k):
        if obj["op"] == "ready" and spoiled and spoiled[-1] is None:
            spoiled[-1] = self
            obj = dict(obj, device="cuda:999")
        return send(self, obj, *a, **k)

    def picked_with_no_device(self, next_source=None, ahead=False):
        if which(ahead, spoiled):
            spoiled.append(None)
        start_spare(self, next_source, ahead)

    monkeypatch.setattr(WorkerProcess, "send", spoil_next_ready)
    monkeypatch.setattr(Processes, "start_spare", picked_with_no_device)
    return spoiled


def test_a_spare_whose_ready_failed_leaves_the_candidates_alone(relu, tmp_path, monkeypatch):
    """Its ready fails (a device it cannot get up): read before the timed
    batches, it is ended and noted; left unread (the candidate before it
    failed its verify first), the next candidate gets a worker of its own
    instead of an error."""
    spoiled = spares_with_no_device(monkeypatch, lambda ahead, spoiled: ahead)
    with runner(relu, tmp_path) as r:
        res = r.evaluate(HONEST, **KW)
        assert res["verdict"] == "pass", res
        assert spoiled and spoiled[0].ended is not None  # it was started, failed, and is gone
        assert any("its ready failed" in n for n in res["notes"]), res["notes"]
        # a candidate wrong in its verify: its spare's failed ready is left unread
        wrong = r.evaluate(WRONG, **KW)
        assert wrong["verdict"] == "wrong", wrong
        assert r._processes.spare is spoiled[-1] and spoiled[-1].ready_reply is None
        after = r.evaluate(OTHER, **KW)
        assert after["verdict"] == "pass" and after["started_ahead"] is False, after
        assert any("the spare worker did not start" in n for n in after["notes"]), after["notes"]


def test_each_warm_step_of_a_ready_is_timed_on_its_own():
    """A spare's ready is on the next candidate's path (spare_ready): its
    warm reports each step's seconds (cuBLAS, cuDNN, Triton's import and
    driver, Triton's compiler), so a run shows which to move or drop; a
    step that fails still gets its time."""
    import contextlib
    import importlib.util
    import time
    import types

    import torch
    path = ROOT / "bindings" / "python" / "kreward" / "kernelbench" / "worker.py"
    spec = importlib.util.spec_from_file_location("kb_worker_warm", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    compiled = []
    fake = types.SimpleNamespace(torch=torch, device="cpu", perf=time.perf_counter, sync=lambda: None,
                                 no_grad=contextlib.nullcontext,
                                 _triton_first_compile=lambda triton: compiled.append(triton))
    for driver in (False, True):
        steps = {}
        total = mod.Worker._warm_libraries(fake, driver, steps)
        assert set(steps) == {"cublas", "cudnn", "triton", "triton_compiler"}, steps
        assert all(s >= 0 for s in steps.values()) and total >= sum(steps.values()) - 1e-6
    # the compiler warmed only where the caller trusts the cache (and Triton is there)
    assert len(compiled) == (1 if importlib.util.find_spec("triton") else 0)


def test_a_candidate_without_a_spare_starts_in_a_fresh_folder_that_takes_its_name(relu, tmp_path, log,
                                                                                  monkeypatch):
    """No spare (spare=False): a new source's worker starts as a fresh
    folder's would (its ready, with nothing of a candidate's loaded before
    it, warms the library there), and only then does that folder take the
    source's name; a source that has a folder already starts in it."""
    cache = tmp_path / "cache"
    monkeypatch.setattr(folders, "_marked", set())  # (another test's "init" Runner turns fresh starts off)
    with runner(relu, tmp_path, spare=False) as r:
        if r._processes.sandbox != "start":
            pytest.skip(f"the start sandbox is not available here: {r._processes.sandbox_fallback}")
        res = r.evaluate(HONEST, **KW)
        assert res["verdict"] == "pass", res
        name = cache / folders._name(str(cache), HONEST)[len(str(cache)) + 1:]
        assert name.is_symlink() and os.readlink(name).startswith("spare-")
        pid = candidate_pid(log)
        # the ready's reply read before the load was sent
        assert at(log, "receive", pid, "ready") < at(log, "send", pid, "load")
        spares = sorted(p.name for p in cache.iterdir() if p.name.startswith("spare-"))
        assert len(spares) == 1
        again = r.evaluate(HONEST, **KW)
        assert again["verdict"] == "pass", again
        assert sorted(p.name for p in cache.iterdir() if p.name.startswith("spare-")) == spares


def test_an_evaluation_closed_while_its_fresh_worker_starts_gets_no_other_worker(relu, tmp_path, monkeypatch):
    monkeypatch.setattr(folders, "_marked", set())
    with runner(relu, tmp_path, spare=False) as r:
        if r._processes.sandbox != "start":
            pytest.skip(f"the start sandbox is not available here: {r._processes.sandbox_fallback}")
        processes = r._processes

        def closed_meanwhile(w):
            processes.close()
            return "ended by close()"

        monkeypatch.setattr(processes, "_ready_failed", closed_meanwhile)
        spawned = []
        spawn = processes._spawn
        monkeypatch.setattr(processes, "_spawn", lambda *a, **k: spawned.append(k or a) or spawn(*a, **k))
        res = r.evaluate(HONEST, **KW)
        assert res["verdict"] == "error" and "closed" in res["feedback"], res
        assert len(spawned) == 1  # the fresh folder's worker alone
        assert not [p for p in (tmp_path / "cache").iterdir() if p.name.startswith("spare-")]


def test_a_fresh_start_that_fails_is_not_the_candidates_outcome_and_is_not_tried_again(relu, tmp_path,
                                                                                       monkeypatch):
    monkeypatch.setattr(folders, "_marked", set())
    with runner(relu, tmp_path, spare=False) as r:
        if r._processes.sandbox != "start":
            pytest.skip(f"the start sandbox is not available here: {r._processes.sandbox_fallback}")
        processes, tries = r._processes, []

        def fails(w):
            tries.append(w.folder)
            w.ready_reply = {"ok": False, "error": "a device it could not get"}
            return "a device it could not get"

        monkeypatch.setattr(processes, "_ready_failed", fails)
        first = r.evaluate(HONEST, **KW)
        second = r.evaluate(OTHER, **KW)
        assert first["verdict"] == "pass" and second["verdict"] == "pass", (first, second)
        assert len(tries) == 1 and processes.fresh_failed == "a device it could not get"
        assert any("fresh folder did not start" in n for n in second["notes"]), second["notes"]
        assert processes.sandbox == "start"  # (not the sandbox's refusal: no fallback)
        cache = tmp_path / "cache"
        assert not [p for p in cache.iterdir() if p.name.startswith("spare-")]
        assert not (cache / folders._name(str(cache), HONEST)[len(str(cache)) + 1:]).is_symlink()


@pytest.mark.parametrize("how", ["died", "sandbox refused"])
def test_a_fresh_start_that_died_is_tried_again_and_one_the_sandbox_refused_falls_back(relu, tmp_path,
                                                                                       monkeypatch, how):
    monkeypatch.setattr(folders, "_marked", set())
    with runner(relu, tmp_path, spare=False) as r:
        if r._processes.sandbox != "start":
            pytest.skip(f"the start sandbox is not available here: {r._processes.sandbox_fallback}")
        processes, tries = r._processes, []
        ready_failed = processes._ready_failed

        def fails_once(w):
            tries.append(w.folder)
            if len(tries) > 1:
                return ready_failed(w)
            if how == "died":
                return "the worker died"  # (no ready reply: ready_reply stays None)
            w.ready_reply = {"ok": False, "error": "CUDA error: OS call failed", "sandbox_failed": False}
            return "CUDA error: OS call failed"

        monkeypatch.setattr(processes, "_ready_failed", fails_once)
        first = r.evaluate(HONEST, **KW)
        assert first["verdict"] == "pass", first
        assert processes.fresh_failed is None
        if how == "died":
            second = r.evaluate(OTHER, **KW)
            assert second["verdict"] == "pass" and len(tries) == 2, (second, tries)
            assert processes.sandbox == "start"
        else:
            assert processes.sandbox == "init" and "OS call failed" in processes.sandbox_fallback
            assert len(tries) == 1


def test_in_flight_a_fresh_start_holds_the_gate_for_its_spawn_only(tmp_path, monkeypatch):
    """A candidate without a spare starts in a fresh folder: its spawn (a
    fork of this process, a staging buffer) is a shared step of the lane's
    gate, its ready is waited for outside it (the worker is tracked and
    frozen in each timed phase, as a spare still starting is), so a timed
    phase never waits for a whole ready."""
    import contextlib
    monkeypatch.setattr(folders, "_marked", set())
    p = Processes.__new__(Processes)
    p.device, p.sandbox, p.cache_dir, p._ref_source = "cuda:0", "start", str(tmp_path / "cache"), "REF"
    p.fresh_failed, p.clock, p.candidate = None, None, None
    inside, seen = [False], []

    @contextlib.contextmanager
    def step():
        inside[0] = True
        try:
            yield
        finally:
            inside[0] = False
    p.start_step = step

    class Worker:
        def limit_until(self, *a):
            pass

    def spawn(source=None, ext=None):
        seen.append(("spawn", inside[0]))
        return Worker()

    def name_fresh(w, fresh, source):
        seen.append(("ready", inside[0]))
        return fresh, None
    monkeypatch.setattr(p, "_spawn", spawn)
    monkeypatch.setattr(p, "_name_fresh", name_fresh)
    w, ext = p._spawn_for(HONEST, (None, None))
    assert isinstance(w, Worker) and ext is not None
    assert seen == [("spawn", True), ("ready", False)]


@pytest.mark.parametrize("failure", [WorkerTimeout("the worker did not answer in time"),
                                     WorkerDied("the worker exited with -9")])
def test_a_spare_whose_ready_never_answers_is_not_the_next_candidates_outcome(relu, tmp_path, monkeypatch,
                                                                            failure):
    """helper-40: a spare taken with its ready unread (in "init", where it
    starts once its candidate has ended; in flight any, since nothing waits
    for it before a timed phase any more) whose ready never answers, or
    which dies before the reply, ran no source (a worker takes load after
    its ready): the candidate gets a worker of its own and is judged, the
    spare's failure in its notes, where it was the candidate's `timeout`
    or `crash`."""
    send, readies = WorkerProcess.send, []

    def second_ready_fails(self, obj, *a, **k):
        if obj["op"] == "ready":
            readies.append(self)
            if len(readies) == 2:  # the spare started after the first candidate

                def receive_ready(timeout_s):
                    raise failure
                self.receive_ready = receive_ready
        return send(self, obj, *a, **k)
    monkeypatch.setattr(WorkerProcess, "send", second_ready_fails)
    with Runner(relu, "cpu", cache_dir=str(tmp_path / "cache"), timeout_s=60, call_timeout_s=30,
                sandbox="init") as r:
        first = r.evaluate(HONEST, **KW)
        assert first["verdict"] == "pass", first
        assert r._processes.spare is readies[1]
        after = r.evaluate(OTHER, **KW)
        assert after["verdict"] == "pass" and after["started_ahead"] is False, after
        assert any("the spare worker did not start" in n and type(failure).__name__ in n
                   for n in after["notes"]), after["notes"]
        assert readies[1].ended is not None


def test_a_spares_unread_ready_is_read_before_its_load_is_sent(relu, tmp_path, log):
    """helper-41: a spare taken with its ready reply still unread (in
    "init", where it starts once its candidate has ended and nothing waits
    for it; in flight, where nothing waits for any) has that reply read, and
    its launch probe's too, before the load is sent: from the load on, the
    candidate's module code runs in that worker and could read an unread
    reply off its pipe and write one of its own (a failed ready: the
    sandbox's fallback)."""
    with Runner(relu, "cpu", cache_dir=str(tmp_path / "cache"), timeout_s=60, call_timeout_s=30,
                sandbox="init") as r:
        assert r.evaluate(HONEST, **KW)["verdict"] == "pass"
        spare = r._processes.spare
        assert spare is not None and spare.ready_reply is None  # unread: nobody waited for it
        n = len(log)
        after = r.evaluate(OTHER, **KW)
        assert after["verdict"] == "pass" and after["started_ahead"] is True, after
        pid = spare.proc.pid
        load = at(log, "send", pid, "load", n)
        assert at(log, "receive", pid, "ready", n) < load
        # nothing of it left unread when the candidate's code gets the worker
        assert not [e for e in log[n:load] if e[1] == pid and e[0] == "send" and e[2] != "launch"]


# "start": a fresh folder's spare whose ready failed is met at its naming;
# "init": at the candidate's own wait for it, which starts it again
@pytest.mark.parametrize("sandbox", ["start", "init"])
def test_a_retry_after_a_failed_spare_leaves_the_next_candidates_spare(relu, tmp_path, monkeypatch, sandbox):
    """In flight the next candidate's spare starts as soon as a candidate
    has taken its worker (start_candidate's on_taken), before that
    worker's ready is read: where that ready failed, the candidate's retry
    starts a worker of its own and leaves the new spare to the candidate
    it was started for (taking it, it had left that one to start cold)."""
    spoiled = spares_with_no_device(monkeypatch, lambda ahead, spoiled: not spoiled)  # the first only
    with runner(relu, tmp_path, sandbox=sandbox) as r:
        # the first candidate wrong in its verify: its spare's failed ready is left unread
        assert r.evaluate(WRONG, **KW)["verdict"] == "wrong"
        failed = r._processes.spare
        assert failed is spoiled[0] and failed.ready_reply is None
        started = []

        def start_next():  # what Evaluation.run does in flight
            r._processes.start_spare(None, ahead=True)
            started.append(r._processes.spare)

        w, loaded = r._processes.start_candidate(OTHER, "ModelNew", on_taken=start_next)
        try:
            assert loaded["ok"] and loaded.get("spare_failed"), loaded
            assert started and started[0] is not None and started[0] is not failed
            assert w is not started[0] and w is not failed
            assert r._processes.spare is started[0]  # still the next candidate's
        finally:
            w.end()
