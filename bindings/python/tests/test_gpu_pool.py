"""GPU: the pool on real GPU workers, next to the caller's own PyTorch CUDA
context (pytest -m gpu on a GPU machine). A candidate that faults costs a
worker, never the caller's context; golden outputs from torch are computed
in this process, on the pool's thread."""
import threading

import pytest

import kreward
from conftest import EXAMPLES

pytestmark = pytest.mark.gpu

Y_IS_2X = {
    "name": "p", "dims": ["N"], "cases": [{"N": 1000}],
    "tensors": [{"name": "x", "dtype": "f32", "shape": ["N"], "role": "in"},
                {"name": "y", "dtype": "f32", "shape": ["N"], "role": "out"}],
    "reference": {"cuda": "// kreward: launch k grid=(cdiv(N,256)) block=(256) args=(x, y, N)\n"
                          "extern \"C\" __global__ void k(const float* x, float* y, int n) {"
                          " int i = blockIdx.x * 256 + threadIdx.x; if (i < n) y[i] = 2 * x[i]; }"},
}


def body(line):
    return ("// kreward: launch k grid=(cdiv(N,256)) block=(256) args=(x, y, N)\n"
            "extern \"C\" __global__ void k(const float* x, float* y, int n) {\n"
            "  int i = blockIdx.x * 256 + threadIdx.x;\n" + line + "\n}\n")


GOOD = body("if (i < n) y[i] = 2 * x[i];")
GOOD2 = body("if (i < n) y[i] = x[i] + x[i];")
FAULT = body("if (i < n) y[i + (1 << 28)] = 2 * x[i];")
TRAP = body("if (i == 7) __trap(); if (i < n) y[i] = 2 * x[i];")
HANG = body("while (x[0] != 12345.0f) { } if (i < n) y[i] = 2 * x[i];")
WRONG = body("if (i < n) y[i] = x[i];")


@pytest.fixture
def torch():
    """PyTorch with a live CUDA context in this process, before the pool runs
    anything."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch sees no GPU")
    assert caller_context_works(torch)
    return torch


def caller_context_works(torch):
    """Allocates and computes on the caller's own context."""
    x = torch.ones(1 << 20, device="cuda")
    total = (x * 2).sum().item()
    torch.cuda.synchronize()
    return total == 2.0 * (1 << 20)


@pytest.fixture
def problem(ctx):
    p = ctx.parse_problem(Y_IS_2X)
    yield p
    p.close()


# 1 for a pass, 0 for any other outcome of the candidate (no speed term: the
# jobs are verified only)
CORRECT = {"terms": [{"term": "correct", "weight": 1}]}


def verify_fast(seed=0):
    return dict(verify_only=True, verify_options={"timeout_s": 5, "seed": seed})


def test_a_faulting_kernel_leaves_the_callers_context_working(torch, problem, ctx):
    with ctx.reward(CORRECT) as reward, kreward.Pool(job_timeout_s=60) as pool:
        st = pool.status()
        assert st["gpus"] >= 1
        gpu_pids = {w["pid"] for w in st["workers"] if w["kind"] == "gpu"}
        t = pool.submit(problem, FAULT, name="fault.cu", reward=reward, **verify_fast())
        report = pool.wait(t)
        assert report.verdict == "fault", report.message
        assert report.reward == 0.0  # the candidate's outcome: scored here
        assert caller_context_works(torch)
        # the pool goes on, on a fresh worker (the warm spare)
        again = pool.wait(pool.submit(problem, GOOD, name="good.cu", reward=reward,
                                      **verify_fast()))
        assert again.verdict == "passed", again.message
        assert again.reward == 1.0
        st = pool.status()
        assert st["respawns"] >= 1
        assert gpu_pids != {w["pid"] for w in st["workers"] if w["kind"] == "gpu"}
    assert caller_context_works(torch)


