"""The KernelBench corpus end to end on a GPU (marked gpu): every importable
problem evaluated with its own Model as the candidate (passes, flagged
torch_fallback), and every candidate of the manifest gets its expected
outcome: honest and slow ones pass with custom kernels, cheats are caught."""
import json
import pathlib
import re

import pytest

torch = pytest.importorskip("torch", reason="needs torch with CUDA")

from kreward.kernelbench import ImportRefused, import_problem  # noqa: E402
from kreward.kernelbench.runner import Runner  # noqa: E402
from kreward.kernelbench.scoring import MOSTLY_TORCH_SHARE  # noqa: E402

KB = pathlib.Path(__file__).resolve().parents[4] / "examples" / "kernelbench"
CORPUS = sorted(KB.glob("level*/*.py"))
MANIFEST = json.loads((KB / "candidates" / "manifest.json").read_text())
CASES = [(p, c, e) for p, cands in MANIFEST.items() for c, e in cands.items()]
_runners = {}


def runner(problem, tmp_path_factory):
    if problem not in _runners:
        _runners[problem] = Runner(import_problem(str(KB / problem)), "cuda",
                                   cache_dir=str(tmp_path_factory.getbasetemp() / "ext"))
    return _runners[problem]


@pytest.mark.gpu
@pytest.mark.parametrize("path", CORPUS, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_corpus_reference_as_candidate(path, tmp_path_factory):
    try:
        imp = import_problem(str(path))
    except ImportRefused:
        pytest.skip("refused by the importer (test_importer checks the reason)")
    src = path.read_text() + "\nModelNew = Model\n"
    with Runner(imp, "cuda", cache_dir=str(tmp_path_factory.getbasetemp() / "ext"), spare=False) as r:
        res = r.evaluate(src, seed=1)
    print(json.dumps({"problem": f"{path.parent.name}/{path.stem}", **{k: res.get(k) for k in (
        "verdict", "time_us", "baseline_us", "speedup", "calls", "torch_fallback", "timing_mismatch")}}))
    assert res["verdict"] == "pass", res
    assert res["torch_fallback"] is True and res["reward"] == 0.5
    # the same code on both sides, timed the same way (runner.py): speedup ~1
    assert 0.85 <= res["speedup"] <= 1.15, res


@pytest.mark.gpu
@pytest.mark.parametrize("problem,cand,expect", CASES, ids=[c for _, c, _ in CASES])
def test_candidates(problem, cand, expect, tmp_path_factory):
    res = runner(problem, tmp_path_factory).evaluate((KB / "candidates" / cand).read_text(), seed=1)
    print(json.dumps({"candidate": cand, **{k: res.get(k) for k in (
        "verdict", "feedback", "time_us", "baseline_us", "speedup", "compile_seconds", "torch_fallback",
        "custom_share", "reward")}}))
    # a cheat is caught by a defence, never by an exception of its own code
    # (the lazy cheats once called torch.relu(out=), which torch refuses,
    # and were "caught" without reaching the defence they test)
    assert not re.search(r"\b[A-Z]\w*(Error|Exception)\b", res.get("feedback") or ""), res
    if expect == "pass":
        assert res["verdict"] == "pass" and res["torch_fallback"] is False, res
        assert res["kernels"]["custom"]
        # its own kernels do the work (a CUDA graph's copies and fills are no one's)
        assert not res["mostly_torch"] and res["custom_share"] >= 0.9, res
    elif expect == "mostly_torch":  # its own kernels do little of the work: little speed credit
        assert res["verdict"] == "pass" and res["torch_fallback"] is False and res["mostly_torch"], res
        assert res["custom_share"] < MOSTLY_TORCH_SHARE and res["reward"] < 0.55, res
    elif expect == "torch_fallback":
        assert res["verdict"] == "pass" and res["torch_fallback"] is True and res["reward"] == 0.5, res
    elif expect == "wrong":
        assert res["verdict"] == "wrong" and res["reward"] == 0.0, res
    else:  # caught: never paid for speed
        assert res["reward"] <= 0.5, res


@pytest.mark.gpu
def test_a_torch_compile_baseline_on_the_gpu(tmp_path):
    """torch.compile's baseline on a GPU: inductor's Triton kernels built
    (ptxas) before the baseline worker's seal, then timed."""
    imp = import_problem(str(KB / "level1" / "01_relu.py"))
    src = (KB / "level1" / "01_relu.py").read_text() + "\nModelNew = Model\n"
    with Runner(imp, "cuda", cache_dir=str(tmp_path / "ext"), baseline="compile", spare=False) as r:
        res = r.evaluate(src, seed=1)
        print(json.dumps({k: res.get(k) for k in ("verdict", "time_us", "baseline_us", "speedup",
                                                  "baseline_kind", "baseline_compile_seconds")}))
        assert res["verdict"] == "pass", res
        assert res["baseline_kind"] == "torch.compile" and res["baseline_compile_seconds"] > 0
        assert r._processes.baseline_facts["graphs"] >= 1
