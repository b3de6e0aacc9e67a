"""The ModelNew path's baseline memo (baseline_memo.py): the agreement rule
and its bookkeeping on their own, and on the CPU Runner how many baseline
batches an evaluation times with it (fewer once a clean evaluation of the
same schedule left samples; the full schedule when the fresh ones disagree,
the worker was replaced, or the evaluation before was flagged)."""
import textwrap

import pytest

torch = pytest.importorskip("torch", reason="the ModelNew runner needs torch")

from kreward.kernelbench import baseline_memo, import_problem  # noqa: E402
from kreward.kernelbench.baseline_memo import FRESH, MAX_AGE_S, BaselineMemo, MemoUse, agrees, tolerance  # noqa: E402
from kreward.kernelbench.evaluation import Evaluation  # noqa: E402
from kreward.kernelbench.runner import Runner  # noqa: E402
from kreward.kernelbench.worker_process import WorkerProcess  # noqa: E402

# small, so an evaluation takes seconds on two cores (the corpus' relu takes
# ~0.3 s a call there, and a minute an evaluation: past the memo's max age)
PROBLEM = textwrap.dedent("""
    import torch
    import torch.nn as nn


    class Model(nn.Module):
        def forward(self, x):
            return torch.relu(x)


    def get_inputs():
        return [torch.randn(256, 256)]


    def get_init_inputs():
        return []
""")


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


# ---- the rule

def test_fresh_batches_agree_within_the_floor_of_a_quiet_memo():
    memo = [100.0, 100.2, 99.9, 100.1, 99.8]  # spread ~0.2 %: the 3 % floor
    assert tolerance(memo) == pytest.approx(0.03)
    assert agrees(memo, [102.9, 102.5, 90.0])      # median 102.5: 2.5 % off
    assert agrees(memo, [97.1, 97.2, 120.0])       # median 97.2: below by 2.8 %
    assert not agrees(memo, [103.5, 103.2, 103.4])  # 3.4 % off
    assert not agrees(memo, [96.5, 96.0, 96.9])
    assert not agrees(memo, []) and not agrees([], [100.0])


def test_the_tolerance_is_three_spreads_clamped_to_three_and_five_percent():
    # spread 1.25 % (stdev / mean): 3.75 %
    middling = [98.75, 101.25] * 4
    assert baseline_memo.spread(middling) == pytest.approx(0.01336, rel=1e-3)
    assert tolerance(middling) == pytest.approx(3 * baseline_memo.spread(middling))
    assert agrees(middling, [103.9] * 3) and not agrees(middling, [104.2] * 3)
    # a noisy memo (spread 10 %) allows 5 %, never more
    noisy = [90.0, 110.0] * 4
    assert tolerance(noisy) == pytest.approx(0.05)
    assert agrees(noisy, [104.9] * 3) and not agrees(noisy, [105.2] * 3)
    assert agrees(noisy, [95.1] * 3) and not agrees(noisy, [94.8] * 3)


# ---- the bookkeeping

def test_a_memo_older_than_its_max_age_is_not_used():
    clock = Clock()
    memo = BaselineMemo(clock)
    memo.add("k", [1.0, 2.0])
    clock.now += MAX_AGE_S
    assert memo.get("k") == ([1.0, 2.0], None)
    clock.now += 0.5
    samples, why = memo.get("k")
    assert samples is None and "old" in why
    # added to again, it starts from the new samples: the old ones are gone
    memo.add("k", [3.0])
    assert memo.get("k") == ([3.0], None)
    # and an addition makes it young again
    clock.now += 20
    memo.add("k", [4.0])
    clock.now += 20
    assert memo.get("k") == ([3.0, 4.0], None)


def test_the_memo_is_bounded_and_forgets_per_key():
    clock = Clock()
    memo = BaselineMemo(clock)
    memo.add("k", range(baseline_memo.MAX_SAMPLES + 5))
    assert memo.get("k")[0] == [float(x) for x in range(5, baseline_memo.MAX_SAMPLES + 5)]  # the most recent
    for i in range(baseline_memo.MAX_KEYS):
        clock.now += 0.1
        memo.add(("other", i), [1.0])
    assert len(memo) == baseline_memo.MAX_KEYS and memo.get("k")[0] is None  # the least recently added to went
    memo.forget(("other", 3))
    assert memo.get(("other", 3))[0] is None and memo.get(("other", 4))[0] == [1.0]
    memo.clear()
    assert len(memo) == 0


