"""KernelBench episodes through kreward.backends.ray on a local Ray cluster (CPU
only: the actors' ModelNew lanes run on the CPU, kernelbench={"devices":
["cpu"]}): a KernelBench file sent as its text, completions read for their
ModelNew block, a batch mixing kinds, one report each. Without devices named,
a CPU-only cluster cannot judge a ModelNew candidate and says so (error,
never a number)."""
import os
import pathlib

import pytest

ray = pytest.importorskip("ray")
torch = pytest.importorskip("torch", reason="ModelNew candidates run on torch")

from kreward.backends.ray import RayPool  # noqa: E402
from .test_evaluator_modelnew import HONEST, TINY, WRONG  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[4]
VADD = ROOT / "examples" / "problems" / "l1_vector_add"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    home = tmp_path_factory.mktemp("home")
    env = {"PYTHONPATH": str(ROOT / "bindings" / "python"),
           "KREWARD_LIBRARY": os.environ["KREWARD_LIBRARY"],
           "KREWARD_IMPORT_CACHE": str(home / "imports"),
           "KREWARD_KERNELBENCH_SOURCES": str(home / "sources")}
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
             runtime_env={"env_vars": env})
    yield tmp_path_factory.mktemp("problem")
    ray.shutdown()


def test_kernelbench_episodes_on_the_actors(cluster):
    path = cluster / "scaled_relu.py"
    path.write_text(TINY)
    with RayPool(gpu_actors=0, compile_actors=1, chunk=2, reward="kernelbench",
                 kernelbench={"devices": ["cpu"],
                              "runner": {"timeout_s": 60, "call_timeout_s": 20}}) as rp:
        reports = rp.evaluate_batch(
            [str(path), str(path), TINY, str(VADD / "problem.json")],
            completions=["```python\n" + HONEST + "```", "```python\n" + WRONG + "```",
                         "I give up", "```cuda\n__global__ void k( {\n```"])
        assert [r.verdict for r in reports] == ["passed", "incorrect", "compile_error",
                                                "compile_error"]
        assert reports[0].reward == 0.5 and reports[1].reward == 0.0
        assert "ModelNew" in reports[2].feedback


def test_a_cluster_that_cannot_run_modelnew_says_so(cluster):
    with RayPool(gpu_actors=0, compile_actors=1, reward="kernelbench") as rp:
        r = rp.evaluate(TINY, HONEST)
        assert r.verdict == "error" and r.reward is None
        assert "cannot be evaluated here" in r.message and r.text("unavailable")
