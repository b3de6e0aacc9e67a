"""kreward.Pool on the CPU: a compile-only pool (gpus="none") of real
kreward-worker processes. Compile errors are judged there; candidates that
compile end not_run (nothing can run here) and stay unscored."""
import asyncio
import gc
import os
import threading
import time
import weakref

import pytest

import kreward
from kreward import pool as pool_module

BAD = 'extern "C" __global__ void k(float* x) { x[0] = }\n'


def slow(n=400):
    """A candidate NVRTC takes about a second to compile (an unrolled loop):
    still compiling while quick jobs behind it are done."""
    return f"""// kreward: launch add4 grid=(cdiv(N,256)) block=(256) args=(a, b, c, N)
extern "C" __global__ void add4(const float* a, const float* b, float* c, int n) {{
  int i = blockIdx.x * 256 + threadIdx.x;
  float acc = a[i % n];
  #pragma unroll
  for (int k = 0; k < {n}; k++) acc = acc * 1.0001f + b[(i + k) % n];
  if (i < n) c[i] = acc;
}}
"""


@pytest.fixture
def problem(ctx, vadd):
    p = ctx.load_problem(vadd)
    yield p
    p.close()


@pytest.fixture
def reward(ctx):
    with ctx.reward("makora") as r:
        yield r


@pytest.fixture
def pool():
    with kreward.Pool(gpus="none", compile_workers=2) as p:
        yield p


def test_compile_error_and_good_candidate(pool, problem, reward, vadd_fast):
    bad = pool.submit(problem, BAD, name="bad.cu", reward=reward)
    good = pool.submit(problem, vadd_fast, name="fast.cu", reward=reward)
    assert good > bad  # tickets rise in submission order
    r = pool.wait(bad)
    assert r.verdict == "compile_error"
    assert "bad.cu" in r.feedback and "error" in r.feedback
    assert r.reward == -10.0  # makora's compile error, scored in this process
    r = pool.wait(good)
    assert r.verdict == "not_run"  # compiled and checked by a worker; nothing runs here
    assert "need an NVIDIA GPU" in r.message
    assert r.reward is None  # not the candidate's doing: left unscored, as kr_evaluate does
    assert r["compiled"] == 1
    with pytest.raises(KeyError):
        pool.wait(good)  # collected: exactly one report per ticket
    with pytest.raises(KeyError):
        pool.wait(12345)


def test_reports_come_from_the_worker_processes(pool, problem, vadd_fast):
    pool.wait(pool.submit(problem, vadd_fast))
    st = pool.status()
    workers = st["workers"]
    assert [w["kind"] for w in workers] == ["compile", "compile"] and st["gpus"] == 0
    pids = {w["pid"] for w in workers}
    assert os.getpid() not in pids and all(p > 0 for p in pids)
    for pid in pids:
        os.kill(pid, 0)  # alive, and ours
    assert st["jobs_finished"] == 1


def test_status_keys(pool, problem):
    st = pool.status()
    for key in ("workers", "first_worker_pid", "gpus", "arch", "cache_dir", "jobs_queued",
                "jobs_running", "jobs_done_uncollected", "jobs_finished", "respawns", "retries",
                "timeouts", "dedup_hits", "respawn_wait_max_s", "respawn_wait_mean_s"):
        assert key in st, key
    for w in st["workers"]:
        assert {"kind", "state", "spare", "pid", "sandbox"} <= set(w)
        assert w["state"] in ("starting", "idle", "busy", "spare")
    assert os.path.isdir(st["cache_dir"])  # a private one, removed at close
    t = pool.submit(problem, BAD)
    pool.wait(t)
    st = pool.status()
    assert st["jobs_finished"] == 1 and st["jobs_queued"] == st["jobs_running"] == 0


def test_next_returns_submission_order(problem, reward):
    with kreward.Pool(gpus="none", compile_workers=2) as pool:
        sources = [slow(), BAD, BAD + "// 2\n", BAD + "// 3\n"]
        tickets = [pool.submit(problem, s, name=f"c{i}.cu", reward=reward)
                   for i, s in enumerate(sources)]
        # the quick ones finish while the slow one still compiles
        r2 = pool.wait(tickets[2], timeout=30)
        assert r2.verdict == "compile_error"
        with pytest.raises(TimeoutError):
            pool.wait(tickets[0], timeout=0)
        got = list(pool.results())
        # oldest first; the ticket collected by wait() is skipped
        assert [t for t, _ in got] == [tickets[0], tickets[1], tickets[3]]
        assert [r.verdict for _, r in got] == ["not_run", "compile_error", "compile_error"]
        assert [r.text("candidate") for _, r in got] == ["c0.cu", "c1.cu", "c3.cu"]
        with pytest.raises(LookupError):
            pool.next()
        assert pool.pending == []