def test_a_use_times_the_full_schedule_without_a_usable_memo():
    memo = BaselineMemo(Clock())
    off = MemoUse(None, "k", 5)
    assert not off.enough([1.0] * 5) and off.record([1.0] * 5)["why"].startswith("off")
    memo.add("k", [10.0] * 4)
    few = MemoUse(memo, "k", 5)  # 4 samples: fewer than the schedule's 5 batches
    assert not any(few.enough([10.0] * i) for i in range(1, 6)) and "fewer" in few.why
    assert not MemoUse(memo, "other", 5).enough([10.0] * 3)
    short = MemoUse(memo, "k", FRESH)  # nothing to save: the schedule is the fresh batches
    assert not short.enough([10.0] * FRESH) and "no more than" in short.why


def test_a_use_stops_at_the_fresh_batches_when_they_agree():
    memo = BaselineMemo(Clock())
    memo.add("k", [10.0, 10.1, 9.9, 10.0, 10.05])
    use = MemoUse(memo, "k", 5)
    assert not use.enough([10.0]) and not use.enough([10.0, 10.1])
    wall = [10.0, 10.1, 10.05]
    assert use.enough(wall)
    assert sorted(use.samples(wall)) == sorted(wall + [10.0, 10.1, 9.9, 10.0, 10.05])
    assert use.record(wall) == {"used": True, "compared": True, "fresh": 3, "memo": 5, "why": use.why}
    assert use.note() is None
    # the memo's most recent samples stand in for the 2 batches not timed
    assert use.stand_ins(wall) == [10.0, 10.05]
    use.share(wall, clean=True)
    assert len(memo.get("k")[0]) == 8


def test_the_report_counts_the_memo_as_the_c_path_does():
    """baseline_shared_samples, and speedup_low/high over as many baseline
    batches as the schedule has (the stand-ins with the fresh ones)."""
    from kreward.kernelbench.report import RESOLUTION, speedup_interval, to_report
    result = {"verdict": "pass", "time_us": 10.0, "baseline_us": 20.0, "speedup": 2.0, "cases": [],
              "batches_us": {"candidate": [10.0, 10.0], "baseline": [20.0, 21.0], "baseline_memo": [18.0]},
              "baseline_memo": {"used": True, "compared": True, "fresh": 2, "memo": 7, "why": "agreed"}}
    low, high = speedup_interval(result)
    assert low == pytest.approx(1.8 * (1 - RESOLUTION)) and high == pytest.approx(2.1 * (1 + RESOLUTION))
    r = to_report(result)
    try:
        assert r["baseline_shared_samples"] == 7
    finally:
        r.close()


def test_a_disagreement_forgets_the_memo_and_adds_nothing():
    memo = BaselineMemo(Clock())
    memo.add("k", [10.0] * 5)
    use = MemoUse(memo, "k", 5)
    wall = [11.0, 11.0, 11.0]
    assert not use.enough(wall)
    assert memo.get("k")[0] is None  # forgotten at once
    wall += [11.0, 11.0]
    assert not use.enough(wall)  # the rest of the schedule is timed
    assert use.samples(wall) == wall
    rec = use.record(wall)
    assert rec["used"] is False and rec["compared"] is True and rec["fresh"] == 5 and rec["memo"] == 0
    assert "10.0%" in rec["why"] and "forgotten" in use.note()
    use.share(wall, clean=True)
    assert memo.get("k")[0] is None  # (they may be what disturbed)


def test_only_a_clean_evaluation_adds_samples():
    memo = BaselineMemo(Clock())
    MemoUse(memo, "k", 5).share([1.0] * 5, clean=False)
    assert memo.get("k")[0] is None
    MemoUse(memo, "k", 5).share([1.0] * 5, clean=True)
    assert memo.get("k")[0] == [1.0] * 5


# ---- on the CPU Runner

RELU = ("import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n"
        "        return x.clamp_min(0)\n")
