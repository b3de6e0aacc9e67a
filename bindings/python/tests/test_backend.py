"""kreward.backend.resolve and the trainers' call patterns through a live
`kreward serve` (the thin client as a trainer's reward process uses it)."""
import asyncio

import pytest

from kreward import backend
from kreward.backends.http import Client
from kreward.backends.local import Evaluator
from serve_util import ROOT, live_server

VADD = ROOT / "examples" / "problems" / "l1_vector_add"
FAST = (VADD / "candidates" / "fast.cu").read_text()
BROKEN = "__global__ void k( { }"


def test_resolve_choices(monkeypatch):
    monkeypatch.delenv("KREWARD_URL", raising=False)
    monkeypatch.delenv("KREWARD_RAY", raising=False)
    c = backend.resolve("http://127.0.0.1:9", token="t")
    assert isinstance(c, Client) and c.token == "t" and c.url == "http://127.0.0.1:9"
    monkeypatch.setenv("KREWARD_URL", "http://rewards.example:8000/base")
    c = backend.resolve()
    assert isinstance(c, Client) and c._base == "/base" and c._port == 8000
    assert backend.resolve(c) is c
    with pytest.raises(ValueError):
        backend.resolve("tcp://x")
    with pytest.raises(TypeError):
        backend.resolve(42)
    monkeypatch.delenv("KREWARD_URL")
    ev = backend.resolve(no_device=True)  # local
    try:
        assert isinstance(ev, Evaluator)
    finally:
        ev.close()


@pytest.fixture(scope="module")
def server():
    pytest.importorskip("starlette")
    pytest.importorskip("uvicorn")
    with live_server() as s:
        yield s


def test_trainer_calls_through_server(server, monkeypatch):
    """What trainers.py does with an evaluator (compute_score_batch,
    reward_func, custom_rm), with the client resolve() gives for
    KREWARD_URL: same results as the local Evaluator on the same inputs."""
    monkeypatch.setenv("KREWARD_URL", server.url)
    remote = backend.resolve()
    problem = str(VADD / "problem.json")
    codes = [FAST, BROKEN, None]
    reports = remote.evaluate_batch([problem] * 3, codes)
    with Evaluator(no_device=True) as local:
        expected = local.evaluate_batch([problem] * 3, codes)
        assert [r.verdict for r in reports] == [r.verdict for r in expected]
        # not judged (compiled, not run here): no number from either
        assert ([remote.score_of(r) for r in reports]
                == [local.score_of(r) for r in expected] == [None, -10.0, -10.0])
    d = reports[1].to_dict()
    assert d["verdict"] == "compile_error" and "feedback" in d["texts"]
    report = asyncio.run(remote.evaluate_async(problem, BROKEN))
    assert remote.score_of(report) == -10.0
    report.close()
