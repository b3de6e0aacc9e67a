"""Weak KernelBench problems (kernelbench/soundness.py): at import, the
trivial answers (zeros, a constant fitted to the inputs' distribution, an
input passed through, another seed's reference) are tried; where one passes
and inputs of other scales and offsets break it, those inputs become a
are how every case draws its inputs (the timed case too); where nothing
breaks it, the problem is weak and every report says so (no speed credit).
On the CPU with a real Runner."""
import pathlib

import pytest

torch = pytest.importorskip("torch", reason="ModelNew candidates run on torch")

import kreward  # noqa: E402
from kreward.kernelbench import import_problem, soundness  # noqa: E402
from kreward.kernelbench.runner import Runner  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[4]

# a loss over a million elements of two normal inputs concentrates near 2.0:
# a constant passes the file's own inputs in every case
MSE = '''import torch
import torch.nn as nn


class Model(nn.Module):
    """Mean squared error of two predictions."""

    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return torch.mean((a - b) ** 2)


batch_size = 256
dim = 4096


def get_inputs():
    return [torch.randn(batch_size, dim), torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
'''
CONSTANT = ("import torch\nclass ModelNew(torch.nn.Module):\n"
            "    def forward(self, a, b):\n        return torch.full((), 2.0)\n")
HONEST = ("import torch\nclass ModelNew(torch.nn.Module):\n"
          "    def forward(self, a, b):\n        d = a - b\n        return (d * d).mean()\n")

# always one: no input breaks a constant
ONES = '''import torch
import torch.nn as nn


class Model(nn.Module):
    """The share of finite entries per row."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.isfinite(x).float().mean(dim=1)


batch_size = 64
dim = 512


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
'''


def run(runner, source):
    return runner.evaluate(source, seed=5, batches=2, calls=2, checks=1, baseline=False)


def test_a_constant_fitted_to_the_distribution_passes_without_the_check(tmp_path,
                                                                              monkeypatch):
    """The hole, as it was: without the soundness check the constant passes
    every case of the file's own sizes."""
    (tmp_path / "mse.py").write_text(MSE)
    monkeypatch.setattr(soundness, "check", lambda imp, timeout_s=300, process=None: {
        "weak": None, "strong": None})
    imp = import_problem(str(tmp_path / "mse.py"), cache_dir=None)
    assert [c[0] for c in imp.cases] == ["base", "small", "odd"]
    with Runner(imp, "cpu", cache_dir=str(tmp_path / "ext"), timeout_s=120) as runner:
        assert run(runner, CONSTANT)["verdict"] == "pass"


# the review's cheat: tell the file's own distribution (normal, mean 0, std
# 1) from the rescaled one by sampling, and answer the constant only there
DETECTS_THE_DISTRIBUTION = ("import torch\nclass ModelNew(torch.nn.Module):\n"
                            "    def forward(self, a, b):\n"
                            "        s = a.flatten()[:4096]\n"
                            "        if abs(float(s.mean())) < 0.1 and abs(float(s.std()) - 1) < 0.05:\n"
                            "            return torch.full((), 2.0)\n"
                            "        d = a - b\n        return (d * d).mean()\n")


def test_inputs_of_other_scales_catch_the_constant_and_keep_the_honest(tmp_path):
    (tmp_path / "mse.py").write_text(MSE)
    imp = import_problem(str(tmp_path / "mse.py"), cache_dir=None)
    assert [c[0] for c in imp.cases] == ["base", "small", "odd"]
    assert imp.weak is None and imp.soundness["trivial"]["constant"] is True
    # every case draws its inputs at other scales and offsets, the timed one too
    recipe = imp.soundness["strong"]
    assert recipe and all(p.get("rescale") == recipe for _, _, p in imp.cases)
    x = next(t for t in imp.tensors if t["source"] == "input")
    assert all(imp.init_for(c, x).get("rescale") == recipe for c in range(len(imp.cases)))
    assert imp.device_only_reason and "scales and offsets" in imp.device_only_reason
    assert any("every case draws its inputs so" in n for n in imp.notes)
    with Runner(imp, "cpu", cache_dir=str(tmp_path / "ext"), timeout_s=120) as runner:
        cheat = run(runner, CONSTANT)
        assert cheat["verdict"] == "wrong", cheat
        detector = run(runner, DETECTS_THE_DISTRIBUTION)
        assert detector["verdict"] == "pass" and "sample" not in str(detector.get("feedback")), detector
        honest = run(runner, HONEST)
        assert honest["verdict"] == "pass", honest


