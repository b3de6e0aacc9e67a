"""`kreward serve` under load and at shutdown: a busy queue answers 429
with Retry-After; SIGTERM drains (503 for new work, every accepted job
reported) and exits 0; past the drain timeout, jobs still pending get the
pool's error report rather than nothing."""
import json
import signal
import threading
import time

import pytest

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")

from kreward.backends.http import Client  # noqa: E402
from serve_util import live_server, slow  # noqa: E402


def post(client, path, body):
    status, payload = client.request("POST", path, body)
    return status, json.loads(payload)


def fill(client, n_async, tag):
    """n_async jobs accepted without waiting, and one waited for in a
    thread; returns the thread's result holder."""
    for i in range(n_async):
        st, d = post(client, "/v1/evaluate", {"problem": "vector_add", "source": slow(f"{tag}{i}"),
                                              "wait": False, "id": f"{tag}{i}"})
        assert st == 202, d
    held = {}

    def sync():
        c = Client(client.url, max_wait=0)
        held["status"], held["body"] = post(c, "/v1/evaluate",
                                            {"problem": "vector_add", "source": slow(f"{tag}s")})
    t = threading.Thread(target=sync)
    t.start()
    for _ in range(500):  # until the server has accepted the waited-for job too
        if client._json("GET", "/v1/status")["queue"]["inflight"] == n_async + 1:
            break
        time.sleep(0.01)
    return t, held


def fetch(client, job_id, deadline):
    while time.monotonic() < deadline:
        status, payload = client.request("GET", f"/v1/jobs/{job_id}")
        d = json.loads(payload)
        if d.get("status") == "done":
            return d["report"]
        time.sleep(0.1)
    raise AssertionError(f"job {job_id} never reported")


def test_busy_queue_then_graceful_drain():
    with live_server("--max-queue", "4", "--compile-workers", "1", "--result-grace", "20") as s:
        client = Client(s.url, max_wait=0)
        t, held = fill(client, 3, "a")
        # the queue is full while they run: 429 with a Retry-After
        status, payload = client.request("POST", "/v1/evaluate",
                                         {"problem": "vector_add", "source": slow("x")})
        assert status == 429, payload
        s.send_signal(signal.SIGTERM)
        time.sleep(0.3)
        status, payload = client.request("POST", "/v1/evaluate",
                                         {"problem": "vector_add", "source": slow("y")})
        assert status == 503 and b"shutting down" in payload
        assert client.health()["status"] == "draining"
        t.join(60)
        assert held["status"] == 200 and held["body"]["verdict"] == "compile_error"
        deadline = time.monotonic() + 60
        for i in range(3):
            assert fetch(client, f"a{i}", deadline)["verdict"] == "compile_error"
        # every report read: the server stops by itself, cleanly
        assert s.wait(30) == 0


def test_drain_timeout_reports_every_job():
    with live_server("--max-queue", "8", "--compile-workers", "1", "--drain-timeout", "1",
                     "--result-grace", "20") as s:
        client = Client(s.url, max_wait=0)
        t, held = fill(client, 5, "b")
        s.send_signal(signal.SIGTERM)
        t.join(60)
        assert held["status"] == 200
        # The waited-for job came back, so the drain timeout has freed the
        # pool. A trainer may be slow to ask for the rest: their reports
        # must still be there (a server that stopped once the pool was freed
        # refused the connections here).
        time.sleep(2)
        deadline = time.monotonic() + 60
        verdicts = [fetch(client, f"b{i}", deadline)["verdict"] for i in range(5)]
        verdicts.append(held["body"]["verdict"])
        # 6 jobs of 1.4 s on one compile worker cannot finish in 1 s: the rest
        # were handed the pool's error report, none went without one
        assert set(verdicts) <= {"compile_error", "error"} and "error" in verdicts
        assert s.wait(30) == 0
