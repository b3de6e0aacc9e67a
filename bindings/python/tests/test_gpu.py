"""GPU: PyTorch golden outputs, a Triton kernel, a torch.compile baseline,
and a trainer adapter, end to end (pytest -m gpu on a GPU machine)."""
import array
import json

import pytest

import kreward
from conftest import EXAMPLES

pytestmark = pytest.mark.gpu

SOFTMAX_GOLDEN = {
    "name": "softmax_torch",
    "dims": ["M", "N"],
    "cases": [{"name": "small", "M": 3, "N": 33}, {"name": "odd", "M": 333, "N": 1025},
              {"name": "large", "M": 8192, "N": 2048, "timing": True}],
    "tensors": [{"name": "x", "dtype": "f32", "shape": ["M", "N"], "role": "in",
                 "init": {"dist": "uniform", "low": -100, "high": 100}},
                {"name": "y", "dtype": "f32", "shape": ["M", "N"], "role": "out",
                 "tolerance": {"rtol": 1e-4, "atol": 1e-6}}],
    "reference": {"golden": True},
    "bytes": "8*M*N",
}


@pytest.fixture
def gpu():
    with kreward.Context() as c:
        yield c


def softmax_candidate():
    src = (EXAMPLES / "l2_softmax" / "candidates" / "fast.cu").read_text()
    return src


def test_torch_golden_end_to_end(gpu):
    torch = pytest.importorskip("torch")
    from kreward.torch_interop import golden_from_torch, torch_baseline
    problem = gpu.parse_problem(SOFTMAX_GOLDEN)
    golden_from_torch(problem, lambda x: torch.softmax(x, dim=-1))
    eager = torch_baseline(problem, lambda x: torch.softmax(x, dim=-1), name="torch eager")
    report = gpu.evaluate(problem, softmax_candidate(), reward="kevin", baseline=eager)
    print(report.to_json())
    assert report.verdict == "passed", report.feedback
    assert report["baseline_us"] > 0 and report["speedup"] > 0
    # a wrong candidate fails against the torch outputs
    wrong = (EXAMPLES / "l2_softmax" / "candidates" / "wrong.cu").read_text()
    bad = gpu.evaluate(problem, wrong, verify_only=True)
    assert bad.verdict == "incorrect"


def test_golden_exception_is_raised(gpu):
    problem = gpu.parse_problem(SOFTMAX_GOLDEN)

    def broken(request):
        raise RuntimeError("golden failed on purpose")
    problem.set_golden(broken)
    with pytest.raises(RuntimeError, match="golden failed on purpose") as e:
        gpu.evaluate(problem, softmax_candidate(), verify_only=True)
    assert isinstance(e.value.__cause__, kreward.KrewardError)  # what the library said
    assert "golden failed on purpose" in e.value.__cause__.message


def vadd_golden_problem(gpu):
    spec = json.loads((EXAMPLES / "l1_vector_add" / "problem.json").read_text())
    spec["reference"] = {"golden": True}
    # sizes a golden in plain Python computes quickly
    spec["cases"] = [{"name": "one", "N": 1}, {"name": "odd", "N": 100003},
                     {"name": "mid", "N": 1 << 18, "timing": True}]
    return gpu.parse_problem(spec)


def python_vadd(request):
    """c = a + b in plain Python, on the library's own inputs."""
    a = array.array("f", bytes(request.inputs["a"]))
    b = array.array("f", bytes(request.inputs["b"]))
    c = array.array("f", (x + y for x, y in zip(a, b)))
    request.outputs["c"][:] = memoryview(c.tobytes())


def test_python_golden_and_sanity(gpu):
    problem = vadd_golden_problem(gpu)
    problem.set_golden(python_vadd)
    sound, summary = problem.sanity()
    assert sound, summary
    src = (EXAMPLES / "l1_vector_add" / "candidates" / "fast.cu").read_text()
    report = gpu.evaluate(problem, src, verify_only=True)
    assert report.verdict == "passed", report.feedback
    wrong = (EXAMPLES / "l1_vector_add" / "candidates" / "wrong.cu").read_text()
    assert gpu.evaluate(problem, wrong, verify_only=True).verdict == "incorrect"


def test_evaluate_program_on_gpu(gpu, vadd):
    src = (EXAMPLES / "l1_vector_add" / "candidates" / "fast.cu").read_text()
    problem = gpu.load_problem(vadd)
    prog, plan = gpu.compile(src, name="fast.cu"), gpu.plan_from_source(src)
    report = gpu.evaluate_program(problem, prog, plan, reward="kevin")
    assert report.verdict == "passed", report.feedback
    assert report["compiled"] == 1 and report["registers"] > 0 and report["speedup"] > 1
    assert report.reward == pytest.approx(0.3 + report["speedup"])


