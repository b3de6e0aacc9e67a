"""A TRL-style reward over a batch of completions, scored with libkreward.

    python examples/python/trl_reward.py

Without a GPU the candidates are compiled and checked and score the
fallback (0.0), except completions that do not compile or hold no code."""
import os
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bindings" / "python"))
if (ROOT / "build/lib/libkreward.so.1").exists():  # run from a built checkout
    os.environ.setdefault("KREWARD_LIBRARY", str(ROOT / "build/lib/libkreward.so.1"))

from kreward import trainers  # noqa: E402

problem = str(ROOT / "examples/problems/l1_vector_add/problem.json")
fast = (ROOT / "examples/problems/l1_vector_add/candidates/fast.cu").read_text()
completions = [
    f"Here is a vectorized kernel:\n```cuda\n{fast}\n```",
    "```cuda\nextern \"C\" __global__ void add(float* c) { c[0] = }\n```",
    "I am not sure how to do this.",
]
reward = trainers.make_trl_reward(problem=problem)
# GRPOTrainer(model=..., reward_funcs=[reward], ...) calls it like this:
scores = reward(prompts=["Write a fast vector add."] * 3, completions=completions,
                completion_ids=None)
for c, s in zip(completions, scores):
    print(f"{s:8.3f}  {c.splitlines()[0][:60]}")