BATCHES, CHECKS = 5, 2


@pytest.fixture(scope="module")
def problem(tmp_path_factory):
    d = tmp_path_factory.mktemp("kb_memo")
    (d / "relu_256.py").write_text(PROBLEM)
    return import_problem(str(d / "relu_256.py")), d


def runner_for(problem, **kw):
    imp, d = problem
    return Runner(imp, "cpu", cache_dir=str(d / "ext"), timeout_s=120, call_timeout_s=30, spare=False, **kw)


@pytest.fixture(scope="module")
def shared_runner(problem):
    with runner_for(problem) as r:
        yield r


@pytest.fixture
def runner(shared_runner):
    """The module's Runner (its baseline worker kept between tests: a start
    costs seconds here), its memo empty."""
    shared_runner._processes.baseline_memo.clear()
    return shared_runner


@pytest.fixture
def baseline_ops(monkeypatch):
    """The ops of every request the Runner's baseline worker gets, per
    evaluation: a list of lists (call .new() before each evaluation)."""
    class Log(list):
        processes = None

        def new(self, runner):
            self.processes = runner._processes
            self.append([])

    log = Log()

    def logging(real):
        def logged(self, obj, timeout_s, max_payload=None):
            if log and log.processes is not None and self is log.processes.baseline:
                log[-1].append(obj["op"])
            return real(self, obj, timeout_s, max_payload)
        return logged
    monkeypatch.setattr(WorkerProcess, "request", logging(WorkerProcess.request))
    monkeypatch.setattr(WorkerProcess, "request_timed", logging(WorkerProcess.request_timed))
    return log


@pytest.fixture
def patient(monkeypatch):
    """A memo kept for ten minutes: on a shared two-core machine an
    evaluation can take longer than MAX_AGE_S (the age is tested above)."""
    monkeypatch.setattr(baseline_memo, "MAX_AGE_S", 600.0)


def evaluate(runner, log, **kw):
    log.new(runner)
    # fixed calls: the schedule (the memo's key) does not follow the
    # machine's load from one evaluation to the next
    res = runner.evaluate(RELU, seed=5, verify_seeds=1, batches=BATCHES, calls=4, checks=CHECKS, **kw)
    assert res["verdict"] == "pass" and res["baseline_us"] > 0, res
    return res


def timed_batches(ops):
    """The baseline's timed batches in one evaluation's requests: its go
    requests less the warmup's."""
    return ops.count("go") - 1