def test_verify_then_benchmark_one_report(gpu, vadd):
    src = (EXAMPLES / "l1_vector_add" / "candidates" / "fast.cu").read_text()
    problem = gpu.load_problem(vadd)
    prog, plan = gpu.compile(src), gpu.plan_from_source(src)
    report = gpu.verify(problem, prog, plan)
    assert report.passed, report.feedback
    same = gpu.benchmark(problem, prog, plan, report=report, max_time_s=2.0)
    assert same is report and report["time_us"] > 0 and report.passed
    with pytest.raises(TypeError):
        gpu.benchmark(problem, prog, plan, no_such_option=1)


def test_torch_compile_baseline(gpu):
    torch = pytest.importorskip("torch")
    from kreward.torch_interop import torch_baseline
    problem = gpu.load_problem(str(EXAMPLES / "l3_bias_gelu" / "problem.json"))
    fn = lambda x, bias: torch.nn.functional.gelu(x + bias)  # noqa: E731
    compiled = torch_baseline(problem, fn, compile=True)
    src = (EXAMPLES / "l3_bias_gelu" / "candidates" / "fast.cu").read_text()
    report = gpu.evaluate(problem, src, baseline=compiled)
    d = report.to_dict()
    print(d["timing"])
    assert report.verdict == "passed"
    assert d["timing"]["baseline"]["name"] == "torch.compile"
    assert report["baseline_us"] > 1 and report["speedup"] > 0


def test_triton_kernel_end_to_end(gpu):
    torch = pytest.importorskip("torch")
    triton = pytest.importorskip("triton")
    import triton.language as tl
    from kreward.triton_interop import evaluate_triton

    @triton.jit
    def add_kernel(a, b, c, n, BLOCK: tl.constexpr):
        pid = tl.program_id(0)
        offs = pid * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        tl.store(c + offs, tl.load(a + offs, mask=mask) + tl.load(b + offs, mask=mask), mask=mask)

    x = torch.zeros(17, device="cuda")  # 17: no divisibility specialisation for n
    compiled = add_kernel.warmup(x, x, x, 17, BLOCK=1024, grid=(1,))
    problem = gpu.load_problem(str(EXAMPLES / "l1_vector_add" / "problem.json"))
    report = evaluate_triton(gpu, problem, compiled, grid=["cdiv(N, 1024)"], args=["a", "b", "c", "N"],
                             reward="kernelgym")
    print(report.to_json())
    assert report.verdict == "passed", report.feedback
    assert report["speedup"] > 1
    assert report["compiled"] == 1 and report["kernels"] == 1  # kept by kr_evaluate_program


def test_trainer_adapter_on_gpu(vadd):
    from kreward import trainers
    src = (EXAMPLES / "l1_vector_add" / "candidates" / "fast.cu").read_text()
    ev = kreward.Evaluator(reward="makora")
    trainers.set_evaluator(ev)
    try:
        out = trainers.compute_score("kernels", f"```cuda\n{src}\n```", vadd)
        assert out["verdict"] == "passed" and out["score"] > 10
        f = trainers.make_trl_reward(problem=vadd)
        wrong = (EXAMPLES / "l1_vector_add" / "candidates" / "wrong.cu").read_text()
        scores = f(prompts=["p", "p"], completions=[f"```cuda\n{src}\n```", f"```cuda\n{wrong}\n```"],
                   completion_ids=None)
        assert scores[0] > 10 and scores[1] == -5
    finally:
        trainers.set_evaluator(None)
        ev.close()


def test_profile_says_the_generators_gpu_time(monkeypatch):
    """KR_PROFILE (read when a context's engine is made) adds the GPU's own
    time by category to a report (lib/run/gpu_profile.c): the generator's
    bytes over its time is a bandwidth a GPU can have."""
    monkeypatch.setenv("KR_PROFILE", "metrics")
    with kreward.Context() as c:
        problem = c.load_problem(str(EXAMPLES / "l1_vector_add" / "problem.json"))
        r = c.evaluate(problem, (EXAMPLES / "l1_vector_add" / "candidates" / "fast.cu").read_text())
        assert r.verdict == "passed", r.feedback
        ms, mb = r["profile_gpu_generate_ms"], r["profile_generated_mb"]
        assert mb > 100 and ms > 0, (mb, ms)
        assert 10 < mb / ms < 10000, f"{mb / ms:.0f} GB/s"  # MB per ms is GB/s
        # the GPU's time by category (gpu_profile.h): each part of an
        # evaluation ran, and together they fit in the phases that use the GPU
        parts = {k: r[f"profile_gpu_{k}_ms"] for k in (
            "generate", "fill", "checks", "reset", "reference", "candidate", "baseline")}
        assert all(v > 0 for v in parts.values()), parts
        phases = r["profile_verify_ms"] + r["profile_weak_ms"] + r["profile_bench_ms"]
        assert sum(parts.values()) <= 1.05 * phases, (parts, phases)
        # the candidate's calls: a few of a 0.1 ms kernel in verification and
        # the benchmark's samples, never less than the samples' own median
        assert parts["candidate"] >= r["time_us"] * 1e-3, (parts["candidate"], r["time_us"])
