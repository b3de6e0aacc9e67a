"""The zygote (kernelbench/zygote.py) on the CPU: workers forked from a
process with torch imported start faster than by exec and are judged the
same; a forked worker holds none of the zygote's descriptors (its request
socket would start processes outside the sandbox); the supervisor it forks
still ends what a candidate leaves running; a zygote that is gone or never
started leaves workers to exec, said in every result; the zygote ends with
its Runner. The sandbox tests run under it too (test_sandbox.py)."""
import os
import signal
import statistics
import subprocess
import sys
import textwrap
import time

import pytest

torch = pytest.importorskip("torch", reason="the ModelNew runner needs torch")

from kreward.kernelbench import import_problem  # noqa: E402
from kreward.kernelbench import zygote as zygote_mod  # noqa: E402
from kreward.kernelbench.freezer import Freezer, descendants  # noqa: E402
from kreward.kernelbench.processes import library_path  # noqa: E402
from kreward.kernelbench.runner import Runner  # noqa: E402
from kreward.kernelbench.supervisor import _stat  # noqa: E402
from kreward.kernelbench.worker_process import (WorkerProcess, WorkerTimeout, watch_starts,  # noqa: E402
                                                worker_environment)
from kreward.kernelbench.zygote import (ForkedProcess, Zygote, ZygoteLost, ZygoteUnavailable,  # noqa: E402
                                        shared_zygote)

PROBLEM = textwrap.dedent("""
    import torch
    import torch.nn as nn


    class Model(nn.Module):
        def forward(self, x):
            return torch.relu(x)


    def get_inputs():
        return [torch.randn(64, 128)]


    def get_init_inputs():
        return []
""")
HONEST = "import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return x.clamp_min(0)\n"
WRONG = "import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return x.clamp_min(0) * 0.5\n"


@pytest.fixture(scope="module")
def relu(tmp_path_factory):
    d = tmp_path_factory.mktemp("kb_zygote")
    (d / "small_relu.py").write_text(PROBLEM)
    return import_problem(str(d / "small_relu.py"))


def quick(runner, source, seed=1):
    return runner.evaluate(source, seed=seed, verify_seeds=1, batches=1, calls=2, checks=1)


def ready_in(zygote):
    """Seconds from a worker's creation to its ready reply (no sandbox),
    started the way asked (forked by zygote, or by exec for None) and
    ended cleanly."""
    t0 = time.perf_counter()
    w = WorkerProcess(zygote=zygote)
    try:
        r, _ = w.request({"op": "ready", "device": "cpu", "library": library_path()}, 120)
        assert r["ok"], r
        assert w.started_by == ("zygote" if zygote else "exec"), w.started_by
        return time.perf_counter() - t0
    finally:
        assert w.end()["clean"]


def tree(pid):
    """pid and every process below it (freezer.descendants leaves pid out)."""
    return [pid] + [p for p, _ in descendants(pid)]


def fd_targets(pid):
    out = {}
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            out[int(fd)] = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            pass
    return out


def test_a_forked_worker_starts_faster_than_an_execd_one():
    """The import of torch is the zygote's, once: a forked worker's ready
    comes in well under the exec'd one's (the median of three each; the
    zygote's own start is waited for before the clock)."""
    z = Zygote(worker_environment())
    try:
        z._wait_ready(120)
        forked = statistics.median(ready_in(z) for _ in range(3))
    finally:
        z.close()
    execd = statistics.median(ready_in(None) for _ in range(3))
    assert forked < 0.6 * execd, (forked, execd)


def test_a_zygote_runner_judges_as_an_exec_runner(relu, tmp_path):
    with Runner(relu, "cpu", cache_dir=str(tmp_path / "ext"), timeout_s=300,
                call_timeout_s=60, zygote=True) as r:
        honest, wrong, again = quick(r, HONEST), quick(r, WRONG, 2), quick(r, HONEST, 3)
    assert honest["verdict"] == "pass" and again["verdict"] == "pass", (honest, again)
    assert wrong["verdict"] == "wrong", wrong
    assert {honest["worker_start"], wrong["worker_start"], again["worker_start"]} == {"zygote"}


