"""A multi-turn kernel-writing episode as an OpenEnv environment
(openenv-core: reset/step/state over HTTP and WebSocket).

An episode is one problem. The observation is the problem statement and,
after a step, the last report's verdict and feedback; an action is a
candidate (a model's completion or plain CUDA source); the reward is the
backend's score of the report (the reward preset), None for a candidate
that could not be judged (never a number: the observation says why); the episode ends after `max_turns` steps or when a
candidate passes at `target_speedup` or faster.

    app = kreward.envs.openenv_env.create_app()          # serve with uvicorn
    with KernelEnvClient(base_url="http://host:8001").sync() as env:
        r = env.reset(problem="vector_add")
        r = env.step(KernelAction(code=completion))

Candidates are evaluated by kreward.backend.resolve(backend): a local pool,
a `kreward serve` URL or a Ray pool."""
import random
import threading
import uuid
from typing import Any, Optional

from openenv.core.client_types import StepResult
from openenv.core.env_client import EnvClient
from openenv.core.env_server import Action, Environment, Observation, State
from openenv.core.env_server import create_app as _create_app

from ..backend import resolve
from .statement import Problems


class KernelAction(Action):
    code: str  # a completion (the fenced kernel, or ModelNew module, is extracted) or source


class KernelObservation(Observation):
    problem: str = ""
    statement: str = ""
    verdict: Optional[str] = None
    feedback: str = ""
    speedup: Optional[float] = None
    turn: int = 0
    judged: bool = True  # False: the candidate could not be judged here; reward is None


class KernelState(State):
    problem: Optional[str] = None
    turn: int = 0
    max_turns: int = 0
    best_reward: Optional[float] = None
    best_speedup: Optional[float] = None
    last_verdict: Optional[str] = None


class KernelEnvironment(Environment):
    """problems: names or specs to draw from on reset (default: every
    registered one); backend: for kreward.backend.resolve (one per process,
    shared by sessions); max_turns; target_speedup (None: only the turn
    limit ends an episode); problem_dirs: where names are registered
    (kreward problems' problem.json and KernelBench files; default
    $KREWARD_PROBLEMS or the bundled suite). A KernelBench episode shows the
    Model's file and takes a ModelNew module (in a ```python block)."""
    SUPPORTS_CONCURRENT_SESSIONS = True
    _shared = {}
    _lock = threading.Lock()

    def __init__(self, problems=None, backend=None, max_turns=4, target_speedup=None,
                 backend_options=None, problem_dirs=None):
        super().__init__()
        self.catalog = Problems(problem_dirs)
        self.choices = list(problems) if problems else self.catalog.distinct_names()
        self.max_turns, self.target_speedup = max_turns, target_speedup
        key = (backend, repr(sorted((backend_options or {}).items())))
        with KernelEnvironment._lock:  # one pool per process, whatever the sessions
            if key not in KernelEnvironment._shared:
                KernelEnvironment._shared[key] = resolve(backend, **(backend_options or {}))
            self.backend = KernelEnvironment._shared[key]
        self._state = KernelState(max_turns=max_turns)
        self._spec = None

    def reset(self, seed=None, episode_id=None, problem=None, **kwargs: Any) -> KernelObservation:
        name = problem if problem is not None else random.Random(seed).choice(self.choices)
        self._spec = self.catalog.spec(name)
        self._state = KernelState(episode_id=episode_id or uuid.uuid4().hex, problem=str(name),
                                  max_turns=self.max_turns)
        return KernelObservation(problem=str(name), statement=self.catalog.statement(name),
                                 done=False, reward=None)

    def step(self, action: KernelAction, timeout_s=None, **kwargs: Any) -> KernelObservation:
        if self._spec is None:
            raise RuntimeError("step before reset")
        s = self._state
        if s.turn >= self.max_turns:
            raise RuntimeError("the episode is over: reset")
        report = self.backend.evaluate_completion(self._spec, action.code)
        try:
            judged = report.reward is not None
            reward = float(report.reward) if judged else None  # no number for what was not judged
            verdict, speedup = report.verdict, report.get("speedup")
            feedback = report.feedback or report.message or ""
            if not judged:
                feedback = f"not judged: {report.message or verdict}"
        finally:
            report.close()
        s.turn += 1
        s.step_count = s.turn
        s.last_verdict = verdict
        if judged:
            s.best_reward = reward if s.best_reward is None else max(s.best_reward, reward)
        if verdict == "passed" and speedup is not None:
            s.best_speedup = speedup if s.best_speedup is None else max(s.best_speedup, speedup)
        hit = (self.target_speedup is not None and verdict == "passed" and speedup is not None
               and speedup >= self.target_speedup)
        return KernelObservation(problem=s.problem, statement=self.catalog.statement(s.problem),
                                 verdict=verdict, feedback=feedback, speedup=speedup, turn=s.turn,
                                 judged=judged, done=hit or s.turn >= self.max_turns,
                                 reward=reward)

    @property
    def state(self) -> KernelState:
        return self._state


class KernelEnvClient(EnvClient[KernelAction, KernelObservation, KernelState]):
    """OpenEnv's client for KernelEnvironment (WebSocket)."""

    def _step_payload(self, action: KernelAction):
        return {"code": action.code}

    def _parse_result(self, payload) -> StepResult[KernelObservation]:
        obs = KernelObservation(**payload.get("observation", {}), done=payload.get("done", False),
                                reward=payload.get("reward"))
        return StepResult(observation=obs, reward=payload.get("reward"),
                          done=payload.get("done", False))

    def _parse_state(self, payload) -> KernelState:
        return KernelState(**payload)


def create_app(max_concurrent_envs=64, **env_options):
    """The OpenEnv FastAPI app (reset/step/state over HTTP, /ws sessions)."""
    return _create_app(lambda: KernelEnvironment(**env_options), KernelAction, KernelObservation,
                       env_name="kreward", max_concurrent_envs=max_concurrent_envs)
