"""A multi-turn kernel-writing episode as a Verifiers environment
(verifiers 0.4.0, its v1 API: `import verifiers.v1 as vf`).

- KernelTaskset: one task per problem; the prompt is the problem statement
  (tensors, dtypes, shapes, how to write the launch line).
- KernelTask: its `@vf.reward` `kernel` is the backend's score of the
  episode's candidates (the best turn's, or the last's: `episode_reward`);
  `@vf.metric` `kernel_stats` records turns, passed, best speedup and the
  last turn's score. Under an env that did not judge the turns itself (a
  single-agent run, best-of-n), the final reply is judged at scoring.
- KernelEnv: the episode. The model answers the statement; each answer is
  evaluated (kreward.completion extracts the fenced kernel) and, unless the
  episode is over, the report's verdict, speedup and feedback go back as the
  next user message. It ends after `max_turns` answers or when a candidate
  passes at `target_speedup` or faster.
- KernelChatHarness: the taskset's default harness, a tool-less chat that
  runs in this process: one request per turn to the rollout's interception
  endpoint (Verifiers records the turns there), no program to install or
  start. Any other harness can be pinned (`--env.agent.harness.id null`).

Candidates are evaluated by kreward.backend.resolve(backend): a local pool,
a `kreward serve` URL or a Ray pool (`--env.taskset.task.backend`, else
$KREWARD_URL / $KREWARD_RAY, else local), one per process; set_backend()
hands the tasks an existing one.

Verifiers finds a taskset by a top-level module name, so the environment is
run through the `kreward-kernels` package (examples/envs/kreward_kernels):
    vf-eval kreward-kernels --env.max-turns 4 --env.target-speedup 1.5 ..."""
import asyncio
import threading
from typing import Literal, Optional

import httpx
from pydantic import Field

import verifiers.v1 as vf
from verifiers.v1.dialects.chat import message_to_wire

from ..backend import resolve
from ..completion import extract_code
from ..problems import ProblemError, kind_of
from .statement import Problems

_backends = {}
_backends_lock = threading.Lock()
_override = None


def set_backend(backend):
    """The backend every KernelTask in this process uses (an object with
    the Evaluator's methods: an Evaluator, Client or RayPool); None: back
    to resolving the task config's `backend`."""
    global _override
    _override = backend


def backend_for(name, options):
    """One backend per (name, options) in this process, whatever the tasks
    and rollouts: a pool owns GPUs and workers."""
    if _override is not None:
        return _override
    key = (name, repr(sorted(options.items())))
    with _backends_lock:
        if key not in _backends:
            _backends[key] = resolve(name, **options)
        return _backends[key]


class KernelData(vf.TaskData):
    problem: str = ""
    """The problem: a registered name's path, a name or the problem's JSON."""


class KernelState(vf.State):
    turns: list = Field(default_factory=list)
    """One dict per judged candidate, in order: verdict, reward, speedup,
    feedback, code (whether the answer had a kernel)."""


class KernelTaskConfig(vf.TaskConfig):
    backend: Optional[str] = None
    """For kreward.backend.resolve: an http(s) URL of a `kreward serve`,
    'ray[:ADDRESS]', 'local'; None: $KREWARD_URL, $KREWARD_RAY, else local."""
    backend_options: dict = Field(default_factory=dict)
    """Keyword arguments for the backend (Evaluator's, Client's, RayPool's)."""
    episode_reward: Literal["best", "last"] = "best"
    """The episode's reward: its best turn's score, or its last turn's."""


def _kind(problem):
    try:
        return kind_of(problem)
    except ProblemError:
        return None


def _judge_sync(backend, problem, reply):
    report = backend.evaluate_completion(problem, reply)
    try:
        judged = report.reward is not None
        return {"verdict": report.verdict, "judged": judged,
                # no number for a candidate that could not be judged
                "reward": float(report.reward) if judged else None,
                "speedup": report.get("speedup"),
                "feedback": (report.feedback or report.message or "") if judged else
                f"not judged: {report.message or report.verdict}",
                "code": extract_code(reply, kind=_kind(problem)) is not None}
    finally:
        report.close()


class KernelTask(vf.Task[KernelData, KernelState, KernelTaskConfig]):

    async def judge(self, reply):
        """One candidate's turn record (see KernelState.turns); the
        evaluation blocks, so it runs in a thread."""
        backend = backend_for(self.config.backend, self.config.backend_options)
        return await asyncio.to_thread(_judge_sync, backend, self.data.problem, reply)

    async def _turns(self, trace):
        turns = trace.state.turns
        if not turns and trace.num_turns:  # no env judged the turns: the final reply
            turns.append(await self.judge(trace.last_reply))
        return turns

    @vf.metric
    async def kernel_stats(self, trace: vf.Trace) -> dict:
        turns = await self._turns(trace)
        passed = [t["speedup"] for t in turns if t["verdict"] == "passed"]
        last = turns[-1]["reward"] if turns else None
        return {"turns": float(len(turns)), "passed": float(bool(passed)),
                "judged": float(sum(t.get("judged", True) for t in turns)),
                "best_speedup": max((s for s in passed if s is not None), default=0.0),
                "last_reward": float("nan") if last is None else last}

    @vf.reward
    async def kernel(self, trace: vf.Trace) -> float:
        turns = await self._turns(trace)
        if not turns:  # Verifiers scores no rollout whose model failed; never guess a score
            raise ValueError("no answer to judge")
        scores = [t["reward"] for t in turns if t["reward"] is not None]
        if not scores:  # nothing of this episode could be judged: no number for it
            why = "; ".join(sorted({t["feedback"] for t in turns}))[:400]
            raise ValueError(f"no turn of this episode could be judged ({why})")
        return max(scores) if self.config.episode_reward == "best" else scores[-1]


