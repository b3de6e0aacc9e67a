"""`kreward serve` against a live server (compile-only without a GPU):
every endpoint's happy path and its bad input."""
import json
import socket
import urllib.parse

import pytest

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")

from kreward.backends.http import Client, ClientError  # noqa: E402
from serve_util import ROOT, live_server  # noqa: E402

TOKEN = "s3cret-token"
VADD = ROOT / "examples" / "problems" / "l1_vector_add"
FAST = (VADD / "candidates" / "fast.cu").read_text()
BROKEN = "__global__ void k( { }"


@pytest.fixture(scope="module")
def server():
    with live_server("--max-queue", "8", "--max-batch", "16", token=TOKEN) as s:
        yield s


@pytest.fixture
def client(server):
    with Client(server.url, token=TOKEN, max_wait=0) as c:
        yield c


def call(client, method, path, body=None, raw=None):
    """(status, parsed JSON or text) of one request."""
    if raw is not None:
        c = client._conn()
        c.request(method, path, body=raw, headers={"Authorization": f"Bearer {TOKEN}"})
        r = c.getresponse()
        status, payload = r.status, r.read()
        client._drop()
    else:
        status, payload = client.request(method, path, body)
    try:
        return status, json.loads(payload)
    except ValueError:
        return status, payload.decode()


# ---- native ----

def test_evaluate_source_compile_only(client):
    st, rep = call(client, "POST", "/v1/evaluate", {"problem": "vector_add", "source": FAST})
    assert st == 200
    assert rep["verdict"] == "not_run" and rep["metrics"]["compiled"] == 1
    assert rep["texts"]["problem"] == "vector_add"
    assert "reward" not in rep or not rep["reward"].get("terms")  # not judged: unscored


def test_evaluate_broken_source_scored(client):
    r = client.evaluate("l1_vector_add", BROKEN)
    assert r.verdict == "compile_error"
    assert r.reward == -10.0  # the server's default reward, makora
    assert client.score_of(r) == -10.0


def test_evaluate_completion_extracts_code(client):
    text = "Here is my kernel:\n```cuda\n" + FAST + "```\nDone."
    assert client.evaluate_completion("vector_add", text).verdict == "not_run"
    r = client.evaluate_completion("vector_add", "I cannot write this kernel.")
    assert r.verdict == "compile_error" and "no code" in r.message


def test_evaluate_reward_and_problem_forms(client):
    # a preset by name, a path sent inline by the client, the problem's JSON text
    c = Client(client.url, token=TOKEN, reward="kernelgym")
    r = c.evaluate(str(VADD / "problem.json"), BROKEN)
    assert r.verdict == "compile_error" and r.reward == 0.0
    st, rep = call(client, "POST", "/v1/evaluate",
                   {"problem": json.dumps(c._job(str(VADD), None, "", "x")["problem"]),
                    "source": FAST})
    assert st == 200 and rep["verdict"] == "not_run"


def test_batch_forms(client):
    reports = client.evaluate_batch(["vector_add", "vector_add", "gelu"],
                                    sources=[FAST, BROKEN, BROKEN])
    assert [r.verdict for r in reports] == ["not_run", "compile_error", "compile_error"]
    st, d = call(client, "POST", "/v1/evaluate/batch",
                 {"problem": "vector_add", "completions": ["```cuda\n" + FAST + "```", "no"]})
    assert st == 200 and [r["verdict"] for r in d["reports"]] == ["not_run", "compile_error"]


def test_async_job(client):
    st, d = call(client, "POST", "/v1/evaluate",
                 {"problem": "vector_add", "source": BROKEN, "wait": False, "id": "job-1"})
    assert st == 202 and d == {"id": "job-1", "status": "pending"}
    for _ in range(200):
        st, d = call(client, "GET", "/v1/jobs/job-1")
        if d["status"] == "done":
            break
    assert st == 200 and d["report"]["verdict"] == "compile_error"
    assert call(client, "GET", "/v1/jobs/nope")[0] == 404


