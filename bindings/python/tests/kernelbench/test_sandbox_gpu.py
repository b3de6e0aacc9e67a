"""The ModelNew worker's sandbox on a GPU (marked gpu): honest CUDA
(load_inline: ninja, nvcc inside the sandbox) and Triton (ptxas, the C
compiler at first launch) candidates pass with their own kernels attributed
(CUPTI under the filter), the sandbox entered before torch ("start": CUDA
initialised inside it) and after CUDA ("init"); the sandbox cheats of
examples/kernelbench/candidates/sandbox/ (the caller's environment, files,
sockets, a program once sealed) get the verdict `denied`. One JSON line per
evaluation for the record."""
import json
import pathlib

import pytest

torch = pytest.importorskip("torch", reason="needs torch with CUDA")

from kreward.kernelbench import import_problem  # noqa: E402
from kreward.kernelbench.runner import Runner  # noqa: E402

KB = pathlib.Path(__file__).resolve().parents[4] / "examples" / "kernelbench"
CANDS = KB / "candidates"
HONEST = [("level1/01_relu.py", "level1_01_relu/honest_cuda.py"),
          ("level1/05_softmax.py", "level1_05_softmax/honest_triton.py")]
CHEATS = sorted(p.name for p in (CANDS / "sandbox").glob("cheat_*.py"))
_runners = {}


def runner(problem, mode, tmp_path_factory):
    if (problem, mode) not in _runners:
        _runners[problem, mode] = Runner(import_problem(str(KB / problem)), "cuda", sandbox=mode,
                                         cache_dir=str(tmp_path_factory.getbasetemp() / f"sbx-{mode}"))
    return _runners[problem, mode]


def record(name, mode, res):
    print(json.dumps({"candidate": name, "sandbox_mode": mode, **{k: res.get(k) for k in (
        "verdict", "feedback", "speedup", "compile_seconds", "torch_fallback", "sandbox", "notes",
        "phases_s", "started_ahead", "staging")}}))


@pytest.mark.gpu
# "start" failed on the H200 (cuInit 304) until the grant on
# /proc/self/task had the truncate right (d816279: docs/sandbox.md)
@pytest.mark.parametrize("mode", ["start", "init"])
@pytest.mark.parametrize("problem,cand", HONEST, ids=[c for _, c in HONEST])
def test_sandbox_honest_candidates_pass(problem, cand, mode, tmp_path_factory):
    res = runner(problem, mode, tmp_path_factory).evaluate((CANDS / cand).read_text(), seed=1)
    record(cand, mode, res)
    assert res["verdict"] == "pass", res
    assert res["torch_fallback"] is False and res["kernels"]["custom"], res
    sb = res["sandbox"]
    assert sb["applied"] and sb["landlock"] and sb["seccomp"] and sb["exec"] is False, sb
    if mode == "start":  # CUDA's threads started inside it
        assert sb["landlock_why"] == "", sb
    # the masked inputs reach both sandboxed workers device to device
    # (cuda_ipc.py), /dev/shm out of their grants
    assert res["staging"] == {"candidate": "ipc", "baseline": "ipc"}, res["staging"]


@pytest.mark.gpu
@pytest.mark.parametrize("cand", CHEATS)
def test_sandbox_cheats_are_denied(cand, tmp_path_factory):
    # the default mode, the one every caller gets
    res = runner("level1/01_relu.py", "init", tmp_path_factory).evaluate(
        (CANDS / "sandbox" / cand).read_text(), seed=1)
    record(f"sandbox/{cand}", "init", res)
    assert res["verdict"] == "denied" and res["reward"] == 0.0, res
