"""kreward problems vet on a GPU: the reference timed eager and under
torch.compile, launch-bound sizes told from compute-bound ones, and a
kreward problem's soundness checks and time through the library."""
import pathlib

import pytest

pytest.importorskip("torch", reason="vetting KernelBench files runs them under torch")

from kreward import problems  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[4]

TINY = '''import torch
import torch.nn as nn


class Model(nn.Module):
    """A few elementwise ops on a thousand elements: the GPU waits on Python."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.relu(x * 2 + 1) - x


n = 1024


def get_inputs():
    return [torch.randn(n)]


def get_init_inputs():
    return []
'''

BIG = '''import torch
import torch.nn as nn


class Model(nn.Module):
    """A 4096 square matmul: milliseconds of GPU work per launch."""

    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return a @ b


n = 4096


def get_inputs():
    return [torch.randn(n, n), torch.randn(n, n)]


def get_init_inputs():
    return []
'''


SYNCING = '''import torch
import torch.nn as nn


class Model(nn.Module):
    """The positive entries' sum: a boolean mask (the host waits for its count), 64M elements."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        return x[x > 0].sum()


n = 1 << 26


def get_inputs():
    return [torch.randn(n)]


def get_init_inputs():
    return []
'''


@pytest.mark.gpu
def test_timing_on_the_gpu_tells_launch_bound_sizes(tmp_path):
    (tmp_path / "t").mkdir()
    (tmp_path / "t/tiny.py").write_text(TINY)
    (tmp_path / "t/big.py").write_text(BIG)
    (tmp_path / "t/syncing.py").write_text(SYNCING)
    run = problems.vet([tmp_path / "t"], out=tmp_path / "v")
    r = {x["problem"]: x for x in run.records}
    tiny, big = r["tiny.py"], r["big.py"]
    assert tiny["device"].startswith("cuda:0") and big["device"].startswith("cuda:0")
    assert tiny["launch_bound"] is True and not tiny["kept"]
    assert any(x.startswith("launch-bound") for x in tiny["reasons"])
    assert big["launch_bound"] is False and big["kept"], big["reasons"]
    assert big["reference_ms"]["eager"] > 0.1, big
    assert (big["reference_ms"]["compile"] or 0) > 0, big["notes"]
    # the small case of the big problem is much faster than its own sizes
    assert big["cases_ms"]["small"]["eager_ms"] < big["cases_ms"]["base"]["eager_ms"] / 8
    assert big["unchecked"] == []
    # waiting for itself (a mask's count) is not waiting on launches
    assert r["syncing.py"]["launch_bound"] is False, r["syncing.py"]["cases_ms"]


@pytest.mark.gpu
def test_a_kreward_problem_is_checked_and_timed_through_the_library(tmp_path):
    run = problems.vet([ROOT / "examples/problems/l1_gelu", ROOT / "examples/problems/l2_sum"],
                       out=tmp_path / "v")
    for rec in run.records:
        assert rec["import"]["ok"] and rec["deterministic"] is True, (rec.get("measure_error"), rec)
        assert rec["reference_ms"]["eager"] > 0 and rec["kernel_us"] > 0
        assert rec["weak"] is None and rec["trivial"]["zeros"] is False
        assert rec["kept"], rec["reasons"]