def test_next_timeout(problem):
    with kreward.Pool(gpus="none", compile_workers=1) as pool:
        t = pool.submit(problem, slow())
        t0 = time.monotonic()
        with pytest.raises(TimeoutError):
            pool.next(timeout=0.1)
        assert time.monotonic() - t0 < 5
        ticket, report = pool.next()
        assert ticket == t and report.verdict == "not_run"


def test_many_submits_from_threads_get_exactly_one_report_each(problem, reward, vadd_fast):
    n_threads, per_thread = 4, 15
    sources = [vadd_fast, BAD, vadd_fast + "// other\n"]  # repeats: evaluated once, copied
    with kreward.Pool(gpus="none", compile_workers=2) as pool:
        submitted, lock = {}, threading.Lock()

        def submitter(k):
            for i in range(per_thread):
                src = sources[(k + i) % len(sources)]
                t = pool.submit(problem, src, reward=reward)
                with lock:
                    submitted[t] = src

        threads = [threading.Thread(target=submitter, args=(k,)) for k in range(n_threads)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        assert len(submitted) == n_threads * per_thread  # distinct tickets
        collected, errors = [], []

        def collector(use_wait):
            try:
                while True:
                    if use_wait:
                        with lock:
                            left = [t for t in submitted if t not in {c for c, _ in collected}]
                        if not left:
                            return
                        try:
                            r = pool.wait(left[-1], timeout=30)
                            t = left[-1]
                        except KeyError:
                            continue  # another collector took it
                    else:
                        try:
                            t, r = pool.next(timeout=30)
                        except LookupError:
                            return
                    with lock:
                        collected.append((t, r.verdict))
            except Exception as e:  # noqa: BLE001 -- reported by the assertion below
                errors.append(e)

        threads = [threading.Thread(target=collector, args=(k % 2 == 0,)) for k in range(4)]
        for th in threads:
            th.start()
        for th in threads:
            th.join(120)
        assert not errors
        tickets = [t for t, _ in collected]
        assert sorted(tickets) == sorted(submitted)  # every ticket, once
        for t, verdict in collected:
            assert verdict == ("compile_error" if submitted[t] == BAD else "not_run"), t
        st = pool.status()
        assert st["jobs_finished"] == len(submitted) and st["dedup_hits"] > 0
        with pytest.raises(LookupError):
            pool.next(timeout=0)


def test_close_with_jobs_pending(problem, reward, vadd_fast):
    pool = kreward.Pool(gpus="none", compile_workers=1)
    done = pool.submit(problem, BAD, reward=reward)
    pool.wait(done)
    late = pool.submit(problem, BAD + "// late\n", reward=reward)
    while pool.status()["jobs_done_uncollected"] < 1:  # done, not collected
        time.sleep(0.01)
    pending = [pool.submit(problem, slow(400 + i), name=f"s{i}.cu", reward=reward)
               for i in range(4)]
    pids = [w["pid"] for w in pool.status()["workers"]]
    cache_dir = pool.status()["cache_dir"]
    blocked = {}

    def waiter():  # blocked in wait() while the pool closes: gets its report
        blocked["report"] = pool.wait(pending[-1])

    th = threading.Thread(target=waiter)
    th.start()
    time.sleep(0.1)
    t0 = time.monotonic()
    pool.close()
    assert time.monotonic() - t0 < 10  # does not wait for the compiles
    th.join(10)
    assert not th.is_alive()
    assert pool.closed
    pool.close()  # twice is harmless
    for pid in pids:  # the workers are gone
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
    assert not os.path.exists(cache_dir)
    # the job done before close keeps its own report
    assert pool.wait(late).verdict == "compile_error"
    # the pending ones get one each, in order: verdict error, unscored
    assert blocked["report"].verdict == "error"
    assert blocked["report"].message == "the pool was freed"
    rest = list(pool.results())
    assert [t for t, _ in rest] == pending[:-1]
    for _, r in rest:
        assert (r.verdict, r.message, r.reward) == ("error", "the pool was freed", None)
    with pytest.raises(KeyError):
        pool.wait(pending[0])
    with pytest.raises(ValueError, match="closed"):
        pool.submit(problem, vadd_fast)
    with pytest.raises(ValueError, match="closed"):
        pool.status()


def test_the_pool_keeps_its_jobs_problems_alive(ctx, vadd, vadd_fast):
    with kreward.Pool(gpus="none", compile_workers=1) as pool:
        problem = ctx.load_problem(vadd)
        t = pool.submit(problem, vadd_fast)
        alive = weakref.ref(problem)
        del problem
        gc.collect()
        assert alive() is not None  # the library points to it until the report is collected
        report = pool.wait(t)
        assert report.verdict == "not_run"
        gc.collect()
        assert alive() is None


def test_a_pool_made_in_a_short_lived_thread_keeps_its_workers(problem, vadd_fast):
    """The workers die with the thread that started them (PR_SET_PDEATHSIG):
    the Pool starts them from a thread of its own."""
    made = {}
    th = threading.Thread(target=lambda: made.update(pool=kreward.Pool(gpus="none",
                                                                       compile_workers=1)))
    th.start()
    th.join()
    with made["pool"] as pool:
        pid = pool.status()["workers"][0]["pid"]
        time.sleep(0.5)  # the pool's thread would have seen a death by now
        st = pool.status()
        assert st["respawns"] == 0 and st["workers"][0]["pid"] == pid
        assert pool.wait(pool.submit(problem, vadd_fast)).verdict == "not_run"


def test_evaluate_batch(pool, problem, reward, vadd_fast):
    reports = pool.evaluate_batch([
        dict(problem=problem, source=vadd_fast, reward=reward),
        dict(problem=problem, source=BAD, reward=reward, name="bad.cu"),
        (problem, vadd_fast),  # the same candidate again: evaluated once
        dict(problem=problem, source=BAD, reward=reward, name="bad.cu"),
    ])
    assert [r.verdict for r in reports] == ["not_run", "compile_error", "not_run",
                                            "compile_error"]
    assert [r.reward for r in reports] == [None, -10.0, None, -10.0]
    assert len({id(r) for r in reports}) == 4  # each its own report
    assert pool.status()["dedup_hits"] >= 1
    assert pool.evaluate_batch([]) == []
    with pytest.raises(TypeError):
        pool.evaluate_batch([42])


def test_next_does_not_take_a_running_batch_s_reports(pool, problem, vadd_fast):
    """kr_pool_next takes the oldest uncollected job of the whole pool: a
    running batch's jobs are never handed to next()."""
    out = {}

    def batch():
        out["reports"] = pool.evaluate_batch([dict(problem=problem, source=slow(401)),
                                              dict(problem=problem, source=BAD + "// b\n")])

    th = threading.Thread(target=batch)
    th.start()
    time.sleep(0.2)  # the batch is in the library, its slow job first
    with pytest.raises(LookupError):
        pool.next(timeout=0)  # nothing of this caller's is pending
    t = pool.submit(problem, vadd_fast)
    ticket, report = pool.next(timeout=60)
    assert ticket == t and report.verdict == "not_run"
    th.join(60)
    assert [r.verdict for r in out["reports"]] == ["not_run", "compile_error"]


def test_a_python_term_s_exception_is_raised_with_the_report(pool, problem, ctx):
    def broken(report):
        raise RuntimeError("term failed on purpose")

    with ctx.reward() as reward:
        reward.add_python("broken", broken, gate="always")
        t = pool.submit(problem, BAD, reward=reward)
        with pytest.raises(RuntimeError, match="on purpose") as e:
            pool.wait(t)
        assert e.value.report.verdict == "compile_error" and e.value.ticket == t
        with pytest.raises(KeyError):
            pool.wait(t)  # it was collected: the report came with the exception


def test_wait_async_does_not_block_the_event_loop(pool, problem):
    async def main():
        ticks = 0
        stop = asyncio.Event()

        async def ticker():
            nonlocal ticks
            while not stop.is_set():
                ticks += 1
                await asyncio.sleep(0.01)

        task = asyncio.create_task(ticker())
        report = await pool.wait_async(pool.submit(problem, slow(402)))
        stop.set()
        await task
        return report, ticks

    report, ticks = asyncio.run(main())
    assert report.verdict == "not_run"
    assert ticks > 10  # the loop ran while the compile did


def test_job_arguments_are_checked(pool, problem, vadd_fast, ctx):
    with pytest.raises(TypeError, match="kreward.Problem"):
        pool.submit("problem.json", vadd_fast)
    with pytest.raises(ValueError, match="source"):
        pool.submit(problem)
    with pytest.raises(ValueError, match="plan"):
        pool.submit(problem, binary=b"\x7fELF")
    with pytest.raises(TypeError, match="Reward"):
        pool.submit(problem, vadd_fast, reward="makora")
    with pytest.raises(ValueError, match="preset"):
        pool.submit(problem, vadd_fast, preset="fastest")
    with pytest.raises(TypeError, match="benchmark option"):
        pool.submit(problem, vadd_fast, bench_options={"no_such": 1})
    assert pool.pending == []


@pytest.mark.parametrize("options, error, text", [
    (dict(gpus="zero"), ValueError, "device ordinals"),
    (dict(gpus=[]), ValueError, "no GPU given"),
    (dict(gpus=[0, -1]), ValueError, "not a device ordinal"),
    (dict(gpus=1.5), TypeError, "gpus is"),
    (dict(compile_workers=-1), ValueError, "compile_workers"),
    (dict(job_timeout_s=-1), ValueError, "job_timeout_s"),
    (dict(compile_timeout_s=float("nan")), ValueError, "compile_timeout_s"),
    (dict(max_attempts=2.5), ValueError, "max_attempts"),
    (dict(worker_path="/nonexistent/kreward-worker"), ValueError, "not an executable"),
])
def test_bad_options_raise_with_a_message(options, error, text):
    with pytest.raises(error, match=text):
        kreward.Pool(**options)


def test_a_pool_that_cannot_start_says_why():
    # device 63 exists nowhere: the library's reason reaches the exception
    with pytest.raises(kreward.KrewardError) as e:
        kreward.Pool(gpus=[63], compile_workers=1)
    assert e.value.code == kreward.Status.ENODEVICE
    assert "no GPU worker could start" in e.value.message and "63" in e.value.message


def test_no_gpu_here_is_an_error_not_a_silent_fallback(monkeypatch):
    from conftest import has_gpu
    if has_gpu():
        pytest.skip("this machine has a GPU")
    monkeypatch.delenv("KREWARD_DEVICE", raising=False)
    with pytest.raises(kreward.KrewardError) as e:
        kreward.Pool()
    assert e.value.code == kreward.Status.ENODEVICE
    assert "no GPU worker can start" in e.value.message


def test_evaluator_falls_back_to_compile_only_with_a_warning(tmp_path, vadd, vadd_fast):
    from conftest import has_gpu
    if has_gpu():
        pytest.skip("this machine has a GPU")
    with pytest.warns(RuntimeWarning, match="compile checks only"):
        ev = kreward.Evaluator(cache_dir=str(tmp_path))
    with ev:
        assert ev.pool.status()["gpus"] == 0
        r = ev.evaluate(vadd, vadd_fast)
        assert r.verdict == "not_run" and ev.score_of(r) is None  # not judged: no number
    with pytest.raises(kreward.KrewardError):  # unless told to insist
        kreward.Evaluator(cache_dir=str(tmp_path), require_gpu=True)


def test_evaluator_is_isolated_by_default(tmp_path, vadd, vadd_fast):
    with kreward.Evaluator(cache_dir=str(tmp_path), no_device=True) as ev:
        assert ev.pool is not None
        assert not ev.ctx.has_device  # no CUDA context in the caller for candidates
        reports = ev.evaluate_batch([vadd] * 3, [vadd_fast, BAD, None])
        assert [r.verdict for r in reports] == ["not_run", "compile_error", "compile_error"]
        assert [ev.score_of(r) for r in reports] == [None, -10.0, -10.0]  # not judged: None
        assert ev.pool.status()["jobs_finished"] == 2  # None never reached the pool
        r = asyncio.run(ev.evaluate_async(vadd, BAD))
        assert r.verdict == "compile_error" and r.reward == -10.0
    with kreward.Evaluator(cache_dir=str(tmp_path), isolated=False, no_device=True) as ev:
        assert ev.pool is None
        assert ev.evaluate(vadd, BAD).verdict == "compile_error"


def test_pools_left_open_are_tracked_for_exit(problem):
    p = kreward.Pool(gpus="none", compile_workers=1)
    assert p in pool_module._live
    p.close()
    assert p not in pool_module._live


def test_sandbox_says_what_is_missing():
    """Pool.sandbox(): the same probe the workers use, a reason exactly where
    Landlock or seccomp is missing, without starting a pool."""
    s = kreward.Pool.sandbox()
    assert s["landlock"] == (s["landlock_abi"] > 0)
    assert bool(s["landlock_why"]) != s["landlock"]
    assert bool(s["seccomp_why"]) != s["seccomp"]


def test_a_compile_only_pool_says_why_it_has_no_gpu(pool, problem, vadd_fast):
    """A candidate that compiles ends not_run with the real reason: what
    this machine lacks (the driver, a device) or what was asked for, never
    the compile worker's internal flag (it said "disabled by
    KR_CONTEXT_NO_DEVICE", a flag no user set)."""
    r = pool.wait(pool.submit(problem, vadd_fast))
    assert r.verdict == "not_run"
    assert "KR_CONTEXT_NO_DEVICE" not in r.message
    with kreward.Context() as ctx:
        machine = ctx.info()["device"].get("why") if not ctx.has_device else None
    assert (machine or 'gpus="none"') in r.message, r.message
    r.close()
