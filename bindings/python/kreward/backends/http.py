"""A thin client of `kreward serve`, with the Evaluator's methods
(evaluate, evaluate_completion, evaluate_batch, evaluate_async, score_of,
close), so trainer code moves from a local pool to a server by changing
what kreward.backend.resolve() returns.

    client = kreward.backends.http.Client("http://rewards:8000", token=...)
    reports = client.evaluate_batch(["vector_add"] * 8, completions=texts)
    scores = [client.score_of(r) for r in reports]

Standard library only (http.client, one keep-alive connection per thread):
trainer images need nothing more. A full queue (429) or a draining server
(503) is waited out as its Retry-After says, up to `max_wait` seconds;
other 4xx raise ClientError with the server's message."""
import http.client
import json
import os
import threading
import time
import urllib.parse

from ..problem_spec import portable
from ..report_data import ReportData
from .remote import RemoteBackend


class ClientError(RuntimeError):
    def __init__(self, status, message):
        super().__init__(f"kreward serve answered {status}: {message}")
        self.status, self.message = status, message


class Client(RemoteBackend):
    """url: the server (default $KREWARD_URL); token: its bearer token
    (default $KREWARD_TOKEN); reward, preset: sent with every job (None:
    the server's defaults); fallback: score_of's value for a report that
    was not judged (None: no number); timeout: seconds per HTTP request; max_wait: how long
    429/503 answers are retried; batch: jobs per request."""

    def __init__(self, url=None, token=None, reward=None, preset=None, fallback=None,
                 timeout=1800.0, max_wait=600.0, batch=512):
        url = url or os.environ.get("KREWARD_URL")
        if not url:
            raise ValueError("no server: pass url= or set KREWARD_URL")
        u = urllib.parse.urlsplit(url)
        if u.scheme not in ("http", "https") or not u.hostname:
            raise ValueError(f"{url!r}: an http:// or https:// URL")
        self.url = url.rstrip("/")
        self._https = u.scheme == "https"
        self._host, self._port = u.hostname, u.port
        self._base = u.path.rstrip("/")
        self.token = token if token is not None else os.environ.get("KREWARD_TOKEN")
        self.reward, self.preset, self.fallback = reward, preset, fallback
        self.reward_spec = reward
        self.timeout, self.max_wait, self.batch = timeout, max_wait, batch
        self._local = threading.local()

    # ---- HTTP ----
    def _conn(self):
        c = getattr(self._local, "conn", None)
        if c is None:
            cls = http.client.HTTPSConnection if self._https else http.client.HTTPConnection
            c = self._local.conn = cls(self._host, self._port, timeout=self.timeout)
        return c

    def _drop(self):
        c = getattr(self._local, "conn", None)
        if c is not None:
            c.close()
            self._local.conn = None

    def request(self, method, path, body=None):
        """(status, bytes) of one request; 429 and 503 waited out."""
        data = None if body is None else json.dumps(body).encode()
        headers = {"Content-Type": "application/json"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        deadline = time.monotonic() + self.max_wait
        reconnected = False
        while True:
            try:
                c = self._conn()
                c.request(method, self._base + path, body=data, headers=headers)
                r = c.getresponse()
                payload = r.read()
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
                # a kept-alive connection the server closed in between: once more
                self._drop()
                if reconnected:
                    raise
                reconnected = True
                continue
            if r.getheader("connection", "").lower() == "close":
                self._drop()
            if r.status in (429, 503) and time.monotonic() < deadline:
                wait = float(r.getheader("retry-after") or 1)
                time.sleep(max(0.05, min(wait, deadline - time.monotonic())))
                continue
            return r.status, payload

    def _json(self, method, path, body=None):
        status, payload = self.request(method, path, body)
        if status >= 400:
            try:
                message = json.loads(payload).get("error", payload.decode())
            except (ValueError, AttributeError):
                message = payload.decode(errors="replace")
            raise ClientError(status, message)
        return json.loads(payload)

    # ---- the Evaluator's methods ----
    def _job(self, problem, source, completion, name):
        job = {"problem": portable(problem), "name": name}
        if source is not None:
            job["source"] = source
        else:  # an empty completion holds no code: the server's "no code" report
            job["completion"] = completion if completion is not None else ""
        if self.reward is not None:
            job["reward"] = self.reward
        if self.preset is not None:
            job["preset"] = self.preset
        return job

    def evaluate(self, problem, source=None, completion=None, name="candidate.cu"):
        """The report (ReportData) of one candidate: source (CUDA C++) or a
        model's completion (the server extracts the code)."""
        return ReportData(self._json("POST", "/v1/evaluate",
                                     self._job(problem, source, completion, name)))

    def evaluate_batch(self, problems, sources=None, completions=None):
        """Reports for a batch, in order (sent `batch` jobs per request)."""
        problems, items, are_sources = self._batch_items(problems, sources, completions)
        jobs = [self._job(p, s if are_sources else None, None if are_sources else s,
                          "candidate.cu") for p, s in zip(problems, items)]
        out = []
        for i in range(0, len(jobs), self.batch):
            d = self._json("POST", "/v1/evaluate/batch", {"jobs": jobs[i:i + self.batch]})
            out += [ReportData(r) for r in d["reports"]]
        return out

    # ---- the server ----
    def health(self):
        status, payload = self.request("GET", "/health")
        return json.loads(payload)

    def status(self):
        return self._json("GET", "/v1/status")

    def problems(self):
        return self._json("GET", "/v1/problems")["problems"]

    def close(self):
        self._drop()
        self._close_no_code()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
