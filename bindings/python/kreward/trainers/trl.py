"""TRL's reward functions (GRPOTrainer(reward_funcs=[...]), RLOOTrainer).

How TRL calls them (trl v1.9.0-26, commit f2cd577, docs/trainers.md):
GRPOTrainer._calculate_rewards (trl/trainer/grpo_trainer.py:1612-1683)
calls reward_func(prompts=, completions=, completion_ids=, **reward_kwargs)
in the training process (each accelerate rank, its main thread), where
reward_kwargs are the dataset's other columns (one value per sample),
trainer_state, log_extra(column, values) (a column of the completions
table, one value per sample), log_metric(name, value) (a scalar averaged per
logging step) and, with environments, environments. A None reward becomes
NaN and a row every function left None is out of the group baseline
(grpo_trainer.py:1662, 2676-2685). A coroutine function is gathered with the
other async ones on TRL's own event loop thread (grpo_trainer.py:1654,
1669-1681). Conversational completions are lists of messages.

Candidates that could not be judged (the environment failed) are None;
nothing runnable at all (no GPU), or a batch of which nothing was judged,
raises EvaluationUnavailable. The functions make_trl_reward returns are
picklable (module-level functions with their settings bound), as TRL's
AsyncGRPOTrainer needs to send them to its rollout process."""
import functools
import math

from kreward.trainers import _common


def _problems(problem, problem_column, n, kwargs):
    column = kwargs.get(problem_column)
    problems = list(column) if column is not None else [problem] * n
    if len(problems) != n or any(p is None for p in problems):
        raise ValueError(f"no problem for every completion: pass problem= or a dataset column "
                         f"'{problem_column}'")
    return problems


def _log(judgements, log_extra, log_metric):
    """Verdict, speedup and feedback per completion (the completions
    table); pass rate, share judged and mean speedup of passing ones per
    batch (metrics)."""
    n = len(judgements)
    if log_extra is not None:
        log_extra("kreward_verdict", [j.verdict for j in judgements])
        log_extra("kreward_speedup", [j.speedup for j in judgements])
        log_extra("kreward_feedback", [j.feedback for j in judgements])
    if log_metric is not None and n:
        log_metric("kreward/pass_rate", sum(j.passed for j in judgements) / n)
        log_metric("kreward/compile_rate",
                   sum(j.verdict != "compile_error" for j in judgements) / n)
        log_metric("kreward/judged", sum(j.judged for j in judgements) / n)
        fast = [j.speedup for j in judgements if j.passed and not math.isnan(j.speedup)]
        if fast:
            log_metric("kreward/speedup_passed", sum(fast) / len(fast))


def _reads(prompts, completions, problems):
    prompts = list(prompts) if prompts is not None else [None] * len(completions)
    if len(prompts) != len(completions):
        prompts = [None] * len(completions)  # prompts are only used to refuse copied code
    return [_common.read(c, p, q) for c, p, q in zip(completions, prompts, problems)]


class Settings:
    """What make_trl_reward binds: picklable (a backend spec, never a live
    evaluator unless one was given). Bound under one keyword, `_kreward`,
    so that no dataset column TRL passes (a column named "problem" is the
    usual one) can collide with it."""
    __slots__ = ("problem", "problem_column", "backend", "evaluator")

    def __init__(self, problem=None, problem_column="problem", backend=None, evaluator=None):
        self.problem, self.problem_column = problem, problem_column
        self.backend, self.evaluator = backend, evaluator

    def __getstate__(self):
        if self.evaluator is not None:
            raise TypeError("a TRL reward bound to a live evaluator cannot be pickled: pass "
                            "backend= (a spec such as 'local', a URL or 'ray') instead")
        return (self.problem, self.problem_column, self.backend)

    def __setstate__(self, state):
        self.problem, self.problem_column, self.backend = state
        self.evaluator = None

    def backend_object(self):
        return self.evaluator or _common.backend_for(self.backend)


def kreward(prompts=None, completions=None, completion_ids=None, log_extra=None,
            log_metric=None, *, _kreward=None, **kwargs):
    """TRL's reward_func: list[float | None], one per completion. _kreward:
    the Settings make_trl_reward bound; the dataset's columns come in
    kwargs."""
    settings = _kreward or Settings()
    ev = settings.backend_object()
    completions = list(completions)
    problems = _problems(settings.problem, settings.problem_column, len(completions), kwargs)
    reports = _common.evaluate(ev, problems, _reads(prompts, completions, problems))
    judgements = _common.check_batch(_common.judge_all(reports))
    _log(judgements, log_extra, log_metric)
    return [j.score for j in judgements]


async def kreward_async(prompts=None, completions=None, completion_ids=None, log_extra=None,
                        log_metric=None, *, _kreward=None, **kwargs):
    """kreward as a coroutine: each candidate awaited from the backend
    without blocking TRL's event loop."""
    import asyncio
    settings = _kreward or Settings()
    ev = settings.backend_object()
    completions = list(completions)
    problems = _problems(settings.problem, settings.problem_column, len(completions), kwargs)
    reads = _reads(prompts, completions, problems)
    reports = await asyncio.gather(*[_common.evaluate_async(ev, p, x)
                                     for p, x in zip(problems, reads)],
                                   return_exceptions=True)
    failed = [r for r in reports if isinstance(r, BaseException)]
    if failed:
        for r in reports:
            if not isinstance(r, BaseException):
                r.close()
        raise failed[0]
    judgements = _common.check_batch(_common.judge_all(reports))
    _log(judgements, log_extra, log_metric)
    return [j.score for j in judgements]


# TRL names a reward function's logs by its __name__ (rewards/kreward/mean);
# pickle finds a function by __qualname__, which stays its own
kreward_async.__name__ = "kreward"


def _bound(func, settings):
    """func with its settings bound; picklable when no live evaluator is
    bound (a partial of a module-level function: TRL's AsyncGRPOTrainer
    sends reward functions to its rollout process, where the backend spec
    resolves anew)."""
    return functools.partial(func, _kreward=settings)


def make_trl_reward(problem=None, problem_column="problem", evaluator=None, backend=None):
    """reward_func(prompts, completions, completion_ids, **kwargs) ->
    list[float | None]. The problem is fixed (problem=) or read per sample
    from the dataset column problem_column. backend: a spec for
    kreward.backend.resolve ("local", an http(s) URL, "ray[:ADDRESS]",
    "standin"), resolved once per process where it is called; None: the
    process's evaluator (get_evaluator(), from the environment). evaluator:
    a live backend object to use instead (in this process only: it makes
    the function unpicklable). Picklable otherwise (a functools.partial of
    the module-level function kreward)."""
    return _bound(kreward, Settings(problem, problem_column, backend, evaluator))


def make_trl_reward_async(problem=None, problem_column="problem", evaluator=None, backend=None):
    """make_trl_reward as a coroutine function: TRL runs it on its event
    loop next to other async reward functions."""
    return _bound(kreward_async, Settings(problem, problem_column, backend, evaluator))
