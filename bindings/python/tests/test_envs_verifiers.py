"""The Verifiers environment through Verifiers' own eval runner (run_eval, as
`vf-eval` calls it): its interception server relays every model call of the
kreward-kernels harness to a scripted model (an OpenAI-compatible endpoint on
a free port whose replies a function writes), its Env/Task machinery runs the
episode and the scoring. Backends: the trainer tests' FakeEvaluator (verdicts
written in the candidate) and the real compile-only pool.

verifiers (0.4.0) pins mcp==2.0.0, which openenv-core cannot share an
environment with, so it is not in scripts/deps.sh: the module skips without
it. scripts/envs-test.sh (run by CI) runs it in its own venv, and fails on
that skip (docs/environments.md)."""
import asyncio
import http.server
import json
import os
import subprocess
import sys
import threading

import pytest

try:
    import verifiers.v1  # noqa: F401
except ImportError as e:  # absent, or installed against dependencies it cannot import
    pytest.skip(f"verifiers (0.4.0, the v1 API) cannot be imported ({e}): it needs its own venv "
                "(its mcp==2.0.0 conflicts with openenv-core's): scripts/envs-test.sh makes one",
                allow_module_level=True)

from serve_util import ROOT  # noqa: E402

# the environment package (Verifiers imports a taskset by its top-level module)
KERNELS_PKG = ROOT / "examples" / "envs" / "kreward_kernels"
sys.path.insert(0, str(KERNELS_PKG))

import kreward  # noqa: E402
from kreward.completion import extract_code  # noqa: E402
from kreward.envs import verifiers_env  # noqa: E402
from trainer_fakes import FakeEvaluator, candidate  # noqa: E402
from verifiers.v1.cli.eval.runner import run_eval  # noqa: E402
from verifiers.v1.configs.cli.eval import EvalConfig  # noqa: E402

VADD = ROOT / "examples" / "problems" / "l1_vector_add"
FAST = (VADD / "candidates" / "fast.cu").read_text()
BROKEN = "__global__ void k( { }"
NO_CODE = "I would use a grid-stride loop, but I will not write the kernel."


def fenced(source):
    return "Here it is.\n```cuda\n" + source + "\n```"


class ScriptedModel:
    """An OpenAI-compatible chat endpoint: reply(messages, n) writes the n-th
    answer (n from 0), None: the endpoint fails (HTTP 500); every request's
    messages are kept."""

    def __init__(self, reply):
        self.reply, self.requests = reply, []
        model = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                n = len(model.requests)
                model.requests.append(body["messages"])
                text = model.reply(body["messages"], n)
                if text is None:
                    self.send_response(500)
                    self.send_header("Content-Length", "4")
                    self.end_headers()
                    self.wfile.write(b"down")
                    return
                data = json.dumps({
                    "id": f"chatcmpl-{n}", "object": "chat.completion", "created": 0,
                    "model": body.get("model", "scripted"),
                    "choices": [{"index": 0, "finish_reason": "stop",
                                 "message": {"role": "assistant", "content": text}}],
                    "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
                }).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


class FakeBackend(FakeEvaluator):
    """FakeEvaluator with the rest of a backend's methods, as the Evaluator
    has them (a completion without code is the library's no-code report)."""

    def evaluate_completion(self, problem, completion):
        code = extract_code(completion)
        return self.no_code() if code is None else self.evaluate(problem, code)

    def score_of(self, report):
        return self.fallback if report.reward is None else report.reward


@pytest.fixture
def fake():
    backend = FakeBackend()
    verifiers_env.set_backend(backend)
    yield backend
    verifiers_env.set_backend(None)
    backend.close()


def run(tmp_path, reply, env, ok=True):
    """One episode of vector_add through run_eval; (the episode, the model)."""
    model = ScriptedModel(reply)
    try:
        config = EvalConfig.model_validate({
            "env": env, "model": "scripted", "client": {"base_url": model.url},
            "push": False, "rich": None, "output_dir": str(tmp_path)})
        (ep,) = asyncio.run(run_eval(config))
    finally:
        model.close()
    assert ep.ok == ok, ep.errors
    return ep, model


def episode(tmp_path, reply, max_turns=1, target_speedup=None, task=None):
    """One KernelEnv episode; (its trace, the model)."""
    ep, model = run(tmp_path, reply, {
        "taskset": {"id": "kreward-kernels", "problems": ["vector_add"], "task": task or {}},
        "max_turns": max_turns, "target_speedup": target_speedup})
    (trace,) = ep.traces
    return trace, model


