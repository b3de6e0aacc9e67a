"""Lifetimes: children keep their context alive, C frees programs and rewards
before their context whatever order Python drops them in, and the library
tells Python when it stops using a golden callback."""
import gc
import weakref

import pytest

import kreward
from kreward import _lib, core


@pytest.fixture
def frees(monkeypatch):
    """The order of kr_program_free, kr_reward_free, kr_problem_free and
    kr_context_free calls (the real ones still run). Earlier tests' garbage
    is collected first: a Context they left in a cycle, freed by a test's
    own gc.collect(), was recorded as that test's (a CI run saw two context
    frees where the test made one)."""
    gc.collect()
    calls = []

    def recorder(kind, real):
        def free(ptr):
            calls.append(kind)
            real(ptr)
        return staticmethod(free)

    for cls, kind in ((kreward.Program, "program"), (kreward.Reward, "reward"),
                      (kreward.Problem, "problem")):
        monkeypatch.setattr(cls, "_free", recorder(kind, cls._free))
    real_context_free = _lib.fn.context_free
    monkeypatch.setattr(_lib.fn, "context_free", recorder("context", real_context_free).__func__)
    return calls


def test_closed_context_keeps_a_live_program_usable(frees, vadd_fast):
    ctx = kreward.Context(no_device=True)
    prog = ctx.compile(vadd_fast, name="fast.cu")
    ctx.close()
    assert frees == []  # the C context is still there: the program counts on it
    with pytest.raises(ValueError, match="Context is closed"):
        ctx.compile(vadd_fast)
    assert prog.kernels == ["add4"]
    assert prog.info()["kernels"][0]["name"] == "add4"
    prog.close()
    assert frees == ["program", "context"]


def test_children_released_in_any_order(frees, vadd, vadd_fast):
    ctx = kreward.Context(no_device=True)
    prog, reward, problem = ctx.compile(vadd_fast), ctx.reward("makora"), ctx.load_problem(vadd)
    ctx.close()
    reward.close()
    problem.close()
    assert problem.closed and frees == ["reward", "problem"]
    prog.close()
    prog.close()  # twice is harmless
    assert frees == ["reward", "problem", "program", "context"]


def test_problem_methods_work_after_its_context_is_closed(vadd):
    with kreward.Context(no_device=True) as ctx:
        problem = ctx.load_problem(vadd)
    seed = kreward.Problem.case_seed(7, 0)
    assert len(problem.generate(0, 0, seed)) == problem.nbytes(0, 0)
    problem.check_reference()


def test_garbage_collection_frees_children_first(frees, vadd_fast):
    ctx = kreward.Context(no_device=True)
    prog, reward = ctx.compile(vadd_fast), ctx.reward("makora")
    # one cycle holding all three: the collector finalizes them in no set order
    junk = [ctx, prog, reward]
    junk.append(junk)
    prog.cycle = reward.cycle = ctx.cycle = junk
    del ctx, prog, reward, junk
    gc.collect()
    assert sorted(frees[:2]) == ["program", "reward"] and frees[2:] == ["context"]


def test_values_do_not_hold_the_context(frees, vadd_fast):
    ctx = kreward.Context(no_device=True)
    plan = ctx.plan_from_source(vadd_fast)
    report = kreward.Report()
    ctx.close()
    assert frees == ["context"]  # plans and reports are values
    assert plan.kernels == ["add4"] and report.verdict == "none"


def test_golden_destroy_runs_when_the_problem_is_freed(ctx, vadd):
    golden = dict(name="g", dims=["N"], cases=[{"N": 8, "timing": True}],
                  tensors=[{"name": "x", "dtype": "f32", "shape": ["N"], "role": "in"},
                           {"name": "y", "dtype": "f32", "shape": ["N"], "role": "out"}],
                  reference={"golden": True})
    before = len(core._goldens)
    problem = ctx.parse_problem(golden)

    class Callback:
        def __init__(self, problem):
            self.problem = problem  # a callback that refers to its problem: a cycle

        def __call__(self, request):
            pass

    first = Callback(problem)
    problem.set_golden(first)
    assert len(core._goldens) == before + 1
    problem.set_golden(Callback(problem))  # the library destroys the first one's user data
    assert len(core._goldens) == before + 1
    problem.close()  # kr_problem_free calls destroy: the library is done with it
    assert len(core._goldens) == before

    # collected without close(): the cycle through the callback does not keep it alive
    problem = ctx.parse_problem(golden)
    problem.set_golden(Callback(problem))
    alive = weakref.ref(problem)
    del problem, first
    gc.collect()
    assert alive() is None and len(core._goldens) == before


def test_borrowed_report_is_dead_after_the_term(ctx):
    kept = []

    def term(report):
        kept.append(report)
        return report["speedup"]

    r = kreward.Report()
    r.verdict = "passed"
    r["speedup"] = 2.0
    with ctx.reward() as w:
        w.add_python("keep", term)
        assert w.score(r) == 2.0
    with pytest.raises(ValueError, match="closed"):
        kept[0]["speedup"]