# a candidate that answers right only where Triton's key of its own files
# was computed before its worker ran any code (the zygote's, inherited)
KEY_READY = HONEST.replace("class ModelNew", """import triton.runtime.cache as _cache
_KEYED = _cache.triton_key.cache_info().currsize == 1
class ModelNew""").replace("return x.clamp_min(0)", "return x.clamp_min(0) + (0 if _KEYED else 1)")


def test_a_forked_worker_finds_tritons_key_computed_by_the_zygote(relu, tmp_path):
    pytest.importorskip("triton", reason="Triton's key is Triton's")
    assert "_KEYED" in KEY_READY and "(0 if _KEYED" in KEY_READY
    with Runner(relu, "cpu", cache_dir=str(tmp_path / "z"), timeout_s=300,
                call_timeout_s=60, zygote=True) as r:
        forked = quick(r, KEY_READY)
    with Runner(relu, "cpu", cache_dir=str(tmp_path / "e"), timeout_s=300,
                call_timeout_s=60, zygote=False) as r:
        execd = quick(r, KEY_READY)
    assert forked["worker_start"] == "zygote" and forked["verdict"] == "pass", forked
    assert execd["verdict"] == "wrong", execd  # (by exec: computed at its first compile only)


def test_a_forked_worker_holds_none_of_the_zygotes_descriptors():
    """The supervisor and the worker hold their pipes, the log and the
    standard descriptors, no socket (the zygote's request socket among
    them: a worker holding it could ask for processes of its choosing)."""
    z = Zygote(worker_environment())
    try:
        w = WorkerProcess(zygote=z)
        try:
            r, _ = w.request({"op": "ready", "device": "cpu", "library": library_path()}, 120)
            assert r["ok"] and w.started_by == "zygote", (r, w.started_by)
            procs = tree(w.proc.pid)
            assert len(procs) == 2, procs  # the supervisor and its worker
            for pid in procs:
                targets = fd_targets(pid)
                assert not [t for t in targets.values() if t.startswith("socket:")], (pid, targets)
            zy = fd_targets(z.proc.pid)
            assert [t for t in zy.values() if t.startswith("socket:")], zy  # (the check sees sockets)
        finally:
            w.end()
    finally:
        z.close()


LEAVER = HONEST + '''
import os, time
_child = os.fork()
if _child == 0:         # a child left running, in a session of its own
    try:
        os.setsid()
        time.sleep(600)
    finally:
        os._exit(0)
open(os.path.join(LEAVE_AT, "leaver-" + str(_child)), "w").close()
'''


def test_what_a_forked_candidate_leaves_running_is_ended(relu, tmp_path):
    """The forked supervisor is the subreaper as an exec'd one is: the
    child the candidate leaves (its own session, orphaned) is ended before
    the baseline is timed, and the result says so."""
    with Runner(relu, "cpu", cache_dir=str(tmp_path / "ext"), timeout_s=300,
                call_timeout_s=60, zygote=True, sandbox=None) as r:
        res = quick(r, f"LEAVE_AT = {str(tmp_path)!r}\n" + LEAVER)
    assert res["verdict"] == "pass" and res["worker_start"] == "zygote", res
    assert any("ended before the baseline" in n for n in res["notes"]), res["notes"]
    pids = [int(p.name.split("-")[1]) for p in tmp_path.glob("leaver-*")]
    assert pids, "the candidate's child never ran"
    for pid in pids:
        assert not os.path.exists(f"/proc/{pid}") or open(f"/proc/{pid}/stat").read().split()[2] == "Z", pid


@pytest.fixture
def fresh_zygote():
    """The process's zygote forgotten before and after (each test its own)."""
    zygote_mod._shared, zygote_mod._barren = None, 0
    yield
    if zygote_mod._shared is not None:
        zygote_mod._shared.close()
    zygote_mod._shared, zygote_mod._barren = None, 0


