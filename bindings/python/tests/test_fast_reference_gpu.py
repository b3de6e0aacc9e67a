"""GPU: a problem's fast reference (reference.fast, lib/run/fast_reference.c)
gives verification and the timed-output checks their expected outputs only
where it agrees with the reference; the reference stays the baseline."""
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
    problem = gpu.load_problem(str(EXAMPLES / name / "problem.json"))
    honest = gpu.evaluate(problem, candidate(name, "fast"), verify_only=True)
    v = verify_section(honest)
    assert v["expected_from"] == "reference.fast", v.get("fast_reference_unused")
    assert honest.verdict == "passed", honest.feedback
    wrong = gpu.evaluate(problem, candidate(name, "wrong"), verify_only=True)
    assert wrong.verdict == "incorrect", wrong.feedback


def with_fast(name, kind):
    d = EXAMPLES / name
    spec = json.loads((d / "problem.json").read_text())
    spec["reference"] = {"cuda": (d / "reference.cu").read_text(),
                         "fast": {"cuda": candidate(name, kind)}}
    return spec


def test_a_fast_reference_that_disagrees_is_not_used(gpu):
    """The kernel that would beat a fast reference taken on trust: the
    problem's wrong kernel named as its fast twin. Trusted, it would pass the
    wrong candidate and fail the honest one; checked, it is refused with the
    case and output where it disagrees, and the reference judges."""
    problem = gpu.parse_problem(with_fast("l2_softmax", "wrong"))
    honest = gpu.evaluate(problem, candidate("l2_softmax", "fast"), verify_only=True)
    v = verify_section(honest)
    assert v["expected_from"] == "reference"
    assert "disagrees with the reference in case" in v["fast_reference_unused"], v
    assert honest.verdict == "passed", honest.feedback
    wrong = gpu.evaluate(problem, candidate("l2_softmax", "wrong"), verify_only=True)
    assert wrong.verdict == "incorrect"


def test_a_fast_reference_that_does_not_build_is_not_used(gpu):
    spec = with_fast("l1_vector_add", "fast")
    spec["reference"]["fast"] = {"cuda": "this is not CUDA"}
    problem = gpu.parse_problem(spec)
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
    assert honest.verdict == "passed" and honest["speedup"] > 1, honest.feedback


def test_the_baseline_is_still_the_reference(gpu):
    """The speedup's definition does not move: the slow candidate is timed
    against the naive reference, fast reference or not."""
    problem = gpu.load_problem(str(EXAMPLES / "l2_layernorm" / "problem.json"))
    on = gpu.evaluate(problem, candidate("l2_layernorm", "fast"))
    assert verify_section(on)["expected_from"] == "reference.fast"
    assert on.verdict == "passed" and on["speedup"] > 2, on.to_json()