@pytest.mark.parametrize("body, status, says", [
    ({"problem": "no_such_problem", "source": FAST}, 404, "unknown problem"),
    ({"source": FAST}, 400, "problem: required"),
    ({"problem": "vector_add"}, 400, "\"source\""),
    ({"problem": "vector_add", "source": FAST, "reward": {"plugins": ["/tmp/x.so"]}}, 400,
     "plugins"),
    ({"problem": "vector_add", "source": FAST, "reward": "/etc/passwd"}, 400, "preset"),
    ({"problem": "/etc/passwd", "source": FAST}, 403, "outside"),
    ({"problem": "vector_add", "source": FAST, "preset": "slowest"}, 400, "preset"),
    ({"problem": "vector_add", "source": FAST, "seed": "x"}, 400, "seed"),
    ({"problem": '{"name": "x"', "source": FAST}, 400, "inline problem"),
    ([1, 2], 400, "JSON object"),
])
def test_bad_input(client, body, status, says):
    st, d = call(client, "POST", "/v1/evaluate", body)
    assert st == status, d
    assert says in d["error"]


def test_malformed_json(client):
    st, d = call(client, "POST", "/v1/evaluate", raw=b'{"problem": "vector_add", "source": ')
    assert st == 400 and "malformed JSON" in d["error"]


def test_batch_refused_whole(client):
    st, d = call(client, "POST", "/v1/evaluate/batch",
                 {"jobs": [{"problem": "vector_add", "source": FAST}, {"problem": "nope",
                                                                      "source": FAST}]})
    assert st == 404 and d["error"].startswith("jobs[1]: ")
    st, d = call(client, "POST", "/v1/evaluate/batch",
                 {"problem": "vector_add", "sources": [BROKEN] * 17})
    assert st == 413 and "limit is 16" in d["error"]


def _raw(url, head, body=b""):
    """The whole answer to a request written by hand (the server closes
    the connection after it: the request says so, or the body is refused)."""
    head = head.replace(b"\r\n\r\n", b"\r\nConnection: close\r\n\r\n", 1)
    u = urllib.parse.urlsplit(url)
    with socket.create_connection((u.hostname, u.port), timeout=30) as s:
        s.sendall(head + body)
        chunks = []
        while True:
            try:
                chunk = s.recv(65536)
            except ConnectionResetError:
                break
            if not chunk:
                break
            chunks.append(chunk)
        return b"".join(chunks).decode(errors="replace")


def test_body_limit_from_content_length(server):
    # a 10 MB body is refused from its header, before it is sent
    head = (f"POST /v1/evaluate HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {10 * 1000 * 1000}\r\n\r\n")
    answer = _raw(server.url, head.encode(), b"{")
    assert answer.startswith("HTTP/1.1 413"), answer


def test_body_limit_chunked(server):
    # no Content-Length: counted as it arrives and cut off at 8 MiB
    head = (f"POST /v1/evaluate HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\n"
            "Transfer-Encoding: chunked\r\n\r\n").encode()
    chunk = b"x" * (1 << 20)
    u = urllib.parse.urlsplit(server.url)
    with socket.create_connection((u.hostname, u.port), timeout=30) as s:
        s.sendall(head)
        try:
            for _ in range(10):
                s.sendall(b"%x\r\n" % len(chunk) + chunk + b"\r\n")
        except OSError:
            pass  # the server answered and closed while we were still sending
        answer = s.recv(65536).decode(errors="replace")
    assert answer.startswith("HTTP/1.1 413"), answer


@pytest.mark.parametrize("auth", [None, "Bearer wrong-token", "Basic " + TOKEN, "Bearer "])
def test_token_required(server, auth):
    head = "GET /v1/problems HTTP/1.1\r\nHost: x\r\n" + (
        f"Authorization: {auth}\r\n" if auth else "") + "\r\n"
    answer = _raw(server.url, head.encode())
    assert answer.startswith("HTTP/1.1 401") and "www-authenticate: bearer" in answer.lower()


