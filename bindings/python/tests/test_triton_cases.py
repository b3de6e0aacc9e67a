"""Device-only Triton candidates compiled per case (kreward.triton_cases).
CPU: launch lines, expressions, the stripped module, per-case specs and plans;
with triton installed, real per-case compiles for sm_90 without a GPU, each
plan checked by the library against its CUBIN. GPU (marked gpu): end to end."""
import base64
import json
import pathlib

import pytest

import kreward
from kreward import triton_cases as tc
from kreward.triton_expr import ExprError, evaluate

ROOT = pathlib.Path(__file__).resolve().parents[3]
VADD = ROOT / "examples" / "problems" / "l1_vector_add"
SPEC = json.loads((VADD / "problem.json").read_text())  # cases N = 1, 100003, 33554433 (timed)

ADD = '''
import os
import torch
import triton
import triton.language as tl

# kreward: launch add_kernel grid=(cdiv(N, BLOCK)) args=(a, b, c, N) BLOCK=min(1024, next_pow2(N)) num_warps=4

@triton.jit
def add_kernel(a, b, c, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(c + offs, tl.load(a + offs, mask=mask) + tl.load(b + offs, mask=mask), mask=mask)

class ModelNew(torch.nn.Module):
    pass

os.environ["KR_MODULE_CODE_RAN"] = "1"
'''

AUTOTUNED = '''
import triton
import triton.language as tl

# kreward: launch add_kernel grid=(cdiv(N, BLOCK)) args=(a, b, c, N)

@triton.autotune(configs=[triton.Config({"BLOCK": 256}, num_warps=2),
                          triton.Config({"BLOCK": 1024}, num_warps=8)], key=["n"])
@triton.heuristics({"EVEN": lambda args: args["n"] % args["BLOCK"] == 0})
@triton.jit
def add_kernel(a, b, c, n, BLOCK: tl.constexpr, EVEN: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    if EVEN:
        tl.store(c + offs, tl.load(a + offs) + tl.load(b + offs))
    else:
        mask = offs < n
        tl.store(c + offs, tl.load(a + offs, mask=mask) + tl.load(b + offs, mask=mask), mask=mask)
'''


def test_expressions():
    assert evaluate("cdiv(N, 1024)", {"N": 100003}) == 98
    assert evaluate("min(1024, next_pow2(N))", {"N": 33}) == 64
    assert evaluate("next_power_of_2(1) + max(1, 2, 3) - N / 4 + N % 5", {"N": 9}) == 1 + 3 - 2 + 4
    assert evaluate("-N * 2", {"N": 3}) == -6
    for bad, why in [("__import__('os')", "not allowed"), ("N.bit_length()", "not allowed"),
                     ("M + 1", "unknown name 'M'"), ("1.5", "not allowed"), ("cdiv(N, 0)", "division by zero"),
                     ("next_pow2(1, 2)", "takes 1"), ("N +", "not an expression")]:
        with pytest.raises(ExprError, match=why):
            evaluate(bad, {"N": 4})


def test_launch_line_and_refusals():
    launch = tc.parse_launch(ADD)
    assert launch.kernel == "add_kernel" and launch.grid == ["cdiv(N, BLOCK)"]
    assert launch.args == ["a", "b", "c", "N"]
    assert launch.meta == [("BLOCK", "min(1024, next_pow2(N))"), ("num_warps", "4")]
    with pytest.raises(tc.TritonCandidateError, match="0 '# kreward: launch' lines"):
        tc.parse_launch("import triton\n")
    with pytest.raises(tc.TritonCandidateError, match="2 '# kreward: launch' lines"):
        tc.parse_launch("# kreward: launch k grid=(1) args=()\n# kreward: launch k grid=(1) args=()\n")
    with pytest.raises(tc.TritonCandidateError, match="grid="):
        tc.parse_launch("# kreward: launch k args=(a)\n")
    with pytest.raises(tc.TritonCandidateError, match="unbalanced"):
        tc.parse_launch("# kreward: launch k grid=(cdiv(N, 4) args=(a)\n")


def test_the_compiled_module_keeps_kernels_only():
    mod = tc.kernel_module(ADD + "\nBLOCK_MAX = 1024\nX: tl.constexpr = tl.constexpr(4)\nY = os.getcwd()\n")
    assert "def add_kernel" in mod and "@triton.jit" in mod and "import triton.language as tl" in mod
    assert "BLOCK_MAX = 1024" in mod and "X: tl.constexpr = tl.constexpr(4)" in mod
    for gone in ("ModelNew", "import os", "import torch", "KR_MODULE_CODE_RAN", "getcwd"):
        assert gone not in mod
    assert "@triton.autotune" in tc.kernel_module(AUTOTUNED)


