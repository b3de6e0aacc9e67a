"""The trainer adapters through the real library: the Evaluator and its
pool, real compiles (NVRTC) and real problems. Without a GPU the pool only
compiles: compile errors and missing code are judged (makora: -10), a
candidate that compiles cannot be run and raises EvaluationUnavailable
(never a silent 0.0). With -m gpu on a GPU machine, every adapter end to end
through the GPU pool (tests marked gpu)."""
import asyncio
import os
import subprocess
import sys
import textwrap
import types

import pytest

import kreward
from kreward import trainers
from kreward.trainers import EvaluationUnavailable
from conftest import EXAMPLES, has_gpu
from trainer_fakes import Sample

VADD = EXAMPLES / "l1_vector_add"
BAD = "```cuda\nextern \"C\" __global__ void k(float* x) { x[0] = }\n```"
NO_CODE = "Sorry, I can't help with that."


def fenced(path):
    return f"```cuda\n{path.read_text()}\n```"


GOOD = fenced(VADD / "candidates" / "fast.cu")
WRONG = fenced(VADD / "candidates" / "wrong.cu")
REFERENCE = fenced(VADD / "reference.cu")
FAULT = GOOD.replace("c4[i] = make_float4", "c4[i + (1ll << 40)] = make_float4")
PROMPT = f"Make this kernel faster:\n{REFERENCE}\n"
COMPARED = f"{GOOD}\nFor comparison, the original kernel:\n{REFERENCE}"


def adapters(vadd):
    """(name, f(completions) -> scores) for every adapter, each called the
    way its trainer calls it (test_trainers.py cites the call sites)."""
    args = types.SimpleNamespace(reward_key=None, eval_reward_key=None)
    return [
        ("verl", lambda cs: [trainers.compute_score("kernels", c, vadd,
                                                    extra_info={"prompt": PROMPT})["score"]
                             for c in cs]),
        ("verl_batch", lambda cs: [r["score"] for r in trainers.compute_score_batch(
            ["kernels"] * len(cs), cs, [vadd] * len(cs), [{"prompt": PROMPT}] * len(cs))]),
        ("verl_async", lambda cs: [asyncio.run(trainers.compute_score_async(
            "kernels", c, vadd, extra_info={"prompt": PROMPT}))["score"] for c in cs]),
        ("trl", lambda cs: trainers.make_trl_reward(problem=vadd)(
            prompts=[PROMPT] * len(cs), completions=cs, completion_ids=None)),
        ("trl_async", lambda cs: asyncio.run(trainers.make_trl_reward_async(problem=vadd)(
            prompts=[PROMPT] * len(cs), completions=cs, completion_ids=None))),
        ("openrlhf", lambda cs: [float(x) for x in trainers.reward_func(
            ["<s>" + PROMPT + c for c in cs], [PROMPT] * len(cs), [vadd] * len(cs))["rewards"]]),
        ("slime", lambda cs: [asyncio.run(trainers.custom_rm(
            args, Sample(prompt=PROMPT, response=c, label=vadd))) for c in cs]),
        ("slime_list", lambda cs: asyncio.run(trainers.custom_rm(
            args, [Sample(prompt=PROMPT, response=c, label=vadd) for c in cs]))),
    ]


# ---- without a GPU: a compile-only pool ----

@pytest.fixture(params=["isolated", "in_process"])
def compile_only(request, tmp_path):
    isolated = request.param == "isolated"
    ev = kreward.Evaluator(reward="makora", cache_dir=str(tmp_path), isolated=isolated,
                           no_device=True, pool_options={"compile_workers": 2})
    trainers.set_evaluator(ev)
    yield ev
    trainers.set_evaluator(None)
    ev.close()


def test_compile_errors_and_missing_code_are_judged(compile_only, vadd):
    for name, f in adapters(vadd):
        assert f([BAD, NO_CODE, REFERENCE]) == [-10.0] * 3, name
    out = trainers.compute_score("kernels", BAD, vadd)
    assert out["verdict"] == "compile_error" and "error" in out["feedback"]


def test_a_candidate_that_cannot_run_is_never_a_score(compile_only, vadd):
    for name, f in adapters(vadd):
        with pytest.raises(EvaluationUnavailable, match="could not be run"):
            f([GOOD])


