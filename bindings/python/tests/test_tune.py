"""kreward.tune on the CPU: knob spaces, expressions, the checks that refuse
configurations without a GPU (real NVRTC compiles), memoisation, and the
random and grid strategies and @optimize end to end against a synthetic
backend whose speedups are a known function of the knobs."""
import math
import shutil
import subprocess

import pytest

from conftest import EXAMPLES, ROOT
from kreward import tune
from kreward.tune import expr, limits
from kreward.tune.cubin import kernel_resources
from kreward.tune.synthetic import SyntheticBackend, knobs_of

VADD = str(EXAMPLES / "l1_vector_add" / "problem.json")
GEMM_PROBLEM = str(EXAMPLES / "l4_matmul_f32" / "problem.json")
SOFTMAX_PROBLEM = str(EXAMPLES / "l2_softmax" / "problem.json")
TUNE = ROOT / "examples" / "tune"

# a small kernel with two knobs: BLOCK threads, each adding ITEMS elements
VADD_SRC = """\
// kreward: launch vadd grid=(cdiv(N, BLOCK * ITEMS)) block=(BLOCK) args=(a, b, c, N)
extern "C" __global__ void vadd(const float* a, const float* b, float* c, int n)
{
    int base = (blockIdx.x * BLOCK + threadIdx.x) * ITEMS;
#pragma unroll
    for (int i = 0; i < ITEMS; i++)
        if (base + i < n)
            c[base + i] = a[base + i] + b[base + i];
}
"""
VADD_KNOBS = {"BLOCK": [32, 64, 128, 256, 512, 1024, 2048], "ITEMS": [1, 2, 4, 8]}


def vadd_speed(k):
    """Synthetic: a single peak at BLOCK=256, ITEMS=4."""
    return 4.0 - abs(math.log2(k["BLOCK"]) - 8) * 0.5 - abs(math.log2(k["ITEMS"]) - 2) * 0.7


# ---- spaces and expressions ----

def test_space_encodes_decodes_and_walks_the_grid():
    s = tune.KnobSpace({"A": [1, 2, 3], "B": ["x", "y"]})
    assert s.nvec == [3, 2] and s.size == 6 and s.names == ["A", "B"]
    assert s.decode([2, 1]) == {"A": 3, "B": "y"}
    assert s.encode({"A": 3, "B": "y"}) == [2, 1]
    assert [tuple(a.values()) for a in s][:3] == [(1, "x"), (1, "y"), (2, "x")]
    with pytest.raises(ValueError, match="index 3"):
        s.decode([3, 0])
    with pytest.raises(ValueError, match="not one of"):
        s.encode({"A": 4, "B": "x"})
    with pytest.raises(ValueError, match="twice"):
        tune.KnobSpace({"A": [1, 1]})
    with pytest.raises(ValueError, match="identifier"):
        tune.KnobSpace({"1A": [1]})


def test_constraints_over_knobs_and_every_case():
    s = tune.KnobSpace({"T": [32, 64, 128], "R": [1, 2, 4]}, ["T % (32 * R) == 0"])
    assert len(s.valid()) == 6  # 32:{1} 64:{1,2} 128:{1,2,4}
    assert "does not hold" in s.violated({"T": 32, "R": 2})
    # a dim: every case must meet it
    d = tune.KnobSpace({"V": [1, 4]}, ["N % V == 0"])
    assert d.violated({"V": 4}, [{"N": 8}, {"N": 12}]) is None
    assert "N': 33" in d.violated({"V": 4}, [{"N": 8}, {"N": 33}])
    c = tune.KnobSpace({"V": [1, 4]}, [lambda k, dims: k["V"] == 1])
    assert c.violated({"V": 1}) is None and c.violated({"V": 4})


