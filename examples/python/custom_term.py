"""A custom reward term written in Python, and its unit test (no GPU).

    python examples/python/custom_term.py        # prints a score
    pytest examples/python/custom_term.py        # runs the test

Every preset has a ladder (docs/rewards.md, "Order and speed"): the total of
a passing candidate is clamped into the preset's range for passes
(kernelgym_default: [0.5, 1]), so a term added on top of a preset pays only
as far as that range reaches. This reward widens the range by what the term
can add."""
import os
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bindings" / "python"))
if (ROOT / "build/lib/libkreward.so.1").exists():  # run from a built checkout
    os.environ.setdefault("KREWARD_LIBRARY", str(ROOT / "build/lib/libkreward.so.1"))

import kreward  # noqa: E402

# The library clips and floors its own speed terms; a Python term cannot be
# declared a speed term (kr_reward_add has no "speed" or "bounds"), so this
# one keeps the same promises itself: its value is clipped, and it pays
# nothing for a speed the library does not trust (the default
# speed_floor_flags).
MAX_VALUE = 3.0
UNTRUSTED_SPEED = {"implausible_speed", "side_stream", "weak_problem", "reference_copy", "slow"}
WEIGHT = 0.2


def speedup_per_line(report):
    """Reward speed, discounted for long kernels, in [0, MAX_VALUE]."""
    if UNTRUSTED_SPEED & set(report.flags):
        return 0.0
    value = report.get("speedup", 0.0) / max(1.0, report.get("code_lines", 0.0) / 50)
    return min(max(value, 0.0), MAX_VALUE)


def make_reward(ctx):
    # kernelgym_default (0.5 correct + 0.5 [speedup_low >= 1.01]), its pass
    # range widened by the most this term adds
    reward = ctx.reward({"preset": "kernelgym_default",
                         "ladder": {"compile_error": [0, 0], "failed": [0, 0],
                                    "passed": [0.5, 1.0 + WEIGHT * MAX_VALUE]}})
    reward.add_python("speedup_per_line", speedup_per_line, weight=WEIGHT, gate="correct")
    return reward


def test_speedup_per_line():
    with kreward.Context(no_device=True) as ctx, make_reward(ctx) as reward:
        r = kreward.Report()
        r.verdict = "passed"
        r["speedup"] = 2.0
        r["code_lines"] = 100
        # 0.5 correct + 0.5 [speedup >= 1.01] + 0.2 * 2 / 2
        assert reward.score(r) == 0.5 + 0.5 + 0.2
        terms = {t["name"]: t for t in r.to_dict()["reward"]["terms"]}
        assert terms["speedup_per_line"]["value"] == 1.0
        r["speedup"] = 1000.0  # clipped: 0.2 * 3 at most
        assert reward.score(r) == 0.5 + 0.5 + 0.2 * 3
        r.flags = ["implausible_speed"]  # an untrusted speed pays nothing
        assert reward.score(r) == 0.5
        r.flags = []
        r.verdict = "incorrect"
        assert reward.score(r) == 0.0


if __name__ == "__main__":
    test_speedup_per_line()
    with kreward.Context(no_device=True) as ctx, make_reward(ctx) as reward:
        r = kreward.Report()
        r.verdict, r["speedup"], r["code_lines"] = "passed", 1.5, 80
        print(f"custom term: a passing 1.5x kernel of 80 lines scores {reward.score(r):.3f}")
