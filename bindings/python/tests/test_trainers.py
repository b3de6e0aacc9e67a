"""Trainer adapters, called the way each trainer calls them, through the
default isolated evaluator (a compile-only pool of worker processes) and the
in-process one. On the CPU the valid candidates are compiled and checked but
cannot be judged: they score the fallback (0.0); compile errors and missing
code are judged (makora: -10)."""
import asyncio
import types

import pytest

import kreward
from kreward import trainers

GOOD = None  # filled from the example


@pytest.fixture(autouse=True, params=["isolated", "in_process"])
def evaluator(request, tmp_path, vadd_fast):
    global GOOD
    GOOD = f"I vectorized it:\n```cuda\n{vadd_fast}\n```\nThis is faster."
    isolated = request.param == "isolated"
    # no_device: the same outcomes on a GPU machine (compile and check only)
    ev = kreward.Evaluator(reward="makora", cache_dir=str(tmp_path), isolated=isolated,
                           no_device=True, pool_options={"compile_workers": 2})
    assert (ev.pool is not None) == isolated
    trainers.set_evaluator(ev)
    yield ev
    trainers.set_evaluator(None)
    if isolated:  # every candidate went to the worker processes
        assert ev.pool.status()["jobs_finished"] > 0
    ev.close()


BAD = "```cuda\nextern \"C\" __global__ void k(float* x) { x[0] = }\n```"
NONE = "Sorry, I can't help with that."


def test_verl(vadd):
    out = trainers.compute_score("kernels", GOOD, vadd, extra_info={"index": 3})
    assert out["score"] == 0.0 and out["verdict"] == "not_run"
    out = trainers.compute_score("kernels", BAD, vadd)
    assert out["score"] == -10 and out["verdict"] == "compile_error"
    assert "error" in out["feedback"]
    batch = trainers.compute_score_batch(["k"] * 3, [GOOD, BAD, NONE], [vadd] * 3,
                                         [None, {"problem": vadd}, None])
    assert [b["verdict"] for b in batch] == ["not_run", "compile_error", "compile_error"]
    assert "no code found" in batch[2]["feedback"]


def test_trl(vadd):
    f = trainers.make_trl_reward(problem=vadd)
    assert f(prompts=["p"] * 3, completions=[GOOD, BAD, NONE], completion_ids=[[1], [2], [3]]) == \
        [0.0, -10.0, -10.0]
    conv = [[{"role": "assistant", "content": BAD}], [{"role": "assistant", "content": GOOD}]]
    g = trainers.make_trl_reward()
    assert g(prompts=["p", "q"], completions=conv, completion_ids=None, problem=[vadd, vadd]) == \
        [-10.0, 0.0]
    with pytest.raises(ValueError):
        g(prompts=["p"], completions=[GOOD], completion_ids=None)


def test_openrlhf(vadd):
    prompts = ["Write a kernel.\n", "Write a kernel.\n"]
    queries = [prompts[0] + GOOD, prompts[1] + BAD]
    out = trainers.reward_func(queries, prompts, [vadd, vadd])
    assert list(map(float, out["rewards"])) == [0.0, -10.0]
    assert out["extra_logs"]["passed"] == [0.0, 0.0]


def test_slime(vadd):
    s1 = types.SimpleNamespace(response=BAD, label=vadd, metadata={})
    s2 = types.SimpleNamespace(response=GOOD, label=None, metadata={"problem": vadd})
    assert asyncio.run(trainers.custom_rm(None, s1)) == -10.0
    assert asyncio.run(trainers.batched_custom_rm(None, [s1, s2])) == [-10.0, 0.0]