def test_source_from_a_completion():
    completion = (f"The reference:\n```python\nimport torch\n```\nMine:\n```python\n{ADD}```\n"
                  "and a note:\n```python\nprint(1)\n```\n")
    assert tc.triton_source(completion).strip() == ADD.strip()
    assert tc.triton_source("```python\n@triton.jit\ndef k(): pass\n```") is None  # no launch line


def test_each_case_gets_its_own_constexprs_and_arguments():
    launch, cases = tc.case_specs(ADD, SPEC)
    assert [c["name"] for c in cases] == ["one", "odd", "large"]
    assert [c["constexprs"] for c in cases] == [{"BLOCK": 1}, {"BLOCK": 1024}, {"BLOCK": 1024}]
    assert [c["args"][3]["value"] for c in cases] == [1, 100003, 33554433]
    assert cases[1]["args"][0] == {"param": "a", "kind": "tensor", "dtype": "f32", "shape": [100003]}
    assert all(c["options"] == {"num_warps": 4} for c in cases)
    with pytest.raises(tc.TritonCandidateError, match="3 args for the 4 non-constexpr"):
        tc.case_specs(ADD.replace("args=(a, b, c, N)", "args=(a, b, c)"), SPEC)
    with pytest.raises(tc.TritonCandidateError, match="'WIDTH' is neither a constexpr"):
        tc.case_specs(ADD.replace("num_warps=4", "WIDTH=4"), SPEC)
    with pytest.raises(tc.TritonCandidateError, match="case one: 'cdiv\\(M, BLOCK\\)': unknown name 'M'"):
        tc.case_specs(ADD.replace("grid=(cdiv(N, BLOCK))", "grid=(cdiv(M, BLOCK))"), SPEC)
    with pytest.raises(tc.TritonCandidateError, match="no @triton.jit kernel 'add'"):
        tc.case_specs(ADD.replace("launch add_kernel", "launch add"), SPEC)


def test_plan_of_a_case_drops_specialised_arguments_and_adds_scratch():
    case = {"name": "one", "args": [{"param": p} for p in ("a", "b", "c", "n")]}
    compiled = {"name": "add_kernel", "grid": [1], "num_warps": 2, "shared": 64, "specialised": ["n"],
                "global_scratch_size": 16, "profile_scratch_size": 0}
    plan = tc.plan_for_case(compiled, case, ["a", "b", "c", "N"], num_params=5)
    assert plan["launches"] == [{"kernel": "add_kernel", "grid": ["1"], "block": [64], "smem": 64,
                                 "args": ["a", "b", "c", "__triton_scratch0", "__triton_scratch1"]}]
    assert plan["scratch"][0]["bytes"] == "max(1, 16 * (1))"
    with pytest.raises(tc.TritonCandidateError, match="3 arguments for a kernel with 2"):
        tc.plan_for_case(compiled, case, ["a", "b", "c", "N"], num_params=2)


# ---- real compiles for sm_90, without a GPU ----

@pytest.fixture(scope="module")
def offline():
    pytest.importorskip("triton", reason="compiling needs triton")
    pytest.importorskip("torch", reason="triton's specialisation reads torch dtypes")
    with kreward.Context(no_device=True) as ctx:
        yield ctx


def check(ctx, compiled, case, launch, case_index):
    program = ctx.program_from_binary(base64.b64decode(compiled["cubin"]), name="k.cubin")
    nparams = len(program.info()["kernels"][0]["params"])
    plan = ctx.plan_from_json(tc.plan_for_case(compiled, case, launch.args, nparams))
    sub = ctx.parse_problem(tc.one_case_spec(SPEC, case_index), base_dir=str(VADD))
    ctx.check_plan(plan, sub, program)  # raises when the plan does not fit the CUBIN
    return program, plan, sub


