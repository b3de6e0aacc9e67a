"""The OpenEnv environment through OpenEnv's own client (WebSocket) against
its own server app, run by uvicorn on a free port; compile-only backend.
Skips without openenv-core (not in scripts/deps.sh: its mcp cannot share an
environment with verifiers'); scripts/envs-test.sh (run by CI) runs it in
its own venv, and fails on that skip."""
import socket
import threading
import time

import pytest

pytest.importorskip("openenv.core")
uvicorn = pytest.importorskip("uvicorn")

from kreward.envs.openenv_env import KernelAction, KernelEnvClient, create_app  # noqa: E402
from serve_util import ROOT  # noqa: E402

FAST = (ROOT / "examples" / "problems" / "l1_vector_add" / "candidates" / "fast.cu").read_text()
BROKEN = "__global__ void k( { }"


@pytest.fixture(scope="module")
def url():
    app = create_app(max_turns=2, backend="local", backend_options={"no_device": True})
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    t = threading.Thread(target=server.run, daemon=True)
    t.start()
    while not server.started:
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    t.join(30)


def test_episode(url):
    with KernelEnvClient(base_url=url).sync() as env:
        r = env.reset(problem="vector_add")
        assert r.done is False and r.observation.problem == "vector_add"
        assert "f32" in r.observation.statement and "kreward: launch" in r.observation.statement
        r = env.step(KernelAction(code="```cuda\n" + BROKEN + "\n```"))
        assert r.observation.verdict == "compile_error" and r.reward == -10.0
        assert "error" in r.observation.feedback and r.done is False
        st = env.state()
        assert st.turn == 1 and st.last_verdict == "compile_error"
        r = env.step(KernelAction(code="```cuda\n" + FAST + "\n```"))
        # compile-only: not judged, so no number (the observation says why);
        # the turn limit (2) ends the episode
        assert r.observation.verdict == "not_run" and r.reward is None and r.done is True
        assert r.observation.judged is False and "not judged" in r.observation.feedback
        assert env.state().best_reward == -10.0  # the judged turn's


class FakeModelNewBackend:
    """A backend for a KernelBench episode without torch: it reads the
    answer's ModelNew block as the Evaluator does and judges it by its
    words (clamp_min: correct at 1.5x; anything else: wrong), scored by the
    library's kernelbench preset."""

    def __init__(self):
        import kreward
        self.ctx = kreward.Context(no_device=True)
        self.reward = self.ctx.reward("kernelbench")
        self.specs = []

    def evaluate_completion(self, problem, completion):
        import kreward
        from kreward.completion import extract_code
        from kreward.problems import kind_of
        self.specs.append(problem)
        code = extract_code(completion, kind=kind_of(problem))
        r = kreward.Report()
        if code is None:
            r.verdict = "compile_error"
            r.set_text("feedback", "no ModelNew found")
        elif "clamp_min" in code:
            r.verdict, r["speedup"] = "passed", 1.5
            r.set_text("feedback", "correct on all 3 cases; 1.50x the reference's speed")
        else:
            r.verdict = "incorrect"
            r.set_text("feedback", "case base: output 0 differs from the reference")
        self.reward.score(r)
        return r

    def evaluate(self, problem, source):
        return self.evaluate_completion(problem, "```python\n" + source + "\n```")

    def evaluate_batch(self, problems, sources):
        return [self.evaluate(p, s) for p, s in zip(problems, sources)]

    def score_of(self, report):
        return report.reward


def test_kernelbench_episode():
    """The statement is the Model's file; an answer's ModelNew block is what
    the backend judges; its feedback reaches the next observation."""
    backend = FakeModelNewBackend()
    app = create_app(max_turns=2, backend=backend,
                     problem_dirs=[str(ROOT / "examples" / "kernelbench")])
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    t = threading.Thread(target=server.run, daemon=True)
    t.start()
    while not server.started:
        time.sleep(0.05)
    try:
        with KernelEnvClient(base_url=f"http://127.0.0.1:{port}").sync() as env:
            r = env.reset(problem="level1/01_relu")
            assert "class Model(nn.Module)" in r.observation.statement
            assert "ModelNew" in r.observation.statement
            r = env.step(KernelAction(code="```python\nimport torch\nclass ModelNew(torch.nn.Module):"
                                           "\n    def forward(self, x):\n        return x * 0\n```"))
            assert r.observation.verdict == "incorrect" and r.reward == 0.0
            assert "differs" in r.observation.feedback
            r = env.step(KernelAction(code="```python\nimport torch\nclass ModelNew(torch.nn.Module):"
                                           "\n    def forward(self, x):\n        return x.clamp_min(0)\n```"))
            assert r.observation.verdict == "passed" and r.done is True
            assert r.reward == pytest.approx(0.5 + 0.25 * 0.5849625007)  # log2(1.5)
        assert all(str(s).endswith("01_relu.py") for s in backend.specs)
    finally:
        server.should_exit = True
        t.join(30)