def test_a_batch_mixing_good_and_faulting_candidates(torch, problem, ctx):
    cases = [("good", GOOD, "passed"), ("fault", FAULT, "fault"), ("trap", TRAP, "fault"),
             ("wrong", WRONG, "incorrect"), ("good2", GOOD2, "passed"),
             ("hang", HANG, "timeout"), ("good", GOOD, "passed")]  # the same job again
    with ctx.reward(CORRECT) as reward, kreward.Pool(job_timeout_s=60) as pool:
        jobs = [dict(problem=problem, source=src, name=name + ".cu", reward=reward,
                     **verify_fast()) for name, src, _ in cases]
        reports = pool.evaluate_batch(jobs)
        got = [(name, r.verdict) for (name, _, _), r in zip(cases, reports)]
        assert got == [(name, verdict) for name, _, verdict in cases], \
            [(n, r.verdict, r.message) for (n, _, _), r in zip(cases, reports)]
        for (_, _, verdict), r in zip(cases, reports):
            assert r.reward == (1.0 if verdict == "passed" else 0.0)  # every one scored here
        st = pool.status()
        assert st["respawns"] >= 3  # fault, trap, hang: each cost its worker
        assert st["dedup_hits"] >= 1  # the same job (name included) evaluated once
        assert caller_context_works(torch)
        # the same pool still serves, with next() in submission order
        tickets = [pool.submit(problem, src, reward=reward, **verify_fast(seed=7))
                   for src in (FAULT, GOOD)]
        assert [(t, r.verdict) for t, r in pool.results()] == \
            [(tickets[0], "fault"), (tickets[1], "passed")]
    assert caller_context_works(torch)


SOFTMAX_GOLDEN = {
    "name": "softmax_torch", "dims": ["M", "N"],
    "cases": [{"name": "small", "M": 3, "N": 33}, {"name": "odd", "M": 333, "N": 1025, "timing": True}],
    "tensors": [{"name": "x", "dtype": "f32", "shape": ["M", "N"], "role": "in",
                 "init": {"dist": "uniform", "low": -100, "high": 100}},
                {"name": "y", "dtype": "f32", "shape": ["M", "N"], "role": "out",
                 "tolerance": {"rtol": 1e-4, "atol": 1e-6}}],
    "reference": {"golden": True},
}


def test_torch_golden_runs_in_the_caller_on_the_pool_s_thread(torch, ctx):
    from kreward.torch_interop import golden_from_torch
    problem = ctx.parse_problem(SOFTMAX_GOLDEN)
    threads = set()

    def softmax(x):
        threads.add(threading.get_ident())
        return torch.softmax(x, dim=-1)

    golden_from_torch(problem, softmax)
    fast = (EXAMPLES / "l2_softmax" / "candidates" / "fast.cu").read_text()
    wrong = (EXAMPLES / "l2_softmax" / "candidates" / "wrong.cu").read_text()
    with kreward.Pool(job_timeout_s=120) as pool:
        good = pool.submit(problem, fast, name="fast.cu", verify_only=True)
        bad = pool.submit(problem, wrong, name="wrong.cu", verify_only=True)
        r = pool.wait(good)
        assert r.verdict == "passed", r.message
        assert pool.wait(bad).verdict == "incorrect"
    assert threads and threading.get_ident() not in threads  # the pool's thread, not ours
    assert caller_context_works(torch)
    problem.close()


def test_a_golden_exception_is_raised_from_wait(torch, ctx):
    problem = ctx.parse_problem(SOFTMAX_GOLDEN)

    def broken(request):
        raise RuntimeError("golden failed on purpose")

    problem.set_golden(broken)
    fast = (EXAMPLES / "l2_softmax" / "candidates" / "fast.cu").read_text()
    with kreward.Pool(job_timeout_s=120) as pool:
        t = pool.submit(problem, fast, verify_only=True)
        with pytest.raises(RuntimeError, match="golden failed on purpose") as e:
            pool.wait(t)
        assert e.value.report.verdict == "error"
        assert "golden failed on purpose" in e.value.report.message
        assert isinstance(e.value.__cause__, kreward.KrewardError)
    problem.close()


def test_the_evaluator_isolates_a_faulting_candidate(torch, tmp_path, vadd):
    from kreward import trainers
    src = (EXAMPLES / "l1_vector_add" / "candidates" / "fast.cu").read_text()
    fault = src.replace("c4[i] = make_float4", "c4[i + (1ll << 40)] = make_float4")
    assert fault != src
    with kreward.Evaluator(reward="makora", cache_dir=str(tmp_path)) as ev:
        assert ev.pool is not None and ev.pool.status()["gpus"] >= 1
        trainers.set_evaluator(ev)
        try:
            f = trainers.make_trl_reward(problem=vadd)
            scores = f(prompts=["p"] * 2, completions=[f"```cuda\n{fault}\n```",
                                                      f"```cuda\n{src}\n```"],
                       completion_ids=None)
        finally:
            trainers.set_evaluator(None)
        assert scores[0] == -5.0 and scores[1] > 10, scores
        assert caller_context_works(torch)
