"""The tolerance headroom's comparison (kreward/vet/measure.py
smallest_ratio): chunked over an output's elements, it gives what the
whole output compared at once gives, wherever the smallest ratio lies, and
refuses a non-finite value in one precision only."""
import math

import pytest

torch = pytest.importorskip("torch", reason="the headroom is computed with torch")

from kreward.vet.measure import smallest_ratio  # noqa: E402

ATOL, RTOL = 1e-2, 1e-2


def whole(mine, exact):
    err = (mine.double() - exact.double()).abs()
    nonzero = err > 0
    tol = ATOL + RTOL * exact.double().abs()
    return float((tol[nonzero] / err[nonzero]).min()) if bool(nonzero.any()) else math.inf


@pytest.mark.parametrize("chunk", [1, 7, 64, 1000, 1 << 25])
def test_chunks_give_the_whole_outputs_answer(chunk):
    g = torch.Generator().manual_seed(3)
    exact = torch.randn(1000, dtype=torch.float64, generator=g)
    mine = exact.float().double()  # float32's rounding: errors everywhere, small
    # the worst element near the end: past the first chunk of every chunk size but the largest
    mine[997] = exact[997] + 0.5
    got = smallest_ratio(torch, mine.float(), exact, ATOL, RTOL, chunk=chunk)
    assert got == pytest.approx(whole(mine.float(), exact), rel=1e-12)
    assert got < 1  # the bad element decides it: 0.5 off is past the tolerance


def test_no_difference_is_infinite_headroom():
    x = torch.linspace(-3, 3, 100, dtype=torch.float64)
    assert smallest_ratio(torch, x.clone(), x, ATOL, RTOL, chunk=16) == math.inf


def test_a_non_finite_value_in_one_precision_only_has_no_headroom():
    exact = torch.ones(50, dtype=torch.float64)
    mine = exact.float().clone()
    mine[49] = float("inf")  # in the last chunk: every chunk is read
    assert smallest_ratio(torch, mine, exact, ATOL, RTOL, chunk=16) is None
    mine[49] = float("nan")
    assert smallest_ratio(torch, mine, exact, ATOL, RTOL, chunk=16) is None


def test_the_same_non_finite_value_in_both_is_no_error():
    exact = torch.ones(50, dtype=torch.float64)
    exact[10], exact[40] = float("inf"), float("nan")
    mine = exact.float().clone()
    mine[20] = 1.001  # the one real error
    got = smallest_ratio(torch, mine, exact, ATOL, RTOL, chunk=16)
    assert got == pytest.approx((ATOL + RTOL) / abs(float(mine[20]) - 1.0), rel=1e-6)
