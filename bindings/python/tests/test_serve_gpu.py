"""GPU (-m gpu): `kreward serve` with real verdicts, and the Ray pool on two
GPUs (an H200 x2 machine): throughput against one GPU, and a GPU actor
killed mid-batch with no report lost."""
import json
import os
import threading
import time

import pytest

from kreward.backends.http import Client
from serve_util import ROOT, live_server

pytestmark = pytest.mark.gpu
VADD = ROOT / "examples" / "problems" / "l1_vector_add"
CANDIDATES = {name: (VADD / "candidates" / f"{name}.cu").read_text()
              for name in ("fast", "slow", "wrong")}


def test_server_real_verdicts():
    pytest.importorskip("uvicorn")
    with live_server("--require-gpu", gpus=None) as s:
        c = Client(s.url)
        assert c.status()["compile_only"] is False
        reports = c.evaluate_batch(["vector_add"] * 3, sources=list(CANDIDATES.values()))
        assert [r.verdict for r in reports] == ["passed", "passed", "incorrect"]
        assert reports[0]["speedup"] > 0 and c.score_of(reports[0]) > c.score_of(reports[2])
        status, payload = c.request("POST", "/evaluate", {"task_id": "g1", "problem": "vector_add",
                                                          "kernel_code": CANDIDATES["fast"]})
        d = json.loads(payload)
        assert d["status"] == "completed" and d["correctness"] is True
        assert d["kernel_runtime"] > 0 and d["speedup"] > 0


def _ray():
    ray = pytest.importorskip("ray")
    if not ray.is_initialized():
        env = {"PYTHONPATH": str(ROOT / "bindings" / "python")}
        if os.environ.get("KREWARD_LIBRARY"):
            env["KREWARD_LIBRARY"] = os.environ["KREWARD_LIBRARY"]
        ray.init(include_dashboard=False, log_to_driver=False, runtime_env={"env_vars": env})
    if ray.cluster_resources().get("GPU", 0) < 2:
        pytest.skip("needs two GPUs")
    return ray


def _variants(n):
    # distinct sources (no deduplication), all the fast, correct kernel
    return [CANDIDATES["fast"] + f"\n// variant {i}\n" for i in range(n)]


def test_ray_two_gpus_throughput_and_killed_actor():
    ray = _ray()
    from kreward.backends.ray import RayPool, wait_alive
    n = 64
    rates = {}
    for gpus in (1, 2):
        with RayPool(gpu_actors=gpus, compile_actors=2, chunk=4) as p:
            p.evaluate("vector_add", CANDIDATES["fast"])  # warm: contexts, baselines
            t0 = time.monotonic()
            reports = p.evaluate_batch(["vector_add"] * n, sources=_variants(n))
            rates[gpus] = n / (time.monotonic() - t0)
            assert [r.verdict for r in reports] == ["passed"] * n
    print(f"\nRay pool, vector_add fast preset: 1 GPU {rates[1]:.1f}/s, 2 GPUs {rates[2]:.1f}/s "
          f"({rates[2] / rates[1]:.2f}x)")
    assert rates[2] > 1.5 * rates[1]
    with RayPool(gpu_actors=2, compile_actors=2, chunk=2) as p:
        out = {}
        t = threading.Thread(target=lambda: out.setdefault("r", p.evaluate_batch(
            ["vector_add"] * n, sources=_variants(n))))
        t.start()
        time.sleep(2.0)
        ray.kill(p.gpu[0], no_restart=False)
        t.join(600)
        assert [r.verdict for r in out["r"]] == ["passed"] * n
        assert p.resubmitted >= 1
        assert wait_alive(p.gpu[0])["gpus"] == 1


def test_server_both_kinds_on_the_gpu():
    """One rail behind the server: OpenRLHF, slime and a KernelGYM client
    sending `reference_code`, each with ModelNew candidates (honest,
    wrong) beside a kreward CUDA one, on a real GPU."""
    pytest.importorskip("uvicorn")
    torch = pytest.importorskip("torch")
    pytest.importorskip("triton")
    from test_rail_gpu import FAST_CU, HONEST, SOFTMAX, WRONG
    softmax = open(SOFTMAX).read()
    prompt = "Write it.\n"
    with live_server("--require-gpu", gpus=None) as s:
        c = Client(s.url)
        body = {"query": [prompt + "```python\n" + HONEST + "```",
                          prompt + "```cuda\n" + FAST_CU + "```",
                          prompt + "```python\n" + WRONG + "```"],
                "prompts": [prompt] * 3, "labels": [softmax, "vector_add", softmax]}
        status, payload = c.request("POST", "/openrlhf", body)
        d = json.loads(payload)
        print("openrlhf", status, d)
        assert status == 200 and d["extra_logs"]["passed"] == [1.0, 1.0, 0.0]
        assert d["rewards"][0] > d["rewards"][2] and d["rewards"][1] > d["rewards"][2]
        status, payload = c.request("POST", "/slime?detail=1",
                                    {"prompt": "go", "response": "```python\n" + HONEST + "```",
                                     "label": softmax})
        d = json.loads(payload)
        print("slime", status, d)
        assert status == 200 and d["verdict"] == "passed"
        status, payload = c.request("POST", "/evaluate", {"task_id": "kg-mn", "kernel_code": HONEST,
                                                          "reference_code": softmax})
        d = json.loads(payload)
        print("kernelgym", status, {k: d.get(k) for k in ("status", "correctness", "speedup")})
        assert status == 200 and d["status"] == "completed" and d["correctness"] is True
        assert d["speedup"] > 0
    assert torch.cuda.is_available()