def expected(backend, completion):
    """What the backend itself scores the completion (verdict, reward)."""
    r = backend.evaluate_completion(str(VADD / "problem.json"), completion)
    try:
        return r.verdict, backend.score_of(r)
    finally:
        r.close()


@pytest.mark.parametrize("reply,verdict", [(candidate("passed", 2.0), "passed"),
                                           (candidate("compile_error"), "compile_error"),
                                           (NO_CODE, "compile_error")])
def test_one_turn_reward_is_the_backends(tmp_path, fake, reply, verdict):
    trace, model = episode(tmp_path, lambda messages, n: reply)
    want_verdict, want = expected(fake, reply)
    assert want_verdict == verdict
    assert [t["verdict"] for t in trace.state.turns] == [verdict]
    assert trace.rewards["kernel"].score == pytest.approx(want)
    assert trace.reward == pytest.approx(want)
    assert trace.metrics["turns"] == 1.0 and len(model.requests) == 1
    # the prompt is the statement; the system prompt is not invented
    (user,) = model.requests[0]
    assert user["role"] == "user" and "kreward: launch" in user["content"]
    assert "f32" in user["content"]


def test_scores_order(tmp_path, fake):
    good = expected(fake, candidate("passed", 2.0))[1]
    wrong = expected(fake, candidate("compile_error"))[1]
    none = expected(fake, NO_CODE)[1]
    assert good > 0 > wrong and none == wrong


def test_feedback_reaches_the_next_turn_and_target_ends(tmp_path, fake):
    replies = [candidate("compile_error"), candidate("passed", 1.2), candidate("passed", 3.0)]
    trace, model = episode(tmp_path, lambda messages, n: replies[n], max_turns=3,
                           target_speedup=1.1)
    # the target (1.1x) was reached on the second turn: no third request
    assert len(model.requests) == 2
    assert [t["verdict"] for t in trace.state.turns] == ["compile_error", "passed"]
    second = model.requests[1]
    assert [m["role"] for m in second] == ["user", "assistant", "user"]
    assert second[1]["content"] == replies[0]
    assert "compile_error" in second[2]["content"] and "fake compile_error" in second[2]["content"]
    assert trace.rewards["kernel"].score == pytest.approx(expected(fake, replies[1])[1])
    assert trace.metrics["passed"] == 1.0 and trace.metrics["best_speedup"] == pytest.approx(1.2)


def test_turn_limit_ends_the_episode(tmp_path, fake):
    replies = [candidate("passed", 2.0), candidate("passed", 1.5), candidate("compile_error"),
               candidate("passed", 9.0)]
    trace, model = episode(tmp_path, lambda messages, n: replies[n], max_turns=3,
                           target_speedup=4.0, task={"episode_reward": "last"})
    assert len(model.requests) == 3 and trace.metrics["turns"] == 3.0
    assert [t["verdict"] for t in trace.state.turns] == ["passed", "passed", "compile_error"]
    # below the target, the passed turn's feedback says so
    assert "1.5x (target 4x)" in model.requests[2][-1]["content"]
    last = expected(fake, replies[2])[1]
    assert trace.rewards["kernel"].score == pytest.approx(last)
    assert trace.metrics["last_reward"] == pytest.approx(last)
    assert trace.metrics["best_speedup"] == pytest.approx(2.0)


def test_compile_only_pool(tmp_path):
    """The real backend (a local compile-only pool, by the task config):
    the broken kernel's compiler errors go back; the good one compiles and
    is not run here (no GPU): not judged, no number; the episode's reward is
    the judged turn's."""
    replies = [fenced(BROKEN), fenced(FAST)]
    trace, model = episode(tmp_path, lambda messages, n: replies[n], max_turns=2,
                           task={"backend": "local", "backend_options": {"no_device": True}})
    verdicts = [t["verdict"] for t in trace.state.turns]
    assert verdicts == ["compile_error", "not_run"]
    assert "error" in model.requests[1][-1]["content"]
    assert trace.state.turns[0]["reward"] == pytest.approx(compile_error_score())
    assert trace.state.turns[1]["reward"] is None and trace.state.turns[1]["judged"] is False
    assert trace.rewards["kernel"].score == pytest.approx(compile_error_score())


