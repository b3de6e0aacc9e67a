"""A request's candidates, checked and resolved before anything is queued.

Every endpoint turns its payload into Job objects first (problem and reward
resolved, source extracted from a completion); a batch with one bad entry
is refused whole with a 400 naming it, so no job of a refused request
ever reaches the pool."""
from ..completion import completion_text, extract_code
from ..problems import KernelBenchProblem
from .problems import ProblemError
from .rewards import RewardError

PRESETS = ("fast", "precise")


class BadRequest(ValueError):
    """A 4xx for the client, with the status to send."""

    def __init__(self, message, status=400):
        super().__init__(message)
        self.status = status


class Job:
    __slots__ = ("problem", "source", "name", "reward", "preset", "seed", "verify_only")

    @property
    def kind(self):
        return getattr(self.problem, "kind", "kreward")

    def __init__(self, problem, source, name, reward, preset, seed, verify_only):
        self.problem, self.source, self.name = problem, source, name
        self.reward, self.preset, self.seed, self.verify_only = reward, preset, seed, verify_only

    def submit_args(self):
        return dict(problem=self.problem, source=self.source, name=self.name, reward=self.reward,
                    preset=self.preset, seed=self.seed, verify_only=self.verify_only)


def source_of(source=None, completion=None, kind=None, shown=()):
    """The candidate's source (CUDA C++, or a ModelNew module for a
    KernelBench problem): given as is, or extracted from a model's
    completion (text or chat messages) by kreward.completion for the
    problem's kind; None when the completion holds no code. shown: code the
    model was shown (the problem's reference), never taken as its answer."""
    if source is not None:
        if not isinstance(source, str):
            raise BadRequest("source: a string")
        return source
    if completion is None:
        raise BadRequest("a job needs \"source\" (the candidate's code) or \"completion\" (a "
                         "model's text)")
    if not isinstance(completion, (str, list, dict)):
        raise BadRequest("completion: a string or chat messages")
    return extract_code(completion_text(completion), sources=shown, kind=kind)


def _field(d, key, kind, default, what):
    v = d.get(key, default)
    if v is not default and (not isinstance(v, kind) or (kind is int and isinstance(v, bool))):
        raise BadRequest(f"{what}{key}: expected a{'n' if kind is int else ''} {kind.__name__}")
    return v


def make(server, d, defaults=None, where=""):
    """A Job from a request's job object. defaults: fields a batch gives
    once for all its jobs (problem, reward, preset)."""
    if not isinstance(d, dict):
        raise BadRequest(f"{where}a job is a JSON object")
    merged = dict(defaults or {})
    merged.update({k: v for k, v in d.items() if v is not None})
    if "problem" not in merged:
        raise BadRequest(f"{where}problem: required (a registered name, or the problem's JSON)")
    try:
        problem = server.registry.get(merged["problem"])
        reward = server.rewards.get(merged.get("reward"))
    except ProblemError as e:
        raise BadRequest(f"{where}{e}", e.status) from e
    except RewardError as e:
        raise BadRequest(f"{where}{e}") from e
    preset = _field(merged, "preset", str, server.preset, where)
    if preset not in PRESETS:
        raise BadRequest(f"{where}preset: one of {', '.join(PRESETS)}")
    seed = _field(merged, "seed", int, 0, where)
    kernelbench = isinstance(problem, KernelBenchProblem)
    name = _field(merged, "name", str, "candidate.py" if kernelbench else "candidate.cu", where)
    verify_only = _field(merged, "verify_only", bool, False, where)
    try:
        source = source_of(merged.get("source"), merged.get("completion"),
                           problem.kind if kernelbench else None,
                           (problem.source,) if kernelbench else ())
    except BadRequest as e:
        raise BadRequest(f"{where}{e}") from e
    return Job(problem, source, name, reward, preset, seed, verify_only)