@pytest.fixture
def zygote_starts(monkeypatch):
    """A list that gets an entry for every zygote started."""
    started = []
    real_init = zygote_mod.Zygote.__init__

    def counting(self, env):
        started.append(1)
        real_init(self, env)
    monkeypatch.setattr(zygote_mod.Zygote, "__init__", counting)
    return started


def test_every_runner_shares_the_processes_zygote(relu, tmp_path, fresh_zygote):
    with Runner(relu, "cpu", cache_dir=str(tmp_path / "a"), timeout_s=300, call_timeout_s=60,
                zygote=True) as a, \
            Runner(relu, "cpu", cache_dir=str(tmp_path / "b"), timeout_s=300, call_timeout_s=60,
                   zygote=True) as b:
        assert quick(a, HONEST)["worker_start"] == "zygote"
        assert quick(b, HONEST)["worker_start"] == "zygote"
        parents = {_stat(w.proc.pid)[1] for w in (a._processes.baseline, b._processes.baseline)}
    assert parents == {zygote_mod._shared.proc.pid}, parents
    assert zygote_mod._shared.proc.poll() is None  # closing a Runner leaves it to the others


def test_a_killed_zygote_is_started_again(relu, tmp_path, fresh_zygote):
    with Runner(relu, "cpu", cache_dir=str(tmp_path / "ext"), timeout_s=300,
                call_timeout_s=60, zygote=True, spare=False) as r:
        first = quick(r, HONEST)
        old = zygote_mod._shared.proc
        os.kill(old.pid, signal.SIGKILL)
        old.wait()
        second = quick(r, HONEST, 2)
    assert first["worker_start"] == "zygote" and second["worker_start"] == "zygote", (first, second)
    assert second["verdict"] == "pass" and zygote_mod._shared.proc.pid != old.pid


def test_a_zygote_that_cannot_start_leaves_workers_to_exec_and_says_so(relu, tmp_path, fresh_zygote,
                                                                       monkeypatch):
    monkeypatch.setattr(zygote_mod, "ZYGOTE", str(tmp_path / "no-such-zygote.py"))
    with Runner(relu, "cpu", cache_dir=str(tmp_path / "ext"), timeout_s=300,
                call_timeout_s=60, zygote=True) as r:
        res, again = quick(r, HONEST), quick(r, HONEST, 2)
    assert res["verdict"] == "pass" and again["verdict"] == "pass", (res, again)
    for x in (res, again):
        assert x["worker_start"].startswith("exec (") and "no-such-zygote.py" in x["worker_start"], x
    assert zygote_mod._shared.failed_start  # not started again for every worker


def test_the_zygote_ends_with_its_process(tmp_path):
    """A caller killed outright: its zygote sees its socket close and ends."""
    script = ("import os, sys\n"
              "from kreward.kernelbench.zygote import shared_zygote\n"
              "from kreward.kernelbench.worker_process import worker_environment\n"
              "z = shared_zygote(worker_environment())\n"
              "z._wait_ready(120)\n"
              "print(z.proc.pid, flush=True)\n"
              "os.kill(os.getpid(), 9)\n")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=180,
                         env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    pid = int(out.stdout.split()[0])
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and _stat(pid)[0] not in (None, "Z"):
        time.sleep(0.05)
    assert _stat(pid)[0] in (None, "Z"), "the zygote outlived its caller"


def test_the_zygote_is_the_default_and_exec_is_asked_for(relu, tmp_path):
    with Runner(relu, "cpu", cache_dir=str(tmp_path / "ext"), timeout_s=300,
                call_timeout_s=60) as r:
        res = quick(r, HONEST)
    assert res["verdict"] == "pass" and res["worker_start"] == "zygote", res
    with Runner(relu, "cpu", cache_dir=str(tmp_path / "ext"), timeout_s=300,
                call_timeout_s=60, zygote=False) as r:
        res = quick(r, HONEST)
    assert res["verdict"] == "pass" and res["worker_start"] == "exec", res


