"""A TRL-style reward over a batch of completions, scored with libkreward.

    python examples/python/trl_reward.py [--standin]

Without a GPU nothing that compiles can be judged, and a reward for what
was not judged is never a number: the reward function raises
EvaluationUnavailable, which this example prints (with `--standin`, the
stand-in backend judges each candidate by what it says instead: for trying
the wiring, not for training)."""
import os
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bindings" / "python"))
if (ROOT / "build/lib/libkreward.so.1").exists():  # run from a built checkout
    os.environ.setdefault("KREWARD_LIBRARY", str(ROOT / "build/lib/libkreward.so.1"))

from kreward import trainers  # noqa: E402
from kreward.backends.standin import candidate  # noqa: E402

problem = str(ROOT / "examples/problems/l1_vector_add/problem.json")
fast = (ROOT / "examples/problems/l1_vector_add/candidates/fast.cu").read_text()
completions = [
    f"Here is a vectorized kernel:\n```cuda\n{fast}\n```",
    "```cuda\nextern \"C\" __global__ void add(float* c) { c[0] = }\n```",
    "I am not sure how to do this.",
]
standin = "--standin" in sys.argv
if standin:  # the stand-in reads its verdicts from the candidates
    completions[0] = candidate("passed", 2.0)
reward = trainers.make_trl_reward(problem=problem, backend="standin" if standin else None)
# GRPOTrainer(model=..., reward_funcs=[reward], ...) calls it like this:
try:
    scores = reward(prompts=["Write a fast vector add."] * 3, completions=completions,
                    completion_ids=None)
except trainers.EvaluationUnavailable as e:
    print(f"not judged here: {e}")
    sys.exit(0)
for c, s in zip(completions, scores):
    print(f"{'None' if s is None else f'{s:8.3f}':>8}  {c.splitlines()[0][:60]}")
