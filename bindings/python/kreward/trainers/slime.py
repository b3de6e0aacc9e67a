"""slime's custom reward model (--custom-rm-path
kreward.trainers.slime.custom_rm).

How slime calls it (slime v0.3.1-38, commit 624b824, docs/trainers.md):
one function serves both forms. async_rm (slime/rollout/rm_hub/__init__.py:
55-63) awaits custom_rm(args, sample, **kwargs); batched_async_rm (same
file, 101-109) awaits custom_rm(args, samples, **kwargs) with a list, for
--group-rm (slime/rollout/sglang_rollout.py:330-334) and for generate
functions that return several samples (sglang_rollout.py:270-280). Both
run on the asyncio loop of the RolloutManager, a Ray actor with num_gpus=0
(slime/ray/placement_group.py:228-237). A reward is a number, or a dict
read through --reward-key / --eval-reward-key
(slime/utils/types.py:118, 247).

The problem is sample.metadata["problem"] when given, else sample.label.
sample.prompt (text or messages) names code the response must not be graded
on. A reward is a number, and nothing that could not be judged gets one:
such a candidate raises CandidateNotJudged (KREWARD_NOT_JUDGED=fallback,
asked for by name, gives it the Evaluator's fallback instead), logged at
ERROR."""
import asyncio

from kreward.trainers import _common


def _problem(sample):
    meta = getattr(sample, "metadata", None)
    problem = meta.get("problem") if isinstance(meta, dict) else None
    return problem if problem is not None else getattr(sample, "label", None)


def _read(sample):
    return _common.read(getattr(sample, "response", None), getattr(sample, "prompt", None),
                        _problem(sample))


def _rewards(args, ev, judgements):
    return [_reward(args, j, score) for j, score in zip(judgements, _common.scores(ev, judgements))]


def _reward(args, j, score):
    """A number, or a dict when slime reads rewards through a key (the
    score under every key asked for, and details)."""
    keys = [k for k in (getattr(args, "reward_key", None), getattr(args, "eval_reward_key", None))
            if k]
    if not keys:
        return score
    out = j.details(score)
    for k in keys:
        out[k] = score
    return out


async def custom_rm(args, sample, **kwargs):
    """A Sample: its reward; a list of Samples: their rewards, in order
    (one batch through the pool, in an executor thread so the loop runs
    on)."""
    ev = _common.get_evaluator()
    if isinstance(sample, (list, tuple)):
        samples = list(sample)
        problems = [_problem(s) for s in samples]
        reads = [_read(s) for s in samples]
        loop = asyncio.get_running_loop()
        reports = await loop.run_in_executor(None, _common.evaluate, ev, problems, reads)
        return _rewards(args, ev, _common.judge_all(reports))
    report = await _common.evaluate_async(ev, _problem(sample), _read(sample))
    return _rewards(args, ev, _common.judge_all([report]))[0]


# the name of the batch form before slime called one function for both
batched_custom_rm = custom_rm