def test_expressions_follow_the_plan_language():
    assert expr.evaluate("-7 / 2", {}) == -3 and expr.evaluate("-7 % 2", {}) == -1  # as in C
    assert expr.evaluate("cdiv(N, B)", {"N": 100003, "B": 1024}) == 98
    assert expr.evaluate("min(A, 3) + max(A, 3)", {"A": 5}) == 8
    assert expr.evaluate("A > 1 and not (A == 3) or False", {"A": 2}) is True
    assert expr.names("cdiv(N, BLOCK * 2)") == {"N", "BLOCK"}
    for bad in ("__import__('os')", "A ** 2", "A // 2", "[1]", "A.b", "'s'"):
        with pytest.raises(expr.ExprError):
            expr.evaluate(bad, {"A": 1})
    with pytest.raises(expr.ExprError, match="division by zero"):
        expr.evaluate("1 / A", {"A": 0})


def test_register_and_shared_limits():
    # registers go per warp in units of 256: 65 registers take 72 per thread
    assert limits.registers_per_block(64, 1024) == 65536
    assert limits.registers_per_block(65, 1024) == 73728
    assert limits.check_launch("sm_90a", 1024, 64, 0, 0) is None
    assert limits.check_launch("sm_90a", 1024, 65, 0, 0)[0] == "invalid_plan"
    assert limits.check_launch("sm_90a", 1056, 8, 0, 0)[0] == "invalid_plan"
    assert limits.check_launch("sm_90a", 128, 32, 1024, 232448 - 1024) is None
    assert limits.check_launch("sm_90a", 128, 32, 1024, 232448)[0] == "invalid_plan"
    assert limits.check_launch("sm_86", 128, 32, 0, 101377)[0] == "invalid_plan"
    assert limits.check_launch("sm_90a", 128, 32, 49153, 0)[0] == "launch_error"


# ---- the CUBIN reader, against ptxas ----

SHARED_SRC = """\
extern "C" __global__ void k1(float *x) { __shared__ float s[1]; s[0] = x[0]; __syncthreads(); x[1] = s[0]; }
extern "C" __global__ void k3(float *x) { __shared__ float s[4096]; s[threadIdx.x] = x[0]; __syncthreads(); x[1] = s[5]; }
extern "C" __global__ void k0(float *x) { x[threadIdx.x] += 1.f; }
"""


@pytest.mark.parametrize("arch", ["sm_90a", "sm_80"])
def test_cubin_resources_match_ptxas(ctx, tmp_path, arch):
    with ctx.compile(SHARED_SRC, arch=arch) as p:
        got = kernel_resources(p.binary()[0])
    assert {k: v["shared_static"] for k, v in got.items()} == {"k1": 4, "k3": 16384, "k0": 0}
    assert all(isinstance(v["registers"], int) and 1 <= v["registers"] <= 255 for v in got.values())
    assert got["k3"]["shared_reserved"] == (1024 if arch == "sm_90a" else 0)
    nvcc = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
    if not shutil.which(nvcc):
        pytest.skip("no nvcc here to cross-check register counts with ptxas -v")
    (tmp_path / "k.cu").write_text(SHARED_SRC)
    out = subprocess.run([nvcc, f"-arch={arch}", "-cubin", "-Xptxas", "-v", "-o",
                          str(tmp_path / "k.cubin"), str(tmp_path / "k.cu")],
                         capture_output=True, text=True, check=True).stderr
    ours = kernel_resources((tmp_path / "k.cubin").read_bytes())
    import re
    for name, regs in re.findall(r"Function properties for (\w+)[\s\S]*?Used (\d+) registers", out):
        assert ours[name]["registers"] == int(regs), out


def test_cubin_reader_refuses_junk():
    from kreward.tune.cubin import CubinError
    for junk in (b"", b"\x7fELF" + b"\0" * 60, b"PTX text"):
        with pytest.raises(CubinError):
            kernel_resources(junk)


# ---- variants and the checks (real NVRTC, no GPU) ----

