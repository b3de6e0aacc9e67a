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
        # compile-only: not judged, the fallback; the turn limit (2) ends the episode
        assert r.observation.verdict == "not_run" and r.reward == 0.0 and r.done is True
        assert env.state().best_reward == 0.0