def test_kreward_serve_forks_by_default_and_can_exec():
    from kreward.serve.__main__ import kernelbench_options, parser
    assert kernelbench_options(parser().parse_args([]))["runner"]["zygote"] is True
    assert kernelbench_options(parser().parse_args(["--no-kernelbench-zygote"]))["runner"]["zygote"] is False


def test_the_evaluators_kernelbench_options_reach_the_runner(relu, tmp_path):
    """The Evaluator's door (kernelbench={"runner": {...}}, lanes.py) builds
    its Runners with the option, and the report says how the worker started."""
    import kreward
    with kreward.Evaluator(reward="kernelbench", gpus="none", cache_dir=str(tmp_path),
                           kernelbench={"devices": ["cpu"],
                                        "runner": {"zygote": True, "timeout_s": 120,
                                                   "call_timeout_s": 30}}) as ev:
        r = ev.evaluate(PROBLEM, HONEST)
        try:
            assert r.verdict == "passed" and r.text("worker_start") == "zygote", (r.verdict, r.feedback)
        finally:
            r.close()


# ---- the lifecycle's failures (review helper-25's proofs, kept as tests)
def test_a_worker_forked_during_a_freeze_is_stopped():
    """A slot starting a worker during another's exclusive phase: the
    forked supervisor (the zygote's child, not this process's) is stopped
    through its own pidfd, and its ready waits for the thaw."""
    import threading
    z = Zygote(worker_environment())
    try:
        z._wait_ready(120)
        f = Freezer()
        t = threading.Thread(target=f.freeze)  # another slot's phase: frozen by another thread
        t.start()
        t.join()
        with watch_starts(f.track):
            w = WorkerProcess(zygote=z)
        try:
            assert w.started_by == "zygote"
            # the supervisor itself where it had not forked yet, else the worker below it
            assert set(tree(w.proc.pid)) & set(f._stopped), (f._stopped, tree(w.proc.pid))
            w.send({"op": "ready", "device": "cpu", "library": library_path()})
            with pytest.raises(WorkerTimeout):
                w.receive(3)
            f.thaw()
            r, _ = w.receive(120)
            assert r["ok"], r
        finally:
            f.thaw()
            w.end()
    finally:
        z.close()


def _spare_fds():
    r, w = os.pipe()
    r2, w2 = os.pipe()
    log = os.open(os.devnull, os.O_WRONLY)
    return log, [r, w2, None, None], [r, w, r2, w2, log]


def test_a_spawn_whose_answer_is_lost_ends_the_zygote_and_the_next_starts_cleanly(fresh_zygote):
    """A spawn that times out (the zygote stalled) after its request went:
    ZygoteLost, the zygote ended, never read one answer late (which put
    every later spawn one answer behind); the next worker gets a new one."""
    z = shared_zygote(worker_environment())
    z._wait_ready(120)
    os.kill(z.proc.pid, signal.SIGSTOP)  # stands for any stall past the spawn's limit
    log, wfds, mine = _spare_fds()
    try:
        with pytest.raises(ZygoteLost):
            z.spawn(log, wfds, "", worker_environment(), timeout_s=1)
    finally:
        for fd in mine:
            os.close(fd)
    assert z.proc.wait(timeout=10) is not None and z.why
    z2 = shared_zygote(worker_environment())
    assert z2 is not z
    w = WorkerProcess(zygote=z2)
    try:
        r, _ = w.request({"op": "ready", "device": "cpu", "library": library_path()}, 120)
        assert r["ok"] and w.started_by == "zygote" and w.alive(), (r, w.started_by)
        assert _stat(w.proc.pid)[1] == z2.proc.pid
    finally:
        assert w.end()["clean"]


