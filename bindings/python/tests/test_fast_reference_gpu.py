"""GPU: a problem's fast reference (reference.fast, lib/run/fast_reference.c)
gives verification and the timed-output checks their expected outputs only
where it agreed with the reference within a quarter of each tolerance, and
a candidate is then judged with three quarters of it; the reference stays
the baseline."""
import json

import pytest

import kreward
from conftest import EXAMPLES

pytestmark = pytest.mark.gpu

BUNDLED = sorted(p.name for p in EXAMPLES.iterdir() if (p / "problem.json").exists())


@pytest.fixture(scope="module")
def gpu():
    with kreward.Context() as c:
        if not c.has_device:
            pytest.skip("no GPU")
        yield c


def candidate(name, kind):
    return (EXAMPLES / name / "candidates" / f"{kind}.cu").read_text()


def verify_section(report):
    return json.loads(report.to_json())["verify"]


@pytest.mark.parametrize("name", BUNDLED)
def test_each_bundled_fast_reference_agrees_and_judges(gpu, name):
    """The bundled problems name their candidates/fast.cu: it must agree, and
    judge the other honest kernel (slow.cu) right and the wrong one wrong."""
    problem = gpu.load_problem(str(EXAMPLES / name / "problem.json"))
    honest = gpu.evaluate(problem, candidate(name, "slow"), verify_only=True)
    v = verify_section(honest)
    assert v["expected_from"] == "reference.fast", v.get("fast_reference_unused")
    assert honest.verdict == "passed", honest.feedback
    wrong = gpu.evaluate(problem, candidate(name, "wrong"), verify_only=True)
    assert wrong.verdict == "incorrect", wrong.feedback


def scaled(bias, name="scaled"):
    """y = 2x moved by `bias` tolerances (rtol = atol = 1e-3) in double
    before rounding: rounding to f32 moves it by 1e-4 tolerances at most."""
    return (
        f"// kreward: launch {name} grid=(cdiv(N, 256)) block=(256) args=(x, y, N)\n"
        f"extern \"C\" __global__ void {name}(const float* x, float* y, int n)\n"
        "{\n"
        "    int i = blockIdx.x * 256 + threadIdx.x;\n"
        "    if (i >= n) return;\n"
        "    double w = 2.0 * (double)x[i];\n"
        f"    y[i] = (float)(w + {bias!r} * (1e-3 + 1e-3 * fabs(w)));\n"
        "}\n")


def scale_problem(fast_bias):
    return {
        "name": "scale_by_two", "dims": ["N"],
        "cases": [{"name": "small", "N": 1000}, {"name": "big", "N": 1 << 20, "timing": True}],
        "tensors": [{"name": "x", "dtype": "f32", "shape": ["N"], "role": "in",
                     "init": {"dist": "normal", "mean": 0, "std": 3}},
                    {"name": "y", "dtype": "f32", "shape": ["N"], "role": "out",
                     "tolerance": {"rtol": 1e-3, "atol": 1e-3}}],
        "reference": {"cuda": scaled(0.0, "naive"), "fast": {"cuda": scaled(fast_bias, "tuned")}},
    }


def test_a_fast_reference_half_a_tolerance_off_is_not_used(gpu):
    """Agreement means within a quarter of the tolerance: a fast kernel 0.5
    tolerances off everywhere is refused with the case and output, and the
    reference judges."""
    problem = gpu.parse_problem(scale_problem(0.5))
    honest = gpu.evaluate(problem, scaled(0.0), verify_only=True)
    v = verify_section(honest)
    assert v["expected_from"] == "reference"
    assert "disagrees with the reference in case 'small', output 'y'" in v["fast_reference_unused"], v
    assert honest.verdict == "passed", honest.feedback
    assert gpu.evaluate(problem, scaled(1.15), verify_only=True).verdict == "incorrect"


def test_the_slack_of_a_biased_fast_reference_pays_nothing(gpu):
    """The kernel that would beat a fast reference judged with the whole
    tolerance: the fast kernel is +0.2 tolerances off (accepted), and the
    candidate +1.15 off the reference, so within one tolerance of the fast
    kernel's outputs. Judged with three quarters of it, then against the
    reference itself, it is incorrect; the exact answer, +0.4 (within 3/4 of
    the fast kernel's) and -0.85 (1.05 from the fast kernel's, within the
    reference's tolerance: judged again against the reference) pass. With
    the fast kernel off, the same verdicts."""
    problem = gpu.parse_problem(scale_problem(0.2))
    sloppy = gpu.evaluate(problem, scaled(1.15), verify_only=True)
    assert verify_section(sloppy)["expected_from"] == "reference.fast"
    assert sloppy.verdict == "incorrect", sloppy.to_json()
    for bias in (0.0, 0.4, -0.85):
        close = gpu.evaluate(problem, scaled(bias), verify_only=True)
        assert close.verdict == "passed", (bias, close.feedback)
    timed = gpu.evaluate(problem, scaled(-0.85))  # the timed calls' checks judge alike
    assert timed.verdict == "passed", timed.to_json()


def vadd_with_fast(fast_source):
    d = EXAMPLES / "l1_vector_add"
    spec = json.loads((d / "problem.json").read_text())
    spec["reference"] = {"cuda": (d / "reference.cu").read_text(), "fast": {"cuda": fast_source}}
    return spec


def test_a_fast_reference_that_does_not_build_is_not_used(gpu):
    problem = gpu.parse_problem(vadd_with_fast("this is not CUDA"))
    honest = gpu.evaluate(problem, candidate("l1_vector_add", "fast"), verify_only=True)
    v = verify_section(honest)
    assert v["expected_from"] == "reference" and "does not build" in v["fast_reference_unused"]
    assert honest.verdict == "passed", honest.feedback


def test_turned_off_the_reference_judges(gpu, monkeypatch):
    monkeypatch.setenv("KR_FAST_REFERENCE", "0")
    problem = gpu.load_problem(str(EXAMPLES / "l2_rmsnorm" / "problem.json"))
    honest = gpu.evaluate(problem, candidate("l2_rmsnorm", "fast"))
    v = verify_section(honest)
    assert v["expected_from"] == "reference" and "turned off" in v["fast_reference_unused"]
    assert honest.verdict == "passed", honest.feedback


def test_the_baseline_is_still_the_reference(gpu, monkeypatch):
    """The speedup's definition does not move: the same candidate's speedup
    with and without the fast reference, within timing noise."""
    problem = gpu.load_problem(str(EXAMPLES / "l2_layernorm" / "problem.json"))
    on = gpu.evaluate(problem, candidate("l2_layernorm", "fast"))
    assert verify_section(on)["expected_from"] == "reference.fast"
    monkeypatch.setenv("KR_FAST_REFERENCE", "0")
    off = gpu.evaluate(problem, candidate("l2_layernorm", "fast"))
    assert verify_section(off)["expected_from"] == "reference"
    assert on.verdict == off.verdict == "passed"
    assert 0.8 < on["speedup"] / off["speedup"] < 1.25, (on["speedup"], off["speedup"])
