"""The errcheck: negative statuses become KrewardError with the context's
text; statuses that are results are not errors; Python callback exceptions
come back out of the call that ran them."""
import ctypes
import re

import pytest

import kreward
from kreward import Status, _lib


def test_parse_error_says_file_line_column(ctx):
    with pytest.raises(kreward.KrewardError) as e:
        ctx.parse_problem('{"name": "p", "dims": ["N"],\n "cases": [{"N": 4}],\n'
                          ' "tensors": [{"name": "y", "dtype": "f33"', name="bad.json")
    assert e.value.code == Status.EPARSE == -7 and e.value.name == "KR_EPARSE"
    assert re.search(r"bad\.json:3:\d+", e.value.message), e.value.message
    assert str(e.value).startswith("KR_EPARSE: bad.json:3:")


def test_load_error_names_the_file(ctx, tmp_path):
    missing = tmp_path / "nope.json"
    with pytest.raises(kreward.KrewardError) as e:
        ctx.load_problem(str(missing))
    assert e.value.code in (Status.EIO, Status.ENOTFOUND)
    assert "nope.json" in e.value.message


def test_call_without_a_context_gets_the_status_text():
    r = kreward.Report()
    with pytest.raises(kreward.KrewardError) as e:
        _lib.fn.report_set_verdict(r.handle, 99)
    assert e.value.code == Status.EINVAL
    assert e.value.message == _lib.text(_lib.fn.strerror(Status.EINVAL))


def test_reward_errors_carry_their_context_s_text(ctx):
    w = ctx.reward()
    with pytest.raises(kreward.KrewardError) as e:
        w.add("no_such_term")
    assert e.value.code == Status.ENOTFOUND
    assert "unknown term 'no_such_term'" in e.value.message
    with pytest.raises(kreward.KrewardError) as e:
        w.add("correct", weight=float("inf"))
    assert "must be finite" in e.value.message


def test_compile_error_detail_is_the_log(ctx):
    with pytest.raises(kreward.KrewardError) as e:
        ctx.compile('extern "C" __global__ void k(float* x) { x[0] = 1 }', name="bad.cu")
    assert e.value.code == Status.ECOMPILE
    assert "bad.cu(1): error" in e.value.detail


def test_results_that_are_not_errors(ctx, vadd, vadd_fast):
    r = kreward.Report()
    assert r.get("speedup") is None  # kr_report_get's KR_ENOTFOUND is a KeyError
    with pytest.raises(KeyError):
        r["speedup"]
    problem, prog = ctx.load_problem(vadd), ctx.compile(vadd_fast)
    plan = ctx.plan_from_source(vadd_fast)
    # verify without a GPU: KR_ENODEVICE with a not_run report is an outcome
    report = ctx.verify(problem, prog, plan, seed=1)
    assert report.verdict == "not_run" and "NVIDIA GPU" in report.message
    # benchmark writes no verdict: without a GPU it is an error, with the report
    with pytest.raises(kreward.KrewardError) as e:
        ctx.benchmark(problem, prog, plan)
    assert e.value.code == Status.ENODEVICE and e.value.report is not None
    # sanity needs a GPU too
    with pytest.raises(kreward.KrewardError) as e:
        problem.sanity()
    assert e.value.code == Status.ENODEVICE


def test_python_term_exception_is_raised_from_the_call(ctx):
    r = kreward.Report()
    r.verdict = "passed"
    r["speedup"] = 0.0
    w = ctx.reward()
    w.add_python("inverse", lambda report: 1 / report["speedup"])
    with pytest.raises(ZeroDivisionError) as e:
        w.score(r)
    # chained to what the library said about it
    assert isinstance(e.value.__cause__, kreward.KrewardError)
    assert e.value.__cause__.code == Status.EPLUGIN
    assert "term 'inverse' failed: ZeroDivisionError" in e.value.__cause__.message
    # the exception was handed over once: the next call is clean
    r["speedup"] = 4.0
    assert w.score(r) == 0.25


def test_handles_of_another_context_are_refused(vadd, vadd_fast):
    with kreward.Context(no_device=True) as a, kreward.Context(no_device=True) as b:
        prog = a.compile(vadd_fast)
        plan, problem = b.plan_from_source(vadd_fast), b.load_problem(vadd)
        with pytest.raises(kreward.KrewardError) as e:
            b.evaluate_program(problem, prog, plan)
        assert e.value.code == Status.EINVAL and "another context" in e.value.message
        assert e.value.report.verdict == "error"
        with pytest.raises(kreward.KrewardError) as e:
            b.evaluate(problem, vadd_fast, reward=a.reward("makora"))
        assert e.value.code == Status.EINVAL


def test_evaluator_turns_environment_errors_into_fallback(tmp_path, vadd, vadd_fast):
    # in-process: kr_evaluate refuses a reward of another context
    with kreward.Evaluator(reward=None, cache_dir=str(tmp_path), fallback=-1.5,
                           isolated=False, no_device=True) as ev:
        with kreward.Context(no_device=True) as other:
            ev.reward = other.reward("makora")  # of another context: the step fails
            report = ev.evaluate(vadd, vadd_fast)
            ev.reward.close()
        assert report.verdict == "error" and "another context" in report.message
        assert ev.score_of(report) == -1.5


BROKEN_REFERENCE = {
    "name": "broken", "dims": ["N"], "cases": [{"N": 1000}],
    "tensors": [{"name": "x", "dtype": "f32", "shape": ["N"], "role": "in"},
                {"name": "y", "dtype": "f32", "shape": ["N"], "role": "out"}],
    "reference": {"cuda": "// kreward: launch k grid=(cdiv(N,256)) block=(256) args=(x, y, N)\n"
                          "extern \"C\" __global__ void k(const float* x, float* y, int n) "
                          "{ y[0] = }"}}
Y_IS_2X = ("// kreward: launch k grid=(cdiv(N,256)) block=(256) args=(x, y, N)\n"
           "extern \"C\" __global__ void k(const float* x, float* y, int n) {"
           " int i = blockIdx.x * 256 + threadIdx.x; if (i < n) y[i] = 2 * x[i]; }")


@pytest.mark.parametrize("isolated", [True, False])
def test_a_broken_reference_is_an_error_scoring_the_fallback(tmp_path, isolated):
    # not the candidate's doing: verdict error, unscored, whichever path
    with kreward.Evaluator(reward="makora", cache_dir=str(tmp_path), fallback=-1.5,
                           isolated=isolated, no_device=True) as ev:
        report = ev.evaluate(BROKEN_REFERENCE, Y_IS_2X)
        assert report.verdict == "error"
        assert "the problem's reference is broken" in report.message
        assert report.reward is None and ev.score_of(report) == -1.5


def test_status_helper_reads_the_context_of_a_bare_pointer(ctx):
    # a bare pointer in a "context" position still gets the context's text
    out = ctypes.c_void_p()
    with pytest.raises(kreward.KrewardError) as e:
        _lib.fn.problem_parse(ctypes.byref(out), ctypes.c_void_p(ctx._ref.ptr), b"{", 1, b"x.json",
                              None)
    assert "x.json:1:" in e.value.message
