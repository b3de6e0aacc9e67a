"""GPU (-m gpu): one rail for both kinds, on a real GPU. A batch mixing an
honest ModelNew (Triton), a wrong one, a faulting one and kreward CUDA
candidates (a fast one, a wrong one) through the Evaluator, TRL's reward
function and verl's compute_score: the right verdicts and rewards, one
report each in order, and the caller's own CUDA tensor intact afterwards
(a faulting candidate costs a worker, never the caller's context). The
server's routes are in test_serve_gpu.py (they need uvicorn)."""
import pathlib

import pytest

pytestmark = pytest.mark.gpu
torch = pytest.importorskip("torch")
pytest.importorskip("triton")

import kreward  # noqa: E402
from kreward.trainers import trl, verl  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[3]
SOFTMAX = str(ROOT / "examples" / "kernelbench" / "level1" / "05_softmax.py")
VADD = ROOT / "examples" / "problems" / "l1_vector_add"
VADD_JSON = str(VADD / "problem.json")
HONEST = (ROOT / "examples" / "kernelbench" / "candidates" / "level1_05_softmax" /
          "honest_triton.py").read_text()
WRONG = '''import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return x * 1.0  # the input back: far outside any tolerance of a softmax
'''
# an index far out of range: a device-side assert, the worker's context gone
FAULTING = '''import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        far = torch.full((x.shape[0],), 1 << 40, device=x.device, dtype=torch.long)
        return torch.softmax(x, dim=1) + x.flatten()[far].unsqueeze(1)
'''
FAST_CU = (VADD / "candidates" / "fast.cu").read_text()
WRONG_CU = (VADD / "candidates" / "wrong.cu").read_text()


def _fence(kind, code):
    return f"Here it is.\n```{kind}\n{code}```\n"


@pytest.fixture(scope="module")
def evaluator():
    if not torch.cuda.is_available():
        pytest.skip("torch sees no GPU")
    with kreward.Evaluator(reward="kernelbench") as ev:
        yield ev


@pytest.fixture(scope="module")
def callers_tensor():
    x = torch.arange(1 << 20, device="cuda", dtype=torch.float32)
    return x, float(x.sum().item())


def test_a_mixed_batch_through_the_evaluator(evaluator, callers_tensor):
    reports = evaluator.evaluate_batch([SOFTMAX, SOFTMAX, SOFTMAX, VADD_JSON, VADD_JSON],
                                       [HONEST, WRONG, FAULTING, FAST_CU, WRONG_CU])
    got = [(r.verdict, r.text("kind")) for r in reports]
    print(got, [(r.reward, r.get("speedup")) for r in reports])
    assert [v for v, _ in got] == ["passed", "incorrect", "fault", "passed", "incorrect"], \
        [(r.verdict, r.message) for r in reports]
    assert got[0][1] == "kernelbench"
    # the kernelbench ladder: 0.5 for correct, more for speed; 0 for wrong
    assert reports[0].reward >= 0.5 and reports[0]["speedup"] > 0
    assert reports[1].reward == 0 and reports[2].reward == 0
    assert reports[3].reward >= 0.5 and reports[4].reward == 0
    x, total = callers_tensor
    torch.cuda.synchronize()
    assert float(x.sum().item()) == total


def test_trl_and_verl_take_both_kinds(evaluator, callers_tensor):
    reward = trl.make_trl_reward(evaluator=evaluator)
    scores = reward(prompts=["p"] * 3,
                    completions=[_fence("python", HONEST), _fence("cuda", FAST_CU),
                                 _fence("python", WRONG)],
                    problem=[SOFTMAX, VADD_JSON, SOFTMAX])
    print("trl", scores)
    assert scores[0] >= 0.5 and scores[1] >= 0.5 and scores[2] == 0
    score = verl.compute_score("kernelbench", _fence("python", HONEST), SOFTMAX)
    print("verl", score)
    value = score["score"] if isinstance(score, dict) else score
    assert value >= 0  # verl's shared evaluator, its own preset: a number for a judged candidate
    x, total = callers_tensor
    torch.cuda.synchronize()
    assert float(x.sum().item()) == total
