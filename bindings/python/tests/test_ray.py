"""kreward.backends.ray on a local Ray cluster (ray.init on this machine, CPU
only): the Evaluator's API end to end with compile actors, and an actor
killed mid-batch that costs no report."""
import os
import threading
import time

import pytest

ray = pytest.importorskip("ray")

from kreward.backends.ray import RayPool, wait_alive  # noqa: E402
from serve_util import ROOT, slow  # noqa: E402

VADD = ROOT / "examples" / "problems" / "l1_vector_add"
FAST = (VADD / "candidates" / "fast.cu").read_text()
BROKEN = "__global__ void k( { }"


@pytest.fixture(scope="module")
def cluster():
    # the actors import kreward from this tree and load this build's library
    env = {"PYTHONPATH": str(ROOT / "bindings" / "python"),
           "KREWARD_LIBRARY": os.environ["KREWARD_LIBRARY"]}
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
             runtime_env={"env_vars": env})
    yield
    ray.shutdown()


@pytest.fixture(scope="module")
def rpool(cluster):
    with RayPool(gpu_actors=0, compile_actors=2, chunk=1) as p:
        yield p


def test_api_end_to_end(rpool):
    r = rpool.evaluate("vector_add", FAST)
    assert r.verdict == "not_run" and r["compiled"] == 1 and r.reward is None
    assert rpool.score_of(r) is None  # not judged: no number
    r = rpool.evaluate(str(VADD / "problem.json"), BROKEN)  # a local path goes inline
    assert r.verdict == "compile_error" and r.reward == -10.0
    r = rpool.evaluate_completion("vector_add", "no code here")
    assert r.verdict == "compile_error" and "no code" in r.message
    reports = rpool.evaluate_batch(["vector_add", "gelu", "vector_add"],
                                   completions=["```cuda\n" + FAST + "```", BROKEN, None])
    assert [x.verdict for x in reports] == ["not_run", "compile_error", "compile_error"]
    st = rpool.status()
    assert len(st["compile"]) == 2 and st["gpu"] == []
    assert all(s["gpus"] == 0 for s in st["compile"])


def test_unknown_problem_raises(rpool):
    with pytest.raises(Exception, match="unknown problem"):
        rpool.evaluate("no_such_problem", FAST)


def test_killed_actor_loses_no_report(rpool):
    # the cluster's two CPUs hold the fixture's two actors: kill one of them
    p = rpool
    # candidates whose compile takes about 1.4 s each (NVRTC's constexpr
    # step limit), distinct so none is deduplicated: 3 per actor
    n = 6
    sources = [slow(i) for i in range(n)]
    out = {}
    t = threading.Thread(target=lambda: out.setdefault("r", p.evaluate_batch(
        ["vector_add"] * n, sources=sources)))
    t.start()
    time.sleep(1.0)  # each actor is inside its first chunk
    victim = p.compile[0]
    ray.kill(victim, no_restart=False)  # Ray restarts it (max_restarts)
    t.join(180)
    reports = out["r"]
    assert len(reports) == n
    assert [r.verdict for r in reports] == ["compile_error"] * n
    assert all("constant" in r.feedback for r in reports)
    assert p.resubmitted >= 1
    assert wait_alive(victim)["gpus"] == 0  # restarted, serving again
