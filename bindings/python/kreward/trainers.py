"""Reward functions with the exact signatures RL trainers call.

The problem for a sample is a path to a problem.json (or its JSON text): verl's
ground_truth, OpenRLHF's label, slime's sample.label (or
sample.metadata["problem"]), a TRL dataset column (default "problem"). A
completion holds the kernel in a fenced code block (see extract_code).

Each process gets one Evaluator (built on first use from the environment:
KREWARD_REWARD preset or JSON path, default makora; KREWARD_PRESET fast or
precise; KREWARD_GPUS the pool's GPUs, e.g. "0,1" or "none"), or pass your
own with set_evaluator(). Candidates are untrusted: they are evaluated in
the library's sandboxed worker processes (a kreward.Pool), so a kernel that
faults or hangs never touches the trainer's own CUDA context;
KREWARD_IN_PROCESS=1 evaluates them in this process instead (trusted code,
debugging). Candidates that cannot be judged here (no GPU) score the
evaluator's fallback (0.0)."""
import asyncio
import os

from .completion import completion_text, extract_code
from .evaluator import Evaluator

_evaluator = None


def set_evaluator(evaluator):
    global _evaluator
    _evaluator = evaluator


def get_evaluator():
    global _evaluator
    if _evaluator is None:
        _evaluator = Evaluator(reward=os.environ.get("KREWARD_REWARD", "makora"),
                               preset=os.environ.get("KREWARD_PRESET", "fast"),
                               isolated=os.environ.get("KREWARD_IN_PROCESS", "") in ("", "0"),
                               gpus=os.environ.get("KREWARD_GPUS") or None)
    return _evaluator


def _info(report, score):
    d = report.to_dict()
    m = d.get("metrics", {})
    return {"score": score, "verdict": d["verdict"], "speedup": m.get("speedup"),
            "time_us": m.get("time_us"), "feedback": d.get("texts", {}).get("feedback", "")}


# ---- verl ----

def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs):
    """verl's reward function: a dict with "score" (verl reads it) and
    details for logging. ground_truth (or extra_info["problem"]) is the
    problem."""
    ev = get_evaluator()
    problem = (extra_info or {}).get("problem", ground_truth)
    report = ev.evaluate(problem, extract_code(completion_text(solution_str)))
    score = ev.score_of(report)
    out = _info(report, score)
    report.close()
    return out


def compute_score_batch(data_sources, solution_strs, ground_truths, extra_infos=None, **kwargs):
    """verl's batch reward manager form: lists in, a list out (one batch
    through the evaluator's pool)."""
    ev = get_evaluator()
    extra_infos = extra_infos or [None] * len(solution_strs)
    problems = [(e or {}).get("problem", g) for e, g in zip(extra_infos, ground_truths)]
    codes = [extract_code(completion_text(s)) for s in solution_strs]
    reports = ev.evaluate_batch(problems, codes)
    out = [_info(r, ev.score_of(r)) for r in reports]
    for r in reports:
        r.close()
    return out


# ---- TRL ----

def make_trl_reward(problem=None, problem_column="problem", evaluator=None):
    """A TRL GRPOTrainer reward function: reward_func(prompts, completions,
    completion_ids, **kwargs) -> list[float]. The problem is fixed, or read
    per sample from the dataset column problem_column."""
    def reward_func(prompts=None, completions=None, completion_ids=None, **kwargs):
        ev = evaluator or get_evaluator()
        column = kwargs.get(problem_column)
        problems = column if column is not None else [problem] * len(completions)
        if any(p is None for p in problems):
            raise ValueError(f"no problem: pass problem= or a dataset column '{problem_column}'")
        codes = [extract_code(completion_text(c)) for c in completions]
        reports = ev.evaluate_batch(problems, codes)
        scores = [ev.score_of(r) for r in reports]
        for r in reports:
            r.close()
        return scores

    reward_func.__name__ = "kreward"
    return reward_func


# ---- OpenRLHF ----

def reward_func(queries, prompts, labels, **kwargs):
    """OpenRLHF's remote/custom reward: labels are the problems; queries are
    prompt + response. Returns {"rewards", "scores", "extra_logs"}."""
    ev = get_evaluator()
    responses = [q[len(p):] if isinstance(q, str) and isinstance(p, str) and q.startswith(p) else q
                 for q, p in zip(queries, prompts)]
    reports = ev.evaluate_batch(list(labels), [extract_code(completion_text(r)) for r in responses])
    scores = [ev.score_of(r) for r in reports]
    verdicts = [r.verdict for r in reports]
    for r in reports:
        r.close()
    try:
        import torch
        rewards = torch.tensor(scores, dtype=torch.float32)
    except ImportError:
        rewards = list(scores)
    return {"rewards": rewards, "scores": rewards,
            "extra_logs": {"passed": [float(v == "passed") for v in verdicts]}}


# ---- slime ----

def _slime_problem(sample):
    meta = getattr(sample, "metadata", None) or {}
    return meta.get("problem") or getattr(sample, "label", None)


async def custom_rm(args, sample):
    """slime's --custom-rm-path function: async (args, sample) -> float."""
    ev = get_evaluator()
    code = extract_code(completion_text(getattr(sample, "response", "")))
    report = await ev.evaluate_async(_slime_problem(sample), code)
    score = ev.score_of(report)
    report.close()
    return score


async def batched_custom_rm(args, samples):
    """slime's --group-rm form: a list of samples in, a list of floats out."""
    ev = get_evaluator()
    codes = [extract_code(completion_text(getattr(s, "response", ""))) for s in samples]
    problems = [_slime_problem(s) for s in samples]
    loop = asyncio.get_running_loop()
    reports = await loop.run_in_executor(None, ev.evaluate_batch, problems, codes)
    scores = [ev.score_of(r) for r in reports]
    for r in reports:
        r.close()
    return scores
