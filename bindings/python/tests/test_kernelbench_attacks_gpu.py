"""On a GPU (marked gpu): a candidate that ends a timed batch with its
kernels still queued (the worker's synchronisation replaced through gc)
gets no speed for it: the runner checks go's commitment, and reading the
sums back waits for the queued kernels. The CPU half is
test_kernelbench_attacks.py."""
import pathlib

import pytest

torch = pytest.importorskip("torch", reason="needs torch with CUDA")

from kreward.kernelbench import import_problem  # noqa: E402
from kreward.kernelbench.runner import Runner  # noqa: E402

KB = pathlib.Path(__file__).resolve().parents[3] / "examples" / "kernelbench"


@pytest.mark.gpu
def test_a_batch_ended_before_its_kernels_gets_no_speed_credit(tmp_path):
    imp = import_problem(str(KB / "level1" / "13_matmul_square.py"))
    src = (KB / "candidates" / "open" / "level1_13_matmul_skip_sync.py").read_text()
    with Runner(imp, "cuda", cache_dir=str(tmp_path), spare=False) as runner:
        honest = runner.evaluate((KB / "candidates" / "level1_13_matmul_square" / "slow_cuda.py").read_text(), seed=1)
        res = runner.evaluate(src, seed=1)
    print({k: res.get(k) for k in ("verdict", "feedback", "time_us", "baseline_us", "speedup", "reward")},
          {k: honest.get(k) for k in ("time_us", "speedup")})
    # the same kernel: it must not time faster than the honest candidate
    assert res["reward"] <= max(honest["reward"], 0.5) and (res.get("speedup") or 0) < 1.2 * honest["speedup"], res
