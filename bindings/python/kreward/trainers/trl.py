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
nothing runnable at all (no GPU) raises EvaluationUnavailable."""
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


def make_trl_reward(problem=None, problem_column="problem", evaluator=None):
    """reward_func(prompts, completions, completion_ids, **kwargs) ->
    list[float | None]. The problem is fixed (problem=) or read per sample
    from the dataset column problem_column. evaluator: default the
    process's (get_evaluator())."""
    def kreward(prompts=None, completions=None, completion_ids=None, log_extra=None,
                log_metric=None, **kwargs):
        ev = evaluator or _common.get_evaluator()
        completions = list(completions)
        problems = _problems(problem, problem_column, len(completions), kwargs)
        reports = _common.evaluate(ev, problems, _reads(prompts, completions, problems))
        judgements = _common.judge_all(reports)
        _log(judgements, log_extra, log_metric)
        return [j.score for j in judgements]

    return kreward


def make_trl_reward_async(problem=None, problem_column="problem", evaluator=None):
    """make_trl_reward as a coroutine function: TRL runs it on its event
    loop next to other async reward functions; each candidate is awaited
    from the pool without blocking that loop."""
    import asyncio

    async def kreward(prompts=None, completions=None, completion_ids=None, log_extra=None,
                      log_metric=None, **kwargs):
        ev = evaluator or _common.get_evaluator()
        completions = list(completions)
        problems = _problems(problem, problem_column, len(completions), kwargs)
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
        judgements = _common.judge_all(reports)
        _log(judgements, log_extra, log_metric)
        return [j.score for j in judgements]

    return kreward