def test_a_problem_nothing_can_strengthen_is_weak_in_every_report(tmp_path):
    (tmp_path / "ones.py").write_text(ONES)
    imp = import_problem(str(tmp_path / "ones.py"), cache_dir=None)
    assert imp.weak and "constant" in imp.weak
    assert any(n.startswith("weak problem:") for n in imp.notes)
    honest = ("import torch\nclass ModelNew(torch.nn.Module):\n"
              "    def forward(self, x):\n        return torch.isfinite(x).float().mean(dim=1)\n")
    with kreward.Evaluator(reward="kernelbench", gpus="none", cache_dir=str(tmp_path / "c"),
                           kernelbench={"devices": ["cpu"],
                                        "runner": {"timeout_s": 120, "call_timeout_s": 30}}) as ev:
        r = ev.evaluate(str(tmp_path / "ones.py"), honest)
        assert r.verdict == "passed" and "weak_problem" in r.flags
        assert "cannot tell fast from lazy" in r.feedback and r.reward == 0.5
        r.close()


def test_a_sound_problem_gets_no_extra_case(tmp_path):
    imp = import_problem(str(ROOT / "examples" / "kernelbench" / "level1" / "01_relu.py"),
                         cache_dir=None)
    assert imp.weak is None and imp.soundness["strong"] is None
    assert not any(imp.soundness["trivial"].values())
    assert [c[0] for c in imp.cases] == ["base", "small", "odd"]


def test_the_files_own_sizes_are_checked_too(tmp_path, monkeypatch):
    """A loss can concentrate at the timed sizes only (its spread shrinks
    with the elements it averages), and a candidate answering the constant
    only at those sizes passed every check the cheapest case made: the
    file's own sizes are checked too, up to OWN_CASE_ELEMENTS input
    elements (the MSE's 2 x 1M here)."""
    (tmp_path / "mse.py").write_text(MSE)
    monkeypatch.setattr(soundness, "OWN_CASE_ELEMENTS", 0)
    alone = import_problem(str(tmp_path / "mse.py"), cache_dir=None)
    assert alone.soundness["cases"] == ["small"]
    monkeypatch.setattr(soundness, "OWN_CASE_ELEMENTS", 1 << 25)
    both = import_problem(str(tmp_path / "mse.py"), cache_dir=None)
    assert both.soundness["cases"] == ["small", "base"]
    assert both.soundness["trivial"]["constant"] is True and both.soundness["strong"]


def _cases_for_the_comparison():
    """(answer, expected) pairs over more than one chunk, the odd ones
    decided by one element in the last chunk."""
    from kreward.kernelbench.soundness_check import CHUNK
    g = torch.Generator().manual_seed(7)
    expected = torch.randn(2 * CHUNK + 37, generator=g)
    near = expected + 0.005
    last_off = near.clone()
    last_off[-1] += 1.0
    nan = near.clone()
    nan[CHUNK + 3] = float("nan")
    inf = expected.clone()
    inf[5] = float("inf")
    return [(near, expected), (last_off, expected), (nan, expected), (inf.clone(), inf),
            (near.half(), expected), (near[:-1], expected), (near.reshape(-1, 1), expected),
            (0.0, expected * 1e-3), (0.0, expected), (0.5, torch.full((CHUNK + 1,), 0.504))]


def test_the_chunked_comparison_is_allclose():
    """soundness_check._passes compares a chunk at a time and stops at the
    first chunk out of tolerance: the verdict is torch.allclose's on the
    whole output (the shape first, NaN never close, equal infinities close)."""
    from kreward.kernelbench.soundness_check import _passes
    for answer, expected in _cases_for_the_comparison():
        whole = (torch.full_like(expected, answer) if isinstance(answer, float) else answer.float())
        want = whole.shape == expected.shape and torch.allclose(whole, expected, atol=1e-2, rtol=1e-2)
        assert _passes(torch, answer, expected, 1e-2, 1e-2) == want


def test_inputs_scaled_in_place_are_the_same_bits():
    """inputs.generate scales and shifts in place: the bits of x * a + b,
    which the worker and the caller must agree on."""
    from kreward.kernelbench.inputs import generate
    recipe = {"log10_scale": [-1.0, 1.0], "offset": 1.0}
    for init in ({"dist": "uniform", "low": -0.3, "high": 0.7}, {"dist": "normal", "mean": 0.2, "std": 1.37},
                 {"dist": "normal", "mean": 0.2, "std": 1.37, "rescale": recipe}):
        got = generate([33, 1000], "f32", init, torch.Generator().manual_seed(3), "cpu")
        g = torch.Generator().manual_seed(3)
        if init["dist"] == "uniform":
            want = torch.rand([33, 1000], generator=g) * (0.7 - -0.3) + -0.3
        else:
            want = torch.randn([33, 1000], generator=g) * 1.37 + 0.2
        if "rescale" in init:
            u = torch.rand((2,), generator=g, dtype=torch.float64).tolist()
            scale = 10.0 ** (-1.0 + 2.0 * u[0])
            want = want * scale + (2 * u[1] - 1) * 1.0 * scale
        assert torch.equal(got, want)