def test_a_closed_pool_is_never_a_score(tmp_path, vadd):
    ev = kreward.Evaluator(reward="makora", cache_dir=str(tmp_path), no_device=True,
                           pool_options={"compile_workers": 1})
    trainers.set_evaluator(ev)
    try:
        ev.pool.close()
        for name, f in adapters(vadd):
            with pytest.raises(EvaluationUnavailable, match="closed"):
                f([GOOD])
    finally:
        trainers.set_evaluator(None)
        ev.close()


def test_the_default_evaluator_without_a_gpu_fails_loudly(monkeypatch, vadd):
    if has_gpu():
        pytest.skip("a GPU is visible: the default evaluator starts a GPU pool here")
    monkeypatch.delenv("KREWARD_GPUS", raising=False)
    monkeypatch.delenv("KREWARD_IN_PROCESS", raising=False)
    trainers.set_evaluator(None)
    try:
        for name, f in adapters(vadd):
            with pytest.raises(EvaluationUnavailable, match="KREWARD_GPUS"):
                f([GOOD])
    finally:
        trainers.set_evaluator(None)


def test_the_default_evaluator_compile_only_when_asked(monkeypatch, vadd):
    monkeypatch.setenv("KREWARD_GPUS", "none")
    trainers.set_evaluator(None)
    try:
        assert trainers.compute_score("k", BAD, vadd)["score"] == -10.0
        with pytest.raises(EvaluationUnavailable):
            trainers.compute_score("k", GOOD, vadd)
    finally:
        ev = trainers.get_evaluator()
        trainers.set_evaluator(None)
        ev.close()


# ---- on a GPU: every adapter through the GPU pool ----

@pytest.fixture(scope="module")
def gpu_pool(tmp_path_factory):
    ev = kreward.Evaluator(reward="makora", cache_dir=str(tmp_path_factory.mktemp("cache")),
                           require_gpu=True)
    trainers.set_evaluator(ev)
    yield ev
    trainers.set_evaluator(None)
    ev.close()


@pytest.mark.gpu
@pytest.mark.parametrize("name", [a[0] for a in adapters("x")])
def test_every_adapter_through_the_gpu_pool(gpu_pool, vadd, name):
    f = dict(adapters(vadd))[name]
    good, wrong, fault, bad, none, compared, copied = f(
        [GOOD, WRONG, FAULT, BAD, NO_CODE, COMPARED, REFERENCE])
    print(name, good, wrong, fault, bad, none, compared, copied)
    assert good > 10, good                      # passed, faster than the reference
    assert wrong == -5.0 and fault == -5.0      # incorrect, fault: the candidate's doing
    assert bad == -10.0 and none == -10.0       # compile error, no code
    assert compared == pytest.approx(good, rel=0.5) and compared > 10  # graded on its own kernel
    assert copied == -10.0                      # the prompt's kernel is never the answer
    assert gpu_pool.pool.status()["jobs_finished"] > 0


@pytest.mark.gpu
def test_the_default_evaluator_on_a_gpu(monkeypatch, vadd):
    monkeypatch.delenv("KREWARD_GPUS", raising=False)
    monkeypatch.delenv("KREWARD_IN_PROCESS", raising=False)
    trainers.set_evaluator(None)
    try:
        out = trainers.compute_score("kernels", GOOD, vadd)
        assert out["verdict"] == "passed" and out["score"] > 10 and out["speedup"] > 1
        assert trainers.get_evaluator().pool.status()["gpus"] >= 1
    finally:
        ev = trainers.get_evaluator()
        trainers.set_evaluator(None)
        ev.close()


@pytest.mark.gpu
def test_in_process_a_fault_is_judged_then_evaluation_stops_loudly(vadd):
    # in its own process: the fault poisons that process's CUDA context
    script = textwrap.dedent(f"""
        import asyncio, sys
        sys.path.insert(0, {str(EXAMPLES.parents[1] / "bindings" / "python")!r})
        import kreward
        from kreward import trainers
        ev = kreward.Evaluator(reward="makora", isolated=False)
        trainers.set_evaluator(ev)
        out = trainers.compute_score("k", {FAULT!r}, {vadd!r})
        print("first", out["verdict"], out["score"])
        try:
            trainers.compute_score("k", {GOOD!r}, {vadd!r})
            print("second scored")
        except trainers.EvaluationUnavailable as e:
            print("second unavailable:", e)
    """)
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=300, env=dict(os.environ))
    print(run.stdout, run.stderr)
    assert "first fault -5.0" in run.stdout
    assert "second unavailable:" in run.stdout and "earlier fault" in run.stdout