def test_a_start_whose_zygote_answer_is_lost_is_made_again_by_exec(relu, tmp_path, fresh_zygote, monkeypatch):
    """Through a Runner: the lost start is not handed the descriptors it
    sent (a child may hold them): a worker by exec with new ones, said."""
    real = zygote_mod.Zygote._spawn

    def lose(self, *a, **kw):  # the first spawn only (the candidate's worker)
        monkeypatch.setattr(zygote_mod.Zygote, "_spawn", real)
        self._wait_ready(120)
        os.kill(self.proc.pid, signal.SIGSTOP)
        return real(self, *a[:-1], 1)  # its answer waited for 1 s
    with Runner(relu, "cpu", cache_dir=str(tmp_path / "ext"), timeout_s=300, call_timeout_s=60,
                zygote=True, spare=False, sandbox=None) as r:
        monkeypatch.setattr(zygote_mod.Zygote, "_spawn", lose)
        w = r._processes._spawn()  # a start as the evaluation makes it (ready sent)
        try:
            ready, _ = w.receive(120)
            assert ready["ok"] and w.started_by.startswith("exec (the zygote lost"), (ready, w.started_by)
        finally:
            assert w.end()["clean"]
        again = quick(r, HONEST, 2)
    assert again["verdict"] == "pass" and again["worker_start"] == "zygote", again