def test_every_case_compiles_its_own_specialisation(offline):
    launch, cases = tc.case_specs(ADD, SPEC)
    compiled = tc.compile_cases(ADD, cases, launch.kernel, arch=90)
    assert [k.get("error") for k in compiled] == [None] * 3, compiled
    one, odd, large = compiled
    assert one["specialised"] == ["n"] and odd["specialised"] == large["specialised"] == []
    assert [k["constexprs"]["BLOCK"] for k in compiled] == [1, 1024, 1024]
    assert [k["grid"] for k in compiled] == [[1], [98], [32769]]
    assert one["cubin"] != odd["cubin"]
    for c in range(3):
        check(offline, compiled[c], cases[c], launch, c)
    # the case "one" kernel has no parameter n: its plan does not fit the others' kernel
    program, plan, _ = check(offline, odd, cases[1], launch, 1)
    wrong = offline.plan_from_json(tc.plan_for_case(one, cases[0], launch.args, 5))
    with pytest.raises(kreward.KrewardError):
        offline.check_plan(wrong, offline.parse_problem(tc.one_case_spec(SPEC, 1), base_dir=str(VADD)), program)


def test_evaluation_without_a_gpu_plans_every_case(offline):
    launch, cases = tc.case_specs(ADD, SPEC)
    compiled = tc.compile_cases(ADD, cases, launch.kernel, arch=90)
    res = tc.evaluate_triton_cases(offline, str(VADD / "problem.json"), ADD, compiled=compiled)
    assert res.verdict == "not_run" and res.failed_case is None
    assert res.cases == [("one", "not_run"), ("odd", "not_run"), ("large", "not_run")]
    # a plan that does not fit the case's kernel is judged, not raised
    broken = list(compiled)
    broken[1] = dict(compiled[1], specialised=["n"])  # n dropped: a scratch pointer lands on it
    res = tc.evaluate_triton_cases(offline, str(VADD / "problem.json"), ADD, compiled=broken)
    assert res.failed_case == "odd" and res.verdict == "invalid_plan", res.report.feedback
    assert res.cases == [("one", "not_run"), ("odd", "invalid_plan")]


def test_autotuned_kernel_takes_each_cases_config(offline):
    launch, cases = tc.case_specs(AUTOTUNED, SPEC, configs={0: 0, 1: 1, 2: 0})
    compiled = tc.compile_cases(AUTOTUNED, cases, launch.kernel, arch=90)
    assert [k.get("error") for k in compiled] == [None] * 3, compiled
    assert [(k["constexprs"]["BLOCK"], k["num_warps"]) for k in compiled] == [(256, 2), (1024, 8), (256, 2)]
    assert [k["constexprs"]["EVEN"] for k in compiled] == [False, False, False]
    assert [k["grid"] for k in compiled] == [[1], [98], [131073]]
    for c in range(3):
        _, plan, _ = check(offline, compiled[c], cases[c], launch, c)
    spec = dict(SPEC, cases=[{"name": "even", "N": 4096, "timing": True}])
    launch, cases = tc.case_specs(AUTOTUNED, spec, configs={0: 1})
    assert tc.compile_cases(AUTOTUNED, cases, launch.kernel, arch=90)[0]["constexprs"]["EVEN"] is True
    launch, cases = tc.case_specs(AUTOTUNED, SPEC)  # no config named, no GPU to tune on
    assert "autotuned" in tc.compile_cases(AUTOTUNED, cases, launch.kernel, arch=90)[0]["error"]


def test_a_kernel_that_does_not_compile_says_why(offline):
    bad = ADD.replace("tl.arange(0, BLOCK)", "tl.arange(0, BLOCK) + undefined_name")
    launch, cases = tc.case_specs(bad, SPEC)
    out = tc.compile_cases(bad, cases, launch.kernel, arch=90)
    assert all("undefined_name" in k["error"] for k in out)


# ---- on the GPU ----

@pytest.mark.gpu
def test_vector_add_end_to_end_per_case():
    pytest.importorskip("triton")
    with kreward.Context() as ctx:
        if not ctx.has_device:
            pytest.skip("needs a GPU")
        res = tc.evaluate_triton_cases(ctx, str(VADD / "problem.json"), f"```python\n{ADD}```", reward="kernelgym")
        print(res.report.to_json())
        assert res.verdict == "passed", res.report.feedback
        assert [n for n, _ in res.cases] == ["one", "odd", "large"]
        assert res.compiled[0]["specialised"] == ["n"] and res.report["speedup"] > 0.5


@pytest.mark.gpu
def test_autotuned_kernel_end_to_end_on_the_gpu():
    pytest.importorskip("triton")
    with kreward.Context() as ctx:
        if not ctx.has_device:
            pytest.skip("needs a GPU")
        res = tc.evaluate_triton_cases(ctx, str(VADD / "problem.json"), AUTOTUNED)
        print([(k["config"], k["grid"]) for k in res.compiled])
        assert res.verdict == "passed", res.report.feedback
        assert all(k["config"]["BLOCK"] in (256, 1024) for k in res.compiled)  # the autotuner's choice
