"""kreward.tune on the GPU (pytest -m gpu): the CUBIN reader against the
driver's attributes, the configurations the checks refuse are ones the GPU
refuses too, and tuning the softmax example (CUDA, through the pool) and a
Triton kernel end to end."""
import pytest

import kreward
from conftest import EXAMPLES, ROOT
from kreward import tune
from kreward.tune.cubin import kernel_resources

pytestmark = pytest.mark.gpu

TUNE = ROOT / "examples" / "tune"
GEMM_PROBLEM = str(EXAMPLES / "l4_matmul_f32" / "problem.json")
SOFTMAX_PROBLEM = str(EXAMPLES / "l2_softmax" / "problem.json")
GEMM_KNOBS = {"BM": [64, 128, 256], "BN": [64, 128, 256], "BK": [8, 32], "TM": [4, 8], "TN": [4, 8]}


def test_cubin_reader_matches_the_driver():
    gemm = (TUNE / "gemm.cu").read_text()
    k = tune.CudaKernel(gemm, GEMM_KNOBS, GEMM_PROBLEM)
    with kreward.Context() as ctx:
        for a in ({"BM": 64, "BN": 64, "BK": 8, "TM": 4, "TN": 4},
                  {"BM": 128, "BN": 128, "BK": 32, "TM": 8, "TN": 8}):
            with ctx.compile(k.render(a)) as p:
                ours = kernel_resources(p.binary()[0])["sgemm_tiled"]
                driver = p.info()["kernels"][0]
            print(a, ours, driver)
            assert ours["registers"] == driver["registers"]
            # the driver's figure is the kernel's own or includes the reserved KiB
            assert driver["shared_static_bytes"] in (
                ours["shared_static"], ours["shared_static"] + ours["shared_reserved"])


def test_refused_configurations_fail_on_the_gpu_too():
    """Each refusal kind, run anyway in the pool's sandboxed workers: none
    passes; threads and registers get the verdict the check predicted."""
    gemm = (TUNE / "gemm.cu").read_text()
    k = tune.CudaKernel(gemm, GEMM_KNOBS, GEMM_PROBLEM)
    refused = {"threads": {"BM": 256, "BN": 256, "BK": 8, "TM": 4, "TN": 4},
               "registers": {"BM": 256, "BN": 256, "BK": 8, "TM": 8, "TN": 8},
               "static shared": {"BM": 256, "BN": 256, "BK": 32, "TM": 8, "TN": 4}}
    with kreward.Context(no_device=True) as check, kreward.Evaluator(reward="makora") as ev:
        variants = {what: k.variant(a, check) for what, a in refused.items()}
        for what, v in variants.items():
            assert v.invalid is not None, (what, v.resources)
        reports = ev.evaluate_batch([GEMM_PROBLEM] * len(variants),
                                    [v.source for v in variants.values()])
        for (what, v), r in zip(variants.items(), reports):
            print(what, "predicted", v.verdict, v.invalid, "| GPU:", r.verdict, r.message)
            assert r.verdict != "passed", what
            if what in ("threads", "registers"):
                assert r.verdict == v.verdict, (what, r.message)


def test_tune_softmax_through_the_pool():
    softmax = (TUNE / "softmax.cu").read_text()
    k = tune.CudaKernel(softmax, {"THREADS": [128, 256, 512, 1024], "ROWS": [1, 2], "ONLINE": [0, 1]},
                        SOFTMAX_PROBLEM, constraints=["THREADS % (32 * ROWS) == 0"])
    result = tune.tune(k, strategy="random", max_evals=6, batch_size=3, seed=0)
    print(result.summary())
    assert result.evaluations == 6 and result.gpu_runs == 6
    assert result.best is not None and result.report["verdict"] == "passed"
    assert result.speedup > 1 and result.wall_per_gpu_eval_s > 0
    assert all(r.verdict == "passed" for r in result.history)  # every valid softmax is correct


def test_tune_a_triton_kernel():
    torch = pytest.importorskip("torch")
    triton = pytest.importorskip("triton")
    import triton.language as tl

    x = torch.zeros(17, device="cuda")  # 17: no divisibility specialisation for n

    @tune.optimize(max_evals=4, strategy="grid",
                   problem=str(EXAMPLES / "l1_vector_add" / "problem.json"),
                   knobs={"BLOCK": [256, 1024], "num_warps": [4, 8]}, grid=["cdiv(N, BLOCK)"],
                   args=["a", "b", "c", "N"], example_args=[x, x, x, 17])
    @triton.jit
    def tuned(a, b, c, n, BLOCK: tl.constexpr):
        pid = tl.program_id(0)
        offs = pid * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        tl.store(c + offs, tl.load(a + offs, mask=mask) + tl.load(b + offs, mask=mask), mask=mask)

    print(tuned.summary())
    assert tuned.evaluations == 4 and tuned.gpu_runs == 4
    assert tuned.report["verdict"] == "passed" and tuned.speedup > 1
    assert set(tuned.best) == {"BLOCK", "num_warps"}


def test_ppo_tunes_softmax_on_the_gpu():
    pytest.importorskip("torch")
    softmax = (TUNE / "softmax.cu").read_text()
    k = tune.CudaKernel(softmax, {"THREADS": [128, 256, 512, 1024], "ROWS": [1, 2], "ONLINE": [0, 1]},
                        SOFTMAX_PROBLEM, constraints=["THREADS % (32 * ROWS) == 0"])
    result = tune.tune(k, strategy="ppo", max_evals=6, batch_size=3, seed=0)
    print(result.summary())
    assert result.evaluations <= 6 and result.best is not None and result.speedup > 1