def test_render_defines_and_plan_lines():
    k = tune.CudaKernel(VADD_SRC, VADD_KNOBS, VADD)
    src = k.render({"BLOCK": 128, "ITEMS": 4})
    assert src.startswith('#define BLOCK 128\n#define ITEMS 4\n#line 1 "candidate.cu"\n')
    assert "grid=(cdiv(N, 128 * 4)) block=(128)" in src
    assert knobs_of(src) == {"BLOCK": 128, "ITEMS": 4}
    with pytest.raises(ValueError, match="#ifndef BM"):
        tune.CudaKernel("#define BM 64\n// kreward: launch k grid=(1) block=(BM) args=(a)\n",
                        {"BM": [32]}, VADD)
    guarded = "#ifndef BM\n#define BM 64\n#endif\n// kreward: launch k grid=(1) block=(BM) args=(a)\n"
    tune.CudaKernel(guarded, {"BM": [32]}, VADD)
    with pytest.raises(ValueError, match="no `// kreward: launch`"):
        tune.CudaKernel("__global__ void k() {}", {"A": [1]}, VADD)


def test_knob_named_like_the_problem_is_refused():
    be = SyntheticBackend(lambda k: 1.0)
    k = tune.CudaKernel(VADD_SRC.replace("BLOCK", "N"), {"N": [32]}, VADD)
    with pytest.raises(ValueError, match="also names of the problem"):
        tune.TuneEnv(k, backend=be)
    be.close()


def test_invalid_configurations_are_refused_without_a_gpu_run():
    """Each kind of refusal, decided from the compile and the device limits;
    the backend (which would be the GPU) never sees them."""
    gemm = (TUNE / "gemm.cu").read_text()
    knobs = {"BM": [64, 128, 256], "BN": [64, 128, 256], "BK": [8, 32, 64], "TM": [4, 8], "TN": [4, 8]}
    be = SyntheticBackend(lambda k: 1.0)
    with tune.TuneEnv(tune.CudaKernel(gemm, knobs, GEMM_PROBLEM), backend=be) as env:
        cases = {
            "threads": ({"BM": 256, "BN": 256, "BK": 8, "TM": 4, "TN": 4}, "invalid_plan",
                        "4096"),
            "registers": ({"BM": 256, "BN": 256, "BK": 8, "TM": 8, "TN": 8}, "invalid_plan",
                          "registers per block"),
            # 512 threads whose registers fit, 96 KiB of static tiles
            "static shared": ({"BM": 256, "BN": 128, "BK": 64, "TM": 8, "TN": 8},
                              "launch_error", "static shared memory"),
            "fits": ({"BM": 64, "BN": 64, "BK": 8, "TM": 4, "TN": 4}, "passed", None),
        }
        for what, (a, verdict, text) in cases.items():
            r = env.evaluate([a])[0]
            assert r.verdict == verdict, (what, r)
            if text:
                assert text in r.invalid, (what, r.invalid)
            if verdict != "passed":
                assert not r.ran and r.reward is not None and r.reward < 0  # scored by the preset
                assert r.report["texts"]["message"] == r.invalid
        # the static-shared case hits registers or static memory: both are the driver's refusals
        assert be.seen == [{"BM": 64, "BN": 64, "BK": 8, "TM": 4, "TN": 4}]
    be.close()


def test_static_shared_over_48k_is_refused():
    src = """\
// kreward: launch k grid=(N) block=(32) args=(a, b, c, N)
extern "C" __global__ void k(const float* a, const float* b, float* c, int n)
{
    __shared__ float s[WORDS];
    s[threadIdx.x] = a[blockIdx.x]; __syncthreads();
    if (threadIdx.x == 0) c[blockIdx.x] = s[WORDS - 1 - threadIdx.x] + b[blockIdx.x];
}
"""
    be = SyntheticBackend(lambda k: 1.0)
    with tune.TuneEnv(tune.CudaKernel(src, {"WORDS": [1024, 16384]}, VADD), backend=be) as env:
        ok, big = env.evaluate([{"WORDS": 1024}, {"WORDS": 16384}])
    be.close()
    assert ok.verdict == "passed"
    assert big.verdict == "launch_error" and "65536 bytes of static shared" in big.invalid


