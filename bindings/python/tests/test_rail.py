"""One rail for both kinds (kreward/rail.py): tickets in submission order
and exactly one report each, whatever the kind; ModelNew results scored by
the reward table; GPU turns by kind (no ModelNew lane runs while a kreward
job is in flight, and the reverse); close() answers everything. The C side
is a real Pool that compiles only (no GPU here); the ModelNew side a
scheduler over fake lanes (kernelbench/test_scheduler.py tests its rules)."""
import pathlib
import threading
import time

import pytest

import kreward
from kreward import problems
from kreward.kernelbench.scheduler import Scheduler
from kreward.pool import FREED_MESSAGE
from kreward.rail import Rail

ROOT = pathlib.Path(__file__).resolve().parents[3]
RELU = ROOT / "examples" / "kernelbench" / "level1" / "01_relu.py"
GELU = ROOT / "examples" / "kernelbench" / "level1" / "02_gelu.py"
VADD = ROOT / "examples" / "problems" / "l1_vector_add"


class Lane:
    """A fake GPU lane: a source is a verdict, with what the Runner would
    say of a passing candidate."""

    def __init__(self, rail=None, delay=0.02):
        self.rail, self.delay = rail, delay
        self.overlaps = []

    def evaluate(self, problem, source, next_source=None, options=None):
        if self.rail is not None and self.rail._inflight[problems.KREWARD]:
            self.overlaps.append(source)
        time.sleep(self.delay)
        if source == "pass":
            return {"verdict": "pass", "cases": [{"name": "base"}], "notes": [],
                    "speedup": 2.0, "time_us": 50.0, "baseline_us": 100.0,
                    "torch_fallback": False, "custom_share": 0.9,
                    "batches_us": {"candidate": [49, 50, 51], "baseline": [99, 100, 101]}}
        if source == "fallback":
            return {"verdict": "pass", "cases": [{"name": "base"}], "notes": [], "speedup": 4.0,
                    "time_us": 25.0, "baseline_us": 100.0, "torch_fallback": True}
        if source == "decoy":
            return {"verdict": "pass", "cases": [{"name": "base"}], "notes": [], "speedup": 4.0,
                    "time_us": 25.0, "baseline_us": 100.0, "torch_fallback": False,
                    "custom_share": 0.01, "mostly_torch": True}
        return {"verdict": source, "feedback": f"it was {source}", "cases": [], "notes": []}

    def abort(self):
        pass

    def healthy(self):
        return True

    def close(self):
        pass


@pytest.fixture
def rail_parts(ctx):
    pool = kreward.Pool(gpus="none")
    lanes = {"cuda:0": Lane(), "cuda:1": Lane()}
    rail = Rail(pool, lambda: Scheduler(lanes))
    for lane in lanes.values():
        lane.rail = rail
    yield rail, lanes, ctx.problem(str(VADD / "problem.json"))
    rail.close()


def test_a_mixed_batch_gets_one_report_each_in_order(rail_parts, ctx):
    rail, lanes, vadd = rail_parts
    kb = problems.KernelBenchProblem(str(RELU))
    fast = (VADD / "candidates" / "fast.cu").read_text()
    with ctx.reward("kernelbench") as reward:
        jobs = [dict(problem=kb, source="pass", reward=reward),
                dict(problem=vadd, source=fast, reward=reward),
                dict(problem=kb, source="wrong", reward=reward),
                dict(problem=kb, source="crash", reward=reward),
                dict(problem=vadd, source="__global__ void k( {", reward=reward),
                dict(problem=kb, source="fallback", reward=reward),
                dict(problem=kb, source="decoy", reward=reward)]
        reports = rail.evaluate_batch(jobs)
    verdicts = [r.verdict for r in reports]
    assert verdicts == ["passed", "not_run", "incorrect", "fault", "compile_error", "passed",
                        "passed"]
    # the reward table scores ModelNew reports: 0.5 + 0.25 log2(2); no speed
    # pay without own kernels; a decoy's share of the credit
    assert reports[0].reward == pytest.approx(0.75)
    assert reports[1].reward is None            # not judged: never a number
    assert reports[2].reward == 0 and reports[3].reward == 0
    assert reports[5].reward == pytest.approx(0.5) and "torch_fallback" in reports[5].flags
    assert reports[6].reward == pytest.approx(0.5 + 0.5 * 0.02)
    assert "mostly_torch" in reports[6].flags
    assert reports[0].text("kind") == "kernelbench" and reports[0].text("source") == "pass"
    assert reports[0]["speedup_low"] < 2.0 < reports[0]["speedup_high"]
    # GPU turns: no ModelNew candidate ran while a kreward job was in flight
    assert not any(lane.overlaps for lane in lanes.values())
    for r in reports:
        r.close()