def test_health_open_status_and_metrics(server, client):
    answer = _raw(server.url, b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
    assert answer.startswith("HTTP/1.1 200") and '"status":"ok"' in answer
    assert '"mode":"compile-only"' in answer  # which mode it serves in, asked for by name
    st, d = call(client, "GET", "/v1/status")
    assert st == 200 and d["compile_only"] is True and d["queue"]["max"] == 8
    assert any(w["kind"] == "compile" for w in d["pool"]["workers"])
    assert "vector_add" in client.problems() and "l2_softmax" in client.problems()
    client.evaluate("vector_add", BROKEN)
    st, text = call(client, "GET", "/metrics")
    assert st == 200 and 'kreward_reports_total{verdict="compile_error"}' in text
    reported = [ln for ln in text.splitlines() if ln.startswith("kreward_jobs_reported_total")]
    assert int(reported[0].split()[1]) >= 1


def test_full_queue_429(client):
    # a batch larger than the whole queue (8) can never fit: refused at once
    st, d = call(client, "POST", "/v1/evaluate/batch",
                 {"problem": "vector_add", "sources": [BROKEN + f"//{i}" for i in range(9)]})
    assert st == 429 and "queue is full" in d["error"]
    status, _ = client.request("POST", "/v1/evaluate/batch",
                               {"problem": "vector_add", "sources": [BROKEN] * 9})
    assert status == 429
    c = client._conn()
    c.request("POST", "/v1/evaluate/batch", body=json.dumps(
        {"problem": "vector_add", "sources": [BROKEN] * 9}),
        headers={"Authorization": f"Bearer {TOKEN}"})
    r = c.getresponse()
    r.read()
    assert r.status == 429 and int(r.getheader("retry-after")) >= 1
    # the queue is whole again: a batch that fits goes through
    assert len(client.evaluate_batch(["vector_add"] * 8, sources=[BROKEN] * 8)) == 8


# ---- KernelGYM ----

def test_kernelgym_evaluate_status_results(client):
    task = {"task_id": "kg-1", "kernel_code": BROKEN, "problem": "vector_add",
            "backend": "cuda", "num_perf_trials": 10}
    st, d = call(client, "POST", "/evaluate", task)
    assert st == 200 and d["task_id"] == "kg-1" and d["status"] == "completed"
    assert d["compiled"] is False and d["correctness"] is False
    assert d["error_code"] == "COMPILATION_ERROR" and d["metadata"]["reward"] == -10.0
    assert d["submitted_at"].endswith("Z") and d["processing_time"] >= 0
    st, s = call(client, "GET", "/status/kg-1")
    assert st == 200 and s["status"] == "completed"
    st, r = call(client, "GET", "/results/kg-1")
    assert st == 200 and r["metadata"]["verdict"] == "compile_error"
    # a resubmission under the same id returns the kept result (KernelGYM's cache)
    st, again = call(client, "POST", "/evaluate", dict(task, kernel_code=FAST))
    assert again["metadata"]["verdict"] == "compile_error"
    st, fresh = call(client, "POST", "/evaluate", dict(task, kernel_code=FAST,
                                                      force_refresh=True))
    assert fresh["status"] == "failed" and fresh["metadata"]["verdict"] == "not_run"
    assert fresh["error_code"] == "RESOURCE_ERROR"
    assert fresh["metadata"]["reward"] is None and fresh["correctness"] is None  # no number


def test_kernelgym_batch_and_errors(client):
    tasks = [{"task_id": f"kb-{i}", "kernel_code": src, "problem": "vector_add"}
             for i, src in enumerate([FAST, BROKEN, "```cuda\n" + FAST + "```"])]
    st, d = call(client, "POST", "/evaluate/batch", {"batch_id": "b1", "tasks": tasks})
    assert st == 200 and d["batch_id"] == "b1" and d["total_tasks"] == 3
    assert [r["metadata"]["verdict"] for r in d["results"]] == ["not_run", "compile_error",
                                                               "not_run"]
    assert d["completed_tasks"] == 1 and d["failed_tasks"] == 2
    assert call(client, "GET", "/status/never")[0] == 404
    assert call(client, "GET", "/results/never")[0] == 404
    st, e = call(client, "POST", "/evaluate", {"task_id": "x", "kernel_code": FAST,
                                               "reference_code": "import torch"})
    assert st == 400 and "reference_code: not a KernelBench problem file" in e["detail"]
    st, e = call(client, "POST", "/evaluate/batch", {"batch_id": "b", "tasks": tasks[:1] * 2})
    assert st == 400 and "differ" in e["error"]


# ---- OpenRLHF, slime ----

def test_openrlhf_remote_rm(client):
    prompt = "Write vector_add.\n"
    body = {"query": [prompt + "```cuda\n" + FAST + "```", prompt + "```cuda\n" + BROKEN + "```",
                      prompt + "no code"],
            "prompts": [prompt] * 3, "labels": ["vector_add", "vector_add", "vector_add"]}
    # compile-only: the kernel that compiles cannot be judged here, so the
    # request gets no numbers at all (a 503 naming it), never a 0.0 for it
    st, e = call(client, "POST", "/openrlhf", body)
    assert st == 503 and "not judged" in e["error"] and "[0] not_run" in e["error"]
    # what can be judged (compile errors) is, in the file adapter's shape: the
    # prompt found anywhere in the query (a BOS token before it), scores on
    # the reward's ladder (makora: -10..35), no speedup log
    body = {"query": ["<s>" + prompt + "```cuda\n" + BROKEN + "```", prompt + "no code"],
            "prompts": [prompt] * 2, "labels": ["vector_add", "vector_add"]}
    st, d = call(client, "POST", "/openrlhf", body)
    assert st == 200
    assert d["rewards"] == [-10.0, -10.0] and d["scores"] == [0.0, 0.0]
    assert d["extra_logs"] == {"passed": [0.0, 0.0], "compiled": [0.0, 0.0],
                               "judged": [1.0, 1.0]}
    st, e = call(client, "POST", "/openrlhf", {"query": ["a"], "labels": []})
    assert st == 400 and "labels" in e["error"]


def test_slime_remote_rm(client):
    body = {"prompt": [{"role": "user", "content": "go"}], "response": "```cuda\n" + BROKEN +
            "```", "label": "vector_add"}
    st, d = call(client, "POST", "/slime", body)
    assert st == 200 and d == -10.0
    st, d = call(client, "POST", "/slime?detail=1", body)
    assert d["reward"] == -10.0 and d["verdict"] == "compile_error" and d["passed"] is False
    st, e = call(client, "POST", "/slime", {"prompt": "x", "response": "y"})
    assert st == 400 and "label" in e["error"]
    st, e = call(client, "POST", "/slime", dict(body, response="```cuda\n" + FAST + "```"))
    assert st == 503 and "not judged" in e["error"]  # compiles, cannot run here: no number


def test_client_errors(server):
    with pytest.raises(ClientError) as e:
        Client(server.url, token="wrong", max_wait=0).evaluate("vector_add", FAST)
    assert e.value.status == 401
    with pytest.raises(ClientError) as e:
        Client(server.url, token=TOKEN, max_wait=0).evaluate("nope", FAST)
    assert e.value.status == 404 and "unknown problem" in e.value.message
    with pytest.raises(ValueError):
        Client("ftp://x")


def test_without_a_gpu_worker_the_server_starts_only_when_compile_only_is_asked_for():
    """A reward server that cannot judge would answer every candidate that
    compiles as if it were (it answered 200 with reward 0.0): it does not
    start, saying why, unless --compile-only is asked for by name."""
    import subprocess
    import sys
    from serve_util import ROOT as root
    from conftest import has_gpu
    if has_gpu():
        pytest.skip("this machine has a GPU worker")
    env = dict(__import__("os").environ, PYTHONPATH=str(root / "bindings" / "python"))
    for args in ([], ["--gpus", "none"]):
        out = subprocess.run([sys.executable, "-m", "kreward.serve", "--port", "0", *args],
                             capture_output=True, text=True, env=env, timeout=120)
        assert out.returncode != 0 and "--compile-only" in out.stderr, out.stderr
