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
from kreward.openrlhf_answer import answer, response_of, score_range
from kreward.trainers import _common

def _tensor(values):
    try:
        import torch
    except ImportError:
        return list(values)
    return torch.tensor(values, dtype=torch.float32)


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

