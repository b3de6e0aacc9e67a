"""OpenRLHF's reward function (--remote_rm_url set to this file's path).

How OpenRLHF calls it (OpenRLHF v0.11.0, commit 3c3be62, docs/trainers.md):
SingleTurnAgentExecutor (openrlhf/utils/agent.py:184-200) loads the file
with importlib in each vLLM RolloutRayActor (a Ray actor holding a GPU share,
openrlhf/trainer/ray/vllm_engine.py:33-60, 300-307) and calls
reward_func([query], [prompt], [label]) once per sample through
asyncio.to_thread (agent.py:303-320), so many threads at once. query is the
prompt and response tokens decoded with skip_special_tokens=False
(agent.py:283), so it need not start with prompt (a BOS token, a chat
template's whitespace). An exception is logged at INFO and the sample keeps
no reward (agent.py:298-299): this module logs its own failures at ERROR.
"scores" feed dynamic filtering, which keeps a prompt when the mean score of
its samples is strictly inside --algo.dynamic_filtering_range, default
(0, 1) (openrlhf/trainer/ppo_utils/samples_generator.py:169-176).

rewards: the reward as configured (makora: -10 to 35). scores: the reward
mapped onto 0..1 by the reward's ladder (its lowest compile_error value is
0, its highest passed value 1), or passed as 0/1 for a reward without a
ladder. extra_logs: passed, compiled, judged (0/1 each). `kreward serve`'s
/openrlhf route answers with the same function (answer) and strips the
prompt the same way (response_of).
A candidate that could not be judged gets no number: it raises
CandidateNotJudged (KREWARD_NOT_JUDGED=fallback, asked for by name, gives
it the Evaluator's fallback instead), logged at ERROR."""
import threading

from kreward.trainers import _common

_ranges = {}
_ranges_lock = threading.Lock()


def response_of(query, prompt):
    """The response in a query: what follows the prompt's first occurrence;
    the whole query when the prompt is not found verbatim (then blocks the
    prompt showed are recognised and skipped by the extraction, which
    compares code without whitespace)."""
    query = _common.safe_text(query)
    prompt = _common.safe_text(prompt)
    if query is None:
        return None
    if prompt:
        at = query.find(prompt)
        if at >= 0:
            return query[at + len(prompt):]
    return query


def score_range(reward):
    """(lowest, highest) a reward pays, from its ladder; None without one."""
    if reward is None:
        return None
    with _ranges_lock:
        if id(reward) in _ranges and _ranges[id(reward)][0] is reward:
            return _ranges[id(reward)][1]
    ladder = (reward.config() or {}).get("ladder")
    out = None
    if isinstance(ladder, dict) and ladder:
        values = [v for r in ladder.values() if isinstance(r, list) for v in r]
        if values and max(values) > min(values):
            out = (min(values), max(values))
    with _ranges_lock:
        _ranges[id(reward)] = (reward, out)
    return out


def unit_score(value, passed, bounds):
    if bounds is None:
        return 1.0 if passed else 0.0
    lo, hi = bounds
    return min(1.0, max(0.0, (value - lo) / (hi - lo)))


def _tensor(values):
    try:
        import torch
    except ImportError:
        return list(values)
    return torch.tensor(values, dtype=torch.float32)


def answer(rewards, passed, compiled, judged, bounds, convert=list):
    """The answer OpenRLHF reads, the same from this file and from `kreward
    serve`'s /openrlhf route: rewards as given; scores the rewards mapped
    onto 0..1 by the reward's ladder (bounds; 1/0 for passed without one);
    extra_logs passed, compiled and judged (1/0 each). No speedup: OpenRLHF
    averages each log over the batch and a speedup is measured for passing
    candidates only (a 0.0 would drag the mean, a NaN spoil it). convert
    makes each list what the caller sends (tensors here, lists in JSON)."""
    scores = [unit_score(r, p, bounds) for r, p in zip(rewards, passed)]
    return {"rewards": convert(rewards), "scores": convert(scores),
            "extra_logs": {"passed": convert([float(p) for p in passed]),
                           "compiled": convert([float(c) for c in compiled]),
                           "judged": convert([float(j) for j in judged])}}


def reward_func(queries, prompts, labels, **kwargs):
    """{"rewards", "scores", "extra_logs"} for OpenRLHF; labels are the
    problems (a problem.json path or its JSON, a KernelBench file's path or
    text). A candidate that could not be judged raises (OpenRLHF keeps no
    reward for it), logged at ERROR here: OpenRLHF logs it at INFO."""
    ev = _common.get_evaluator()
    queries, prompts, labels = list(queries), list(prompts), list(labels)
    if not len(queries) == len(prompts) == len(labels):
        raise ValueError(f"{len(queries)} queries, {len(prompts)} prompts, {len(labels)} labels")
    reads = [_common.read(response_of(q, p), p, label)
             for q, p, label in zip(queries, prompts, labels)]
    judgements = _common.judge_all(_common.evaluate(ev, labels, reads))
    rewards = _common.scores(ev, judgements)
    return answer(rewards, [j.passed for j in judgements],
                  [j.verdict != "compile_error" for j in judgements],
                  [j.judged for j in judgements], score_range(getattr(ev, "reward", None)),
                  _tensor)

