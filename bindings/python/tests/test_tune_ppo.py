"""kreward.tune's PPO strategy (needs torch: skipped without it). Runs on
the CPU against the synthetic backend; on a GPU machine with torch:
python3 -m pytest -q bindings/python/tests/test_tune_ppo.py"""
import math

import pytest

from kreward import tune
from kreward.tune.synthetic import SyntheticBackend
from test_tune import VADD, VADD_KNOBS, VADD_SRC, vadd_speed

torch = pytest.importorskip("torch", reason="strategy='ppo' needs torch")


def test_ppo_spends_exactly_its_budget_and_never_repeats_an_evaluation():
    be = SyntheticBackend(vadd_speed)
    result = tune.tune(tune.CudaKernel(VADD_SRC, VADD_KNOBS, VADD), strategy="ppo", max_evals=12,
                       batch_size=6, seed=0, backend=be)
    assert result.evaluations == 12
    seen = [tuple(sorted(k.items())) for k in be.seen]
    assert len(seen) == len(set(seen)) == be.calls == result.gpu_runs  # memo: no repeats
    assert result.best is not None and result.speedup == max(vadd_speed(k) for k in be.seen)
    be.close()


def test_ppo_learns_the_peak():
    """With the whole space as budget and batches to spare, the policy's
    most likely assignment is one of the best few (peak 4.0 at BLOCK=256,
    ITEMS=4; its neighbours 3.3-3.5; the median of the space about 2)."""
    from kreward.tune.ppo import run_ppo
    be = SyntheticBackend(vadd_speed)
    with tune.TuneEnv(tune.CudaKernel(VADD_SRC, VADD_KNOBS, VADD), backend=be,
                      max_evals=28) as env:
        env.reset(seed=0)
        policy = run_ppo(env, batch_size=8, seed=0, max_batches=40)
        with torch.no_grad():
            logits, _ = policy(torch.as_tensor(list(env._obs()), dtype=torch.float32))
        mode = env.space.decode([int(lg.argmax()) for lg in logits])
    be.close()
    assert vadd_speed(mode) >= 3.0, mode


def test_ppo_is_reproducible_with_a_seed():
    runs = []
    for _ in range(2):
        be = SyntheticBackend(vadd_speed)
        r = tune.tune(tune.CudaKernel(VADD_SRC, VADD_KNOBS, VADD), strategy="ppo", max_evals=10,
                      batch_size=5, seed=7, backend=be)
        runs.append([tuple(sorted(k.items())) for k in be.seen])
        be.close()
        assert math.isfinite(r.reward)
    assert runs[0] == runs[1]
