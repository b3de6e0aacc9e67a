"""ModelNew candidates through the front door (kreward.Evaluator), on the CPU
with a real lane: the problem sent as its text, the candidates as
completions or sources, mixed with a kreward problem in one batch; every
candidate one kreward.Report with the library's verdict, scored by the
reward table. (The GPU's version, with CUDA and Triton candidates, is
test_kernelbench_gpu.py's; the rules of the scheduler are
test_scheduler.py's.)"""
import pathlib

import pytest

torch = pytest.importorskip("torch", reason="ModelNew candidates run on torch")

import kreward  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[4]
VADD = ROOT / "examples" / "problems" / "l1_vector_add"

TINY = '''import torch
import torch.nn as nn


class Model(nn.Module):
    """Scaled ReLU."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.relu(x) * 2.0


batch_size = 64
dim = 256


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
'''

HONEST = ("import torch\nclass ModelNew(torch.nn.Module):\n"
          "    def forward(self, x):\n        return x.clamp_min(0) * 2.0\n")
WRONG = HONEST.replace("* 2.0", "* 2.5")
CRASH = ("import os, torch\nclass ModelNew(torch.nn.Module):\n"
         "    def forward(self, x):\n        os._exit(3)\n")
HANGS_AT_IMPORT = "import time\ntime.sleep(3600)\nclass ModelNew: pass\n"


@pytest.fixture(scope="module")
def ev(tmp_path_factory):
    cache = tmp_path_factory.mktemp("kb")
    with kreward.Evaluator(reward="kernelbench", gpus="none", cache_dir=str(cache),
                           kernelbench={"devices": ["cpu"],
                                        "runner": {"timeout_s": 60, "call_timeout_s": 20,
                                                   "eval_timeout_s": 90}}) as e:
        yield e


def test_a_mixed_batch_through_the_evaluator(ev):
    fast = (VADD / "candidates" / "fast.cu").read_text()
    specs = [TINY, TINY, TINY, str(VADD / "problem.json"), TINY]
    reports = ev.evaluate_batch(specs, [HONEST, WRONG, CRASH, fast, None])
    assert [r.verdict for r in reports] == ["passed", "incorrect", "fault", "not_run",
                                            "compile_error"]
    honest, wrong, crash, kr, none = reports
    # on the CPU nothing attributes kernels: correct, no speed pay
    assert honest.reward == 0.5 and "unattributed" in honest.flags
    assert honest["cases_total"] == 3 and honest["time_us"] > 0 and honest["baseline_us"] > 0
    assert honest.text("kind") == "kernelbench" and honest.text("source") == HONEST
    assert wrong.reward == 0.0 and "differs from the reference" in wrong.feedback
    assert crash.reward == 0.0 and crash.feedback
    assert kr.reward is None       # no GPU here: compiled, never judged, never a number
    assert none.reward == 0.0 and "ModelNew" in none.feedback
    for r in reports:
        r.close()


def test_a_completion_gets_its_modelnew_block(ev):
    completion = ("Here is the model:\n```python\n" + TINY + "```\nand my answer:\n"
                  "```python\n" + HONEST + "```\n")
    r = ev.evaluate_completion(TINY, completion)
    assert r.verdict == "passed" and r.text("source").strip() == HONEST.strip()
    r.close()
    r = ev.evaluate_completion(TINY, "```cuda\n__global__ void k() {}\n```")
    assert r.verdict == "compile_error" and "class ModelNew" in r.feedback
    r.close()


def test_a_refused_problem_says_why_when_it_is_given(ev):
    with pytest.raises(kreward.problems.ProblemError, match="RuntimeError: no inputs"):
        ev.problem(TINY.replace("return [torch.randn(batch_size, dim)]",
                                "raise RuntimeError('no inputs')"))


def test_no_gpu_for_modelnew_is_never_a_score(tmp_path):
    """Without a device for ModelNew lanes the report is an error that says
    why (never scored), and a trainer adapter raises EvaluationUnavailable
    instead of training on it."""
    from kreward.trainers import EvaluationUnavailable, set_evaluator
    from kreward.trainers.trl import make_trl_reward
    with kreward.Evaluator(reward="kernelbench", gpus="none", cache_dir=str(tmp_path)) as ev:
        r = ev.evaluate(TINY, HONEST)
        assert r.verdict == "error" and r.reward is None
        assert "no GPU is visible to this process" in r.text("unavailable")
        r.close()
        set_evaluator(ev)
        try:
            reward = make_trl_reward(evaluator=ev)
            with pytest.raises(EvaluationUnavailable, match="could not be evaluated here"):
                reward(prompts=["p"], completions=["```python\n" + HONEST + "```"],
                       problem=[TINY])
        finally:
            set_evaluator(None)