def test_compile_errors_and_constraints_are_refused():
    softmax = (TUNE / "softmax.cu").read_text()
    be = SyntheticBackend(lambda k: 1.0)
    k = tune.CudaKernel(softmax, {"THREADS": [32, 64], "ROWS": [1, 2], "ONLINE": [0, "1 +"]},
                        SOFTMAX_PROBLEM, constraints=["THREADS % (32 * ROWS) == 0"])
    with tune.TuneEnv(k, backend=be) as env:
        bad_rows = env.evaluate([{"THREADS": 32, "ROWS": 2, "ONLINE": 0}])[0]
        assert bad_rows.verdict == "invalid_plan" and "constraint" in bad_rows.invalid
        broken = env.evaluate([{"THREADS": 64, "ROWS": 1, "ONLINE": "1 +"}])[0]
        assert broken.verdict == "compile_error" and "error" in broken.invalid
        assert broken.reward == -10  # makora's compile error
        good = env.evaluate([{"THREADS": 64, "ROWS": 2, "ONLINE": 0}])[0]
        assert good.verdict == "passed"
    assert be.calls == 1
    be.close()


# ---- memoisation ----

def test_repeated_assignments_are_not_evaluated_again():
    be = SyntheticBackend(vadd_speed)
    with tune.TuneEnv(tune.CudaKernel(VADD_SRC, VADD_KNOBS, VADD), backend=be) as env:
        a = {"BLOCK": 256, "ITEMS": 4}
        first = env.evaluate([a, a, {"BLOCK": 128, "ITEMS": 1}])
        assert be.calls == 2 and be.batches == [2]  # the duplicate in the batch went once
        assert not first[0].cached and first[1].cached
        again = env.evaluate([a])[0]
        assert again.cached and be.calls == 2 and again.speedup == first[0].speedup
        assert env.evaluations == 2
        # a refused one is memoised too: no second compile
        assert env.evaluate([{"BLOCK": 2048, "ITEMS": 1}])[0].verdict == "invalid_plan"
        checks = env.check_wall_s
        assert env.evaluate([{"BLOCK": 2048, "ITEMS": 1}])[0].cached
        assert env.check_wall_s == checks


def test_same_content_is_evaluated_once():
    """Two assignments whose variants are the same text (1 and True render
    alike) are one content hash: one evaluation."""
    be = SyntheticBackend(lambda k: 2.0)
    k = tune.CudaKernel(VADD_SRC, {"BLOCK": [64], "ITEMS": [1, True]}, VADD)
    with tune.TuneEnv(k, backend=be) as env:
        r = env.evaluate([{"BLOCK": 64, "ITEMS": 1}, {"BLOCK": 64, "ITEMS": True}])
    be.close()
    assert be.calls == 1 and r[1].cached and r[0].key == r[1].key


# ---- the environment's interface ----

def test_env_reset_and_step():
    be = SyntheticBackend(vadd_speed)
    with tune.TuneEnv(tune.CudaKernel(VADD_SRC, VADD_KNOBS, VADD), backend=be, max_evals=3) as env:
        obs, info = env.reset(seed=1)
        assert len(obs) == env.observation_space.shape[0] and info == {}
        assert list(env.action_space.nvec) == [7, 4]
        action = env.space.encode({"BLOCK": 256, "ITEMS": 4})
        obs, reward, terminated, truncated, info = env.step(action)
        assert info["verdict"] == "passed" and info["speedup"] == pytest.approx(4.0)
        assert reward == pytest.approx(10 + 5 * math.log(4.0), abs=0.5)  # makora
        assert not terminated and not truncated
        assert obs[-4] == 1.0 and obs[-3] == pytest.approx(math.log(4.0), rel=1e-5)
        _, rewards, _, truncated, infos = env.step_batch([[0, 0], [6, 0]])
        assert truncated and infos[1]["verdict"] == "invalid_plan" and rewards[1] < 0
        assert env.best.assignment == {"BLOCK": 256, "ITEMS": 4}