def test_the_kreward_side_waits_for_the_modelnew_side(rail_parts):
    rail, lanes, vadd = rail_parts
    for lane in lanes.values():
        lane.delay = 0.3
    kb = problems.KernelBenchProblem(str(GELU))
    seen = []
    submit = rail.pool._submit_job

    def watched(job):
        seen.append(rail._inflight[problems.KERNELBENCH])
        return submit(job)

    rail.pool._submit_job = watched
    fast = (VADD / "candidates" / "fast.cu").read_text()
    tickets = [rail.submit(kb, "pass"), rail.submit(kb, "pass"), rail.submit(vadd, fast),
               rail.submit(kb, "wrong")]
    got = list(rail.results(timeout=30))
    assert [t for t, _ in got] == tickets
    assert [r.verdict for _, r in got] == ["passed", "passed", "not_run", "incorrect"]
    assert seen == [0]  # the kreward job went in once both ModelNew ones were done


def test_next_and_wait_from_several_threads_hand_out_each_report_once(rail_parts):
    rail, _, _ = rail_parts
    kb = problems.KernelBenchProblem(str(RELU))
    tickets = {rail.submit(kb, "pass" if i % 2 else "wrong") for i in range(24)}
    got, lock = [], threading.Lock()

    def collect():
        while True:
            try:
                t, r = rail.next(timeout=10)
            except LookupError:
                return
            with lock:
                got.append(t)
            r.close()

    threads = [threading.Thread(target=collect) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert sorted(got) == sorted(tickets) and len(got) == len(set(got))


def test_a_python_terms_exception_is_raised_with_its_report(rail_parts, ctx):
    """A reward term of the caller's that raises: the exception comes out of
    the call that collects the report, with the report, as Pool.wait does;
    the other candidates of the batch keep theirs."""
    rail, _, _ = rail_parts

    def broken(report):
        if report.verdict == "passed":
            raise ZeroDivisionError("a term of the caller's")
        return 0.0

    kb = problems.KernelBenchProblem(str(RELU))
    with kreward.Reward(ctx, {"terms": [{"term": "correct", "weight": 1}]}) as reward:
        reward.add_python("broken", broken)
        with pytest.raises(ZeroDivisionError) as info:
            rail.wait(rail.submit(kb, "pass", reward=reward))
        assert info.value.report.verdict == "passed" and info.value.ticket > 0
        with pytest.raises(ZeroDivisionError) as info:
            rail.evaluate_batch([dict(problem=kb, source="wrong", reward=reward),
                                 dict(problem=kb, source="pass", reward=reward)])
        assert [r.verdict for r in info.value.reports] == ["incorrect", "passed"]
        assert info.value.reports[0].reward == 0.0


def test_close_answers_every_pending_ticket(ctx):
    pool = kreward.Pool(gpus="none")

    class Hang(Lane):
        def evaluate(self, *a, **k):
            time.sleep(0.5)
            return {"verdict": "pass", "cases": [], "notes": []}

    rail = Rail(pool, lambda: Scheduler({"cuda:0": Hang()}))
    kb = problems.KernelBenchProblem(str(RELU))
    vadd = ctx.problem(str(VADD / "problem.json"))
    tickets = [rail.submit(kb, "x") for _ in range(3)] + [rail.submit(vadd, "__global__ void k(){}")]
    rail.close()
    reports = [rail.wait(t, 5) for t in tickets]
    assert all(r.verdict == "error" for r in reports)
    assert all(r.message in (FREED_MESSAGE, "the scheduler was closed") for r in reports)
    with pytest.raises(ValueError):
        rail.submit(kb, "pass")


def test_kinds_are_told_apart(tmp_path):
    assert problems.kind_of(str(RELU)) == problems.KERNELBENCH
    assert problems.kind_of(RELU.read_text()) == problems.KERNELBENCH
    assert problems.kind_of(str(VADD / "problem.json")) == problems.KREWARD
    assert problems.kind_of({"name": "x"}) == problems.KREWARD
    assert problems.kind_of('{"name": "x"}') == problems.KREWARD
    names = problems.scan_kernelbench(str(ROOT / "examples" / "kernelbench"))
    assert names["level1/01_relu"] == str(RELU) and names["01_relu"] == str(RELU)
    assert problems.kind_of("level1/01_relu", names) == problems.KERNELBENCH
    # a text sent inline is kept as one file per content
    a = problems.kernelbench(RELU.read_text(), names={}, source_folder=str(tmp_path))
    b = problems.kernelbench(RELU.read_text(), names={}, source_folder=str(tmp_path))
    assert a.path == b.path and a.key == b.key and a.name == "inline_relu_activation"
    assert len(list(tmp_path.iterdir())) == 1
    with pytest.raises(problems.ProblemError):
        problems.kernelbench("nope/missing.py", names={})
    with pytest.raises(problems.ProblemError):
        problems.KernelBenchProblem(str(VADD / "problem.json"))