def test_poll_from_two_threads_closes_the_pidfd_once():
    import threading
    errors = []
    for _ in range(100):
        pid = os.fork()
        if pid == 0:
            os._exit(0)
        fp = ForkedProcess(pid, os.pidfd_open(pid), None, None)
        os.waitpid(pid, 0)
        barrier = threading.Barrier(2)

        def go():
            barrier.wait()
            try:
                fp.poll()
            except Exception as e:  # noqa: BLE001 - what the test counts
                errors.append(repr(e))
        threads = [threading.Thread(target=go) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert fp.returncode == -1
    assert errors == []


def test_a_zygote_whose_import_fails_is_not_started_again(tmp_path, fresh_zygote):
    """Its "ready: false" is read before a dead zygote is replaced: one
    failed import per process, not one per Runner."""
    fake = tmp_path / "fake"
    (fake / "torch").mkdir(parents=True)
    (fake / "torch" / "__init__.py").write_text("raise ImportError('no torch here')\n")
    env = dict(worker_environment(), PYTHONPATH=str(fake))
    z = shared_zygote(env)
    assert z.proc.wait(timeout=60) is not None  # it answered and ended
    assert shared_zygote(env) is z and z.failed_start
    with pytest.raises(ZygoteUnavailable, match="no torch here"):
        z.spawn(0, [None, None, None, None], "", env)


def test_a_caller_whose_folder_was_removed_still_forks(tmp_path, fresh_zygote):
    z = shared_zygote(worker_environment())
    here = os.getcwd()
    gone = tmp_path / "gone"
    gone.mkdir()
    os.chdir(gone)
    try:
        gone.rmdir()
        ready_in(z)
    finally:
        os.chdir(here)


def test_a_zygote_killed_during_its_start_may_be_started_again(fresh_zygote):
    """Killed by a signal before it answered (out of memory, say): not a
    failed start, the next worker gets a new zygote."""
    z = shared_zygote(worker_environment())
    os.kill(z.proc.pid, signal.SIGKILL)
    z.proc.wait()
    z2 = shared_zygote(worker_environment())
    assert z2 is not z and not z.failed_start
    ready_in(z2)


def test_a_fork_of_the_caller_leaves_the_parents_workers_alone(relu, tmp_path):
    """A trainer's fork (multiprocessing, a helper) that drops its copy of a
    Runner: with exec'd workers its poll met ECHILD and sent nothing; a
    forked supervisor's pidfd said alive, and the fork's end of the Runner
    sent `reap` to the parent's baseline and spare (helper-27). Now the
    parent's supervisors are ended as far as the fork goes."""
    with Runner(relu, "cpu", cache_dir=str(tmp_path / "ext"), timeout_s=300, call_timeout_s=60) as r:
        assert quick(r, HONEST)["verdict"] == "pass"
        p = r._processes
        assert p.baseline.alive() and p.spare is not None and p.spare.alive()
        pid = os.fork()
        if pid == 0:
            try:
                r.close()  # what the fork's finalisation of its copy runs
            finally:
                os._exit(0)
        os.waitpid(pid, 0)
        time.sleep(0.3)
        assert p.baseline is not None and p.baseline.alive(), "the fork ended the parent's baseline worker"
        assert p.spare is not None and p.spare.alive(), "the fork ended the parent's spare"
        assert quick(r, HONEST, 2)["verdict"] == "pass"


SITE_WITHOUT_PIDFDS = """
import errno, os, sys
if sys.argv and os.path.basename(sys.argv[0]) == "zygote_main.py":
    def _refused(pid, flags=0):
        raise OSError(errno.ENOSYS, "Function not implemented")
    os.pidfd_open = _refused
"""


def test_a_zygote_without_pidfds_fails_its_start_once(relu, tmp_path, fresh_zygote, zygote_starts,
                                                     monkeypatch):
    """A kernel or seccomp profile that refuses pidfd_open (which every
    spawn's answer needs) in the zygote: its start fails, so workers start
    by exec with no zygote started again; it had said ready, and each
    spawn was then lost and a new zygote (a torch import) started for
    every worker, on top of its exec (helper-27)."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(SITE_WITHOUT_PIDFDS)
    monkeypatch.setenv("PYTHONPATH", f"{site}:{os.environ.get('PYTHONPATH', '')}")
    with Runner(relu, "cpu", cache_dir=str(tmp_path / "ext"), timeout_s=300, call_timeout_s=60) as r:
        got = [quick(r, HONEST + f"# {i}\n", i) for i in range(3)]
    assert all(x["verdict"] == "pass" for x in got), got
    assert all(x["worker_start"].startswith("exec (") for x in got), [x["worker_start"] for x in got]
    assert "Function not implemented" in got[0]["worker_start"], got[0]["worker_start"]
    assert len(zygote_starts) == 1, f"{len(zygote_starts)} zygotes started for 3 candidates"


def test_zygotes_whose_spawns_are_lost_are_not_started_for_every_worker(relu, tmp_path, fresh_zygote,
                                                                        zygote_starts, monkeypatch):
    """Zygotes that say ready and then lose every spawn (a fork refused, a
    kernel refusing what the child needs): BARREN_LIMIT of them in a row,
    then every worker starts by exec, no torch import each on top."""
    def lost(self, *a, **kw):
        self._wait_ready(120)
        self.why = "a spawn's answer was lost: played by the test"
        self._end_process()
        raise ZygoteLost(self.why)
    monkeypatch.setattr(zygote_mod.Zygote, "_spawn", lost)
    with Runner(relu, "cpu", cache_dir=str(tmp_path / "ext"), timeout_s=300, call_timeout_s=60) as r:
        got = [quick(r, HONEST + f"# {i}\n", i) for i in range(3)]
    assert all(x["verdict"] == "pass" and x["worker_start"].startswith("exec (") for x in got), got
    assert len(zygote_starts) == zygote_mod.BARREN_LIMIT, zygote_starts


def test_a_busy_trainers_workers_start_and_answer(fresh_zygote):
    """A trainer with over 1023 descriptors open: the workers' pipes and the
    zygote's socket get numbers select() refuses (ValueError out of
    evaluate; the zygote dead after its ready), so both sides poll."""
    import resource
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 1300:
        pytest.skip("needs RLIMIT_NOFILE >= 1300")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 1300), hard))
    held = [os.open(os.devnull, os.O_RDONLY) for _ in range(1100)]
    try:
        for z in (zygote_mod.shared_zygote(worker_environment()), None):
            ready_in(z)
    finally:
        for fd in held:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