def test_the_second_candidate_times_fewer_baseline_batches(runner, baseline_ops, patient, monkeypatch):
    """The fresh batches agree here by construction (the tolerance without
    bound: a shared two-core machine's batches can differ by far more than
    5 %, 14x in a CI run at 60dce36, the rule itself is tested above); what
    is tested is how much is timed."""
    monkeypatch.setattr(baseline_memo, "AGREE_FLOOR", float("inf"))
    monkeypatch.setattr(baseline_memo, "AGREE_CEILING", float("inf"))
    first = evaluate(runner, baseline_ops)
    assert first["baseline_memo"]["used"] is False and first["baseline_memo"]["compared"] is False
    assert timed_batches(baseline_ops[-1]) == BATCHES == first["baseline_memo"]["fresh"]
    assert baseline_ops[-1].count("launch") == 1 and baseline_ops[-1].count("fetch") == CHECKS * BATCHES
    second = evaluate(runner, baseline_ops)
    memo = second["baseline_memo"]
    assert memo == {"used": True, "compared": True, "fresh": FRESH, "memo": BATCHES, "why": memo["why"]}
    ops = baseline_ops[-1]
    # fewer batches, each as checked, after the same launch probe and warmup
    assert timed_batches(ops) == FRESH and ops.count("fetch") == CHECKS * FRESH
    assert ops.count("launch") == 1 and ops.count("prepare") == FRESH + 1
    assert len(second["batches_us"]["baseline"]) == FRESH
    assert len(second["batches_us"]["baseline_memo"]) == BATCHES - FRESH
    # the workers' own event times of the batches timed here, beside them
    assert len(second["batches_event_us"]["baseline"]) == FRESH
    assert len(second["batches_event_us"]["candidate"]) == len(second["batches_us"]["candidate"])
    assert all(x > 0 for x in second["batches_event_us"]["baseline"]), second["batches_event_us"]
    assert "baseline_memo" not in first["batches_us"]
    # the baseline's median is over the fresh batches and the memo's
    both = sorted(first["batches_us"]["baseline"] + second["batches_us"]["baseline"])
    assert second["baseline_us"] == pytest.approx(both[len(both) // 2], abs=2e-3)
    # the fresh ones joined the memo
    assert evaluate(runner, baseline_ops)["baseline_memo"]["memo"] == BATCHES + FRESH


def test_a_disagreeing_memo_falls_back_to_the_full_schedule(runner, baseline_ops, patient):
    evaluate(runner, baseline_ops)
    memo = runner._processes.baseline_memo
    (key, entry), = memo._entries.items()
    entry[1] = type(entry[1])([x * 1000 for x in entry[1]], maxlen=entry[1].maxlen)  # another GPU state (far past what a loaded CPU drifts: 2.5x seen)
    res = evaluate(runner, baseline_ops)
    assert res["baseline_memo"]["used"] is False and res["baseline_memo"]["compared"] is True
    assert timed_batches(baseline_ops[-1]) == BATCHES and res["baseline_memo"]["fresh"] == BATCHES
    assert any(n.startswith("baseline memo not used") for n in res["notes"]), res["notes"]
    assert memo.get(key)[0] is None  # forgotten, and the disagreeing batches not added
    assert evaluate(runner, baseline_ops)["baseline_memo"]["why"] == "no samples for this schedule yet"


def test_a_replaced_baseline_worker_starts_without_a_memo(runner, baseline_ops):
    evaluate(runner, baseline_ops)
    assert len(runner._processes.baseline_memo) == 1
    runner._processes.baseline.end()  # died between evaluations: start_baseline replaces it
    res = evaluate(runner, baseline_ops)
    assert res["baseline_memo"]["why"] == "no samples for this schedule yet"
    assert timed_batches(baseline_ops[-1]) == BATCHES
    runner._processes.end_baseline()
    assert len(runner._processes.baseline_memo) == 0
    evaluate(runner, baseline_ops)
    runner.close()
    assert len(runner._processes.baseline_memo) == 0


def test_a_flagged_evaluation_leaves_no_samples(runner, baseline_ops, monkeypatch):
    """A candidate whose clock was off (timing_mismatch: still a pass, no
    speed credit) may have disturbed the baseline after it."""
    time_candidate = Evaluation._time_candidate

    def mismatched(self, *args):
        schedule = time_candidate(self, *args)
        args[-1]["timing_mismatch"] = True
        return schedule
    monkeypatch.setattr(Evaluation, "_time_candidate", mismatched)
    res = evaluate(runner, baseline_ops)
    assert res["timing_mismatch"] is True and len(runner._processes.baseline_memo) == 0
    monkeypatch.setattr(Evaluation, "_time_candidate", time_candidate)
    evaluate(runner, baseline_ops)
    assert len(runner._processes.baseline_memo) == 1


def test_an_evaluation_can_leave_the_memo_alone(runner, baseline_ops, patient):
    """evaluate(baseline_memo=False), as the "precise" preset asks: the
    full schedule, and nothing added."""
    from kreward.kernelbench.lanes import PRESETS
    assert PRESETS["precise"]["baseline_memo"] is False
    evaluate(runner, baseline_ops)
    (key, entry), = runner._processes.baseline_memo._entries.items()
    res = evaluate(runner, baseline_ops, baseline_memo=False)
    assert res["baseline_memo"]["why"] == "off (evaluate(baseline_memo=False))"
    assert timed_batches(baseline_ops[-1]) == BATCHES and len(entry[1]) == BATCHES


def test_the_memo_can_be_switched_off(problem, baseline_ops):
    with runner_for(problem, baseline_memo=False) as r:
        for _ in range(2):
            res = evaluate(r, baseline_ops)
            assert res["baseline_memo"]["used"] is False and res["baseline_memo"]["why"].startswith("off")
            assert timed_batches(baseline_ops[-1]) == BATCHES
        assert r._processes.baseline_memo is None