class KernelTasksetConfig(vf.TasksetConfig):
    problems: list[str] = Field(default_factory=list)
    """Registered problem names (or directory names); empty: every one."""
    problem_dirs: list[str] = Field(default_factory=list)
    """Where problems are registered from; empty: $KREWARD_PROBLEMS, else
    the bundled examples/problems (as `kreward serve`)."""
    task: KernelTaskConfig = KernelTaskConfig()


class KernelTaskset(vf.Taskset[KernelTask, KernelTasksetConfig]):
    def load(self):
        catalog = Problems(self.config.problem_dirs or None)
        names = self.config.problems or catalog.distinct_names()
        unknown = [n for n in names if n not in catalog.paths]
        if unknown:
            raise ValueError(f"unknown problems {unknown}; registered: {catalog.names()}")
        for name in names:
            yield KernelTask(KernelData(id=name, name=name, problem=catalog.spec(name),
                                        prompt=catalog.statement(name)), self.config.task)


def feedback_message(turn, target_speedup):
    """The user message after a judged candidate that did not end the
    episode: what happened to it, and what to do next."""
    verdict = turn["verdict"]
    lines = ([f"Your kernel was judged: {verdict}."] if turn.get("judged", True) else
             [f"Your kernel could not be judged here ({verdict}); try again."])
    if turn["speedup"] is not None and verdict == "passed":
        lines.append(f"Speedup over the reference: {turn['speedup']:.3g}x" +
                     (f" (target {target_speedup:g}x)." if target_speedup else "."))
    if turn["feedback"]:
        lines.append(turn["feedback"])
    lines.append("Write an improved kernel: the whole file in one ```cuda fenced block."
                 if verdict == "passed" else
                 "Fix it: write the whole corrected file in one ```cuda fenced block.")
    return "\n".join(lines)


class KernelEnvConfig(vf.EnvConfig):
    agent: vf.AgentConfig = vf.AgentConfig(runtime=vf.SubprocessConfig())
    """The policy's seat. The default harness runs in this process, so the
    runtime is the local one."""
    max_turns: int = Field(4, ge=1)
    """Candidates per episode."""
    target_speedup: Optional[float] = Field(None, gt=0)
    """A candidate that passes at this speedup or faster ends the episode;
    None: only max_turns does."""


class KernelEnv(vf.Env[KernelEnvConfig]):
    async def run(self, task, agents):
        async with agents.agent.interaction(task) as chat:
            segment = await chat.turn()  # the statement is the task's prompt
            for n in range(1, self.config.max_turns + 1):
                if segment.terminated:  # the agent's own limits ended the run
                    break
                turn = await task.judge(segment.last_reply)
                chat.trace.state.turns.append(turn)
                target = self.config.target_speedup
                if n == self.config.max_turns or (
                        target is not None and turn["verdict"] == "passed"
                        and turn["speedup"] is not None and turn["speedup"] >= target):
                    break
                segment = await chat.turn(feedback_message(turn, target))


class KernelChatHarnessConfig(vf.HarnessConfig):
    timeout_s: float = Field(600.0, gt=0)
    """Seconds one model request may take."""


class KernelChatHarness(vf.Harness[KernelChatHarnessConfig]):
    """One chat request per turn, in this process, through the rollout's
    interception endpoint (the contract: every model call goes there)."""
    APPENDS_SYSTEM_PROMPT = True
    SUPPORTS_RESUME = True  # the default resume relaunches on the conversation
    EXECUTES_CODE = False
    NEEDS_CONTAINER = False

    async def launch(self, ctx, trace, runtime, endpoint, secret, mcp_urls, data,
                     tool_interception_url=None):
        system, prompt = self.resolve_prompt(data)
        messages = [{"role": "system", "content": system}] if system else []
        if isinstance(prompt, str):
            messages.append({"role": "user", "content": prompt})
        else:
            messages += [message_to_wire(m) for m in prompt or []]
        async with httpx.AsyncClient(timeout=self.config.timeout_s) as http:
            r = await http.post(endpoint.rstrip("/") + "/chat/completions",
                                json={"model": ctx.model, "messages": messages},
                                headers={"Authorization": f"Bearer {secret}"})
        if r.status_code != 200:
            return vf.ProgramResult(exit_code=1, stdout="",
                                    stderr=f"model request: HTTP {r.status_code}: {r.text[:2000]}")
        return vf.ProgramResult(exit_code=0, stdout="", stderr="")


__all__ = ["KernelTaskset", "KernelEnv", "KernelChatHarness", "KernelTask", "KernelData",
           "KernelState", "KernelTaskConfig", "KernelTasksetConfig", "KernelEnvConfig",
           "KernelChatHarnessConfig", "set_backend", "feedback_message"]