def test_gymnasium_passive_checks_accept_the_env():
    """gymnasium's passive checks (types, spaces, return values). Its full
    check_env also wants identical infos for a repeated step, which a
    memoising environment gives on purpose differently (cached, wall_s)."""
    gym = pytest.importorskip("gymnasium", reason="gymnasium not installed")
    from gymnasium.utils import passive_env_checker as pc
    be = SyntheticBackend(vadd_speed)
    with tune.TuneEnv(tune.CudaKernel(VADD_SRC, VADD_KNOBS, VADD), backend=be) as env:
        assert isinstance(env, gym.Env)
        pc.check_action_space(env.action_space)
        pc.check_observation_space(env.observation_space)
        obs, _ = pc.env_reset_passive_checker(env, seed=0)
        assert env.observation_space.contains(obs)
        for _ in range(3):
            obs, *_ = pc.env_step_passive_checker(env, env.action_space.sample())
            assert env.observation_space.contains(obs)


# ---- strategies and @optimize ----

def test_grid_finds_the_known_best():
    be = SyntheticBackend(vadd_speed)
    result = tune.tune(tune.CudaKernel(VADD_SRC, VADD_KNOBS, VADD), strategy="grid", max_evals=28,
                       batch_size=8, backend=be)
    assert result.best == {"BLOCK": 256, "ITEMS": 4}
    assert result.speedup == pytest.approx(4.0)
    assert result.evaluations == 28 and result.refused == 4  # BLOCK=2048: refused, never run
    assert result.gpu_runs == 24 == be.calls
    assert max(be.batches) <= 8
    assert "#define BLOCK 256" in result.source
    be.close()


def test_random_search_with_a_budget():
    be = SyntheticBackend(vadd_speed)
    result = tune.tune(tune.CudaKernel(VADD_SRC, VADD_KNOBS, VADD), strategy="random",
                       max_evals=10, batch_size=4, seed=3, backend=be)
    assert result.evaluations == 10 and len({tuple(s.items()) for s in be.seen}) == be.calls
    assert result.best_result.speedup == max(vadd_speed(k) for k in be.seen)
    # with the whole space as its budget, random search finds the peak too
    full = tune.tune(tune.CudaKernel(VADD_SRC, VADD_KNOBS, VADD), strategy="random",
                     max_evals=28, seed=3, backend=be)
    assert full.best == {"BLOCK": 256, "ITEMS": 4}
    be.close()


def test_optimize_decorator_on_a_cuda_source():
    be = SyntheticBackend(vadd_speed)

    @tune.optimize(max_evals=28, strategy="grid", problem=VADD, knobs=VADD_KNOBS, backend=be)
    def vadd():
        return VADD_SRC

    assert isinstance(vadd, tune.TuneResult)
    assert vadd.best == {"BLOCK": 256, "ITEMS": 4} and vadd.report["verdict"] == "passed"
    assert vadd.report["metrics"]["speedup"] == pytest.approx(4.0)
    assert callable(vadd.kernel) and vadd.wall_per_eval_s > 0
    be.close()


def test_unknown_strategy_and_ppo_without_torch():
    be = SyntheticBackend(vadd_speed)
    k = tune.CudaKernel(VADD_SRC, VADD_KNOBS, VADD)
    with pytest.raises(ValueError, match="strategy"):
        tune.tune(k, strategy="annealing", backend=be)
    try:
        import torch  # noqa: F401
    except ImportError:
        with pytest.raises(ImportError, match="needs torch"):
            tune.tune(k, strategy="ppo", max_evals=4, backend=be)
    be.close()


def test_compare_script_dry_run(tmp_path):
    """examples/tune/compare.py end to end with --synthetic (no GPU): the
    table, the JSON, and the honesty line."""
    import json
    import os
    import sys
    out = tmp_path / "rows.json"
    p = subprocess.run([sys.executable, str(TUNE / "compare.py"), "--synthetic", "--kernel",
                        "softmax", "--budget", "6", "--strategies", "random,grid,ppo",
                        "--json", str(out)], capture_output=True, text=True, timeout=300,
                       env={**os.environ})
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith("SYNTHETIC speedups")
    rows = json.loads(out.read_text())["rows"]
    full, rand, grid, ppo = rows
    assert full["strategy"] == "exhaustive (all)" and full["evaluations"] == 36  # constrained
    assert full["pct_of_best"] == 100.0 and rand["evaluations"] == grid["evaluations"] == 6
    assert rand["pct_of_best"] <= 100.0
    assert "skipped" in ppo or ppo["evaluations"] <= 6
