"""KernelBench problems through `kreward serve` (a live server, its ModelNew
lane on the CPU): KernelGYM's client request exactly as it sends it
(reference_code, kernel_code, its options), the native route with the
problem's text and with a registered name, OpenRLHF and slime with the
problem named per sample; the answers in each route's shape."""
import json
import pathlib
import shutil

import pytest

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")
torch = pytest.importorskip("torch", reason="ModelNew candidates run on torch")

from kreward.backends.http import Client  # noqa: E402
from serve_util import live_server  # noqa: E402
from .test_evaluator_modelnew import CRASH, HONEST, TINY, WRONG  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[4]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    problems = tmp_path_factory.mktemp("problems")
    (problems / "level1").mkdir()
    (problems / "level1" / "99_scaled_relu.py").write_text(TINY)
    shutil.copytree(ROOT / "examples" / "problems" / "l1_vector_add", problems / "l1_vector_add")
    home = tmp_path_factory.mktemp("home")
    with live_server("--problems", str(problems), "--kernelbench-devices", "cpu",
                     "--kernelbench-timeout", "60", "--reward", "kernelbench",
                     env={"KREWARD_IMPORT_CACHE": str(home / "imports"),
                          "KREWARD_KERNELBENCH_SOURCES": str(home / "sources")}) as s:
        yield s


@pytest.fixture
def client(server):
    with Client(server.url, max_wait=0) as c:
        yield c


def post(client, path, body):
    status, payload = client.request("POST", path, body)
    return status, json.loads(payload)


def test_kernelgyms_client_request_as_it_sends_it(client):
    task = {"task_id": "t-honest", "reference_code": TINY,
            "kernel_code": "```python\n" + HONEST + "```", "backend": "triton",
            "num_correct_trials": 5, "num_perf_trials": 100, "timeout": 600,
            "entry_point": "Model", "force_refresh": False, "is_valid": True}
    status, r = post(client, "/evaluate", task)
    assert status == 200, r
    assert r["status"] == "completed" and r["correctness"] is True and r["compiled"] is True
    assert r["decoy_kernel"] is False and r["speedup"] > 0
    assert r["metadata"]["verdict"] == "passed" and r["metadata"]["reward"] == 0.5
    status, r = post(client, "/evaluate", dict(task, task_id="t-wrong", kernel_code=WRONG))
    assert r["status"] == "completed" and r["correctness"] is False
    assert r["error_code"] == "CORRECTNESS_ERROR"
    status, r = post(client, "/evaluate", dict(task, task_id="t-crash", kernel_code=CRASH))
    assert r["status"] == "completed" and r["correctness"] is False
    assert r["metadata"]["verdict"] == "fault"
    # the result stays readable by id, as the client polls it
    status, payload = client.request("GET", "/results/t-honest")
    assert status == 200 and json.loads(payload)["correctness"] is True
    status, r = post(client, "/evaluate", dict(task, task_id="t-entry", entry_point="Net"))
    assert status == 400 and "entry_point" in r["detail"]


def test_native_routes_by_text_and_by_name_in_one_batch(client):
    body = {"jobs": [{"problem": TINY, "source": HONEST},
                     {"problem": "level1/99_scaled_relu", "source": WRONG},
                     {"problem": "99_scaled_relu", "completion": "no code at all"},
                     {"problem": "l1_vector_add", "source": "__global__ void k( {"}]}
    status, r = post(client, "/v1/evaluate/batch", body)
    assert status == 200, r
    verdicts = [rep["verdict"] for rep in r["reports"]]
    assert verdicts == ["passed", "incorrect", "compile_error", "compile_error"]
    assert "class ModelNew" in r["reports"][2]["texts"]["feedback"]
    status, payload = client.request("GET", "/v1/problems")
    names = json.loads(payload)["problems"]
    assert "level1/99_scaled_relu" in names and "l1_vector_add" in names


def test_openrlhf_and_slime_name_the_problem_per_sample(client):
    good = "```python\n" + HONEST + "```"
    status, r = post(client, "/openrlhf", {"query": ["Q" + good, "Q" + WRONG],
                                          "prompts": ["Q", "Q"],
                                          "labels": ["99_scaled_relu", "99_scaled_relu"]})
    assert status == 200, r
    assert r["rewards"] == [0.5, 0.0]
    status, r = post(client, "/slime", {"prompt": "Q", "response": good,
                                       "label": "level1/99_scaled_relu"})
    assert status == 200 and r == 0.5
