"""A custom reward term written in Python, and its unit test (no GPU).

    python examples/python/custom_term.py        # prints a score
    pytest examples/python/custom_term.py        # runs the test"""
import os
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bindings" / "python"))
if (ROOT / "build/lib/libkreward.so.1").exists():  # run from a built checkout
    os.environ.setdefault("KREWARD_LIBRARY", str(ROOT / "build/lib/libkreward.so.1"))

import kreward  # noqa: E402


def speedup_per_line(report):
    """Reward speed, discounted for long kernels."""
    return report["speedup"] / max(1.0, report["code_lines"] / 50)


def make_reward(ctx):
    reward = ctx.reward("kernelgym_default")
    reward.add_python("speedup_per_line", speedup_per_line, weight=0.2, gate="correct")
    return reward


def test_speedup_per_line():
    with kreward.Context(no_device=True) as ctx, make_reward(ctx) as reward:
        r = kreward.Report()
        r.verdict = "passed"
        r["speedup"] = 2.0
        r["code_lines"] = 100
        # 0.5 correct + 0.5 [speedup >= 1.01] + 0.2 * 2 / 2
        assert reward.score(r) == 0.5 + 0.5 + 0.2
        r.verdict = "incorrect"
        assert reward.score(r) == 0.0


if __name__ == "__main__":
    test_speedup_per_line()
    print("custom term: ok")