def compile_error_score():
    """The makora preset's score of a compile_error (what the pool gives)."""
    with kreward.Context(no_device=True) as ctx, ctx.reward("makora") as preset:
        r = kreward.Report()
        try:
            r.verdict = "compile_error"
            r["compiled"] = 0
            preset.score(r)
            return r.reward
        finally:
            r.close()


def test_vf_eval_command(tmp_path):
    """The `vf-eval` program itself on the kreward-kernels package, with the
    compile-only pool: its traces.jsonl carries the reward and metrics."""
    replies = [NO_CODE, fenced(BROKEN)]
    model = ScriptedModel(lambda messages, n: replies[n])
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "bindings" / "python"), str(KERNELS_PKG),
                                         env.get("PYTHONPATH", "")])
    try:
        proc = subprocess.run(
            [sys.executable, "-c", "from verifiers.v1.cli.eval.main import main; main()",
             "kreward-kernels", "--env.taskset.problems", '["vector_add"]',
             "--env.taskset.task.backend", "local",
             "--env.taskset.task.backend-options", '{"no_device": true}',
             "--env.max-turns", "2", "--model", "scripted", "--client.base-url", model.url,
             "--no-push", "--no-rich", "-o", str(tmp_path)],
            env=env, capture_output=True, text=True, timeout=300)
    finally:
        model.close()
    assert proc.returncode == 0, proc.stderr[-3000:]
    (traces,) = tmp_path.glob("*/traces.jsonl")
    (line,) = traces.read_text().splitlines()
    (trace,) = json.loads(line)["traces"]
    assert trace["rewards"]["kernel"]["score"] == pytest.approx(compile_error_score())
    assert trace["metrics"]["turns"] == 2.0 and trace["metrics"]["passed"] == 0.0
    assert len(model.requests) == 2 and "no code found" in model.requests[1][-1]["content"]


def test_under_another_env_the_final_reply_is_judged(tmp_path, fake):
    """Verifiers' best-of-n env runs the task's agent twice, one reply each,
    without KernelEnv: the task's reward judges each final reply itself."""
    replies = [candidate("compile_error"), candidate("passed", 2.0)]
    ep, model = run(tmp_path, lambda messages, n: replies[n], {
        "id": "best-of-n", "n": 2, "agent": {"runtime": {"type": "subprocess"}},
        "taskset": {"id": "kreward-kernels", "problems": ["vector_add"]}})
    assert len(model.requests) == 2 and all(len(r) == 1 for r in model.requests)
    by_reward = sorted(ep.traces, key=lambda t: t.reward)
    assert [t.state.turns[0]["verdict"] for t in by_reward] == ["compile_error", "passed"]
    assert [t.reward for t in by_reward] == pytest.approx([expected(fake, r)[1] for r in replies])
    assert [t.metrics["best"] for t in by_reward] == [0.0, 1.0]


def test_taskset_one_task_per_problem():
    """Verifiers' loader on the default taskset: every bundled problem once,
    by its own name, its statement as the prompt."""
    import verifiers.v1 as vf
    taskset = vf.load_taskset(vf.taskset_config_type("kreward-kernels")(id="kreward-kernels"))
    tasks = list(taskset)
    dirs = sorted(p.parent for p in (ROOT / "examples" / "problems").glob("*/problem.json"))
    assert sorted(os.path.dirname(t.data.problem) for t in tasks) == [str(d) for d in dirs]
    names = [t.data.name for t in tasks]
    assert "vector_add" in names and "l1_vector_add" not in names
    vadd = tasks[names.index("vector_add")]
    assert vadd.data.prompt.startswith("Problem: vector_add") and [t.data.idx for t in tasks] == \
        list(range(len(tasks)))


def test_failed_model_gets_no_reward(tmp_path, fake):
    """The model's endpoint failing on the second turn is the run's error, not
    the policy's answer: the trace carries the error and no kernel reward
    (no fake score for a trainer to learn from), and nothing more is judged."""
    replies = [candidate("compile_error"), None]
    ep, model = run(tmp_path, lambda messages, n: replies[n], {
        "taskset": {"id": "kreward-kernels", "problems": ["vector_add"]}, "max_turns": 3},
        ok=False)
    (trace,) = ep.traces
    assert len(model.requests) == 2 and not trace.ok
    assert "kernel" not in trace.rewards or trace.rewards["kernel"] is None
    assert len(fake.sources) == 1
