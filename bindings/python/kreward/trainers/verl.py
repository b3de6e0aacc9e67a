"""verl's custom reward function (reward.custom_reward_function: path this
file or pkg://kreward.trainers.verl, name compute_score, compute_score_async
or compute_score_batch).

How verl calls it (verl v0.8.0-337, commit 1dda039, docs/trainers.md):
- the reward loop's NaiveRewardManager.run_single
  (verl/experimental/reward_loop/reward_manager/naive.py:67-83) calls
  compute_score(data_source=, solution_str=, ground_truth=, extra_info=)
  in the event loop's default executor, so several threads call it at once
  (an async compute_score is awaited on the loop instead); it runs in
  RewardLoopWorker Ray actors that have no GPU;
- BatchRewardManager.verify (verl/workers/reward_manager/batch.py:65-76)
  calls compute_score(data_sources=, solution_strs=, ground_truths=,
  extra_infos=) with data_sources and extra_infos numpy object arrays;
- every result dict must have the same keys (reward_loop.py:366-369 takes
  the first one's) and its numbers are averaged with np.mean at validation
  (trainer/ppo/metric_utils.py: strings are skipped, None raises).

The problem is extra_info["problem"] when given, else ground_truth.
extra_info["prompt"] (the prompt's text or messages), when the dataset puts
it there, names code the completion must not be graded on (the problem's
reference never is, given or not). verl's score must be a number, and
nothing that could not be judged gets one: such a candidate raises
CandidateNotJudged (a batch of which nothing was judged,
EvaluationUnavailable), logged at ERROR; KREWARD_NOT_JUDGED=fallback, asked
for by name, gives it the Evaluator's fallback instead (judged 0.0 in the
details, logged at ERROR each time)."""
from kreward.trainers import _common


def _problem_and_prompt(extra_info, ground_truth):
    get = getattr(extra_info, "get", None)
    if get is None:  # None, or not a mapping
        return ground_truth, None
    problem = get("problem")
    return (ground_truth if problem is None else problem), get("prompt")


def _results(ev, judgements):
    return [j.details(score) for j, score in zip(judgements, _common.scores(ev, judgements))]


def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs):
    """One sample: {"score": float, "verdict", "judged", "passed",
    "speedup", "time_us", "feedback"}."""
    return compute_score_batch([data_source], [solution_str], [ground_truth], [extra_info],
                               **kwargs)[0]


def compute_score_batch(data_sources, solution_strs, ground_truths, extra_infos=None, **kwargs):
    """A batch (BatchRewardManager): lists or numpy arrays in, a list of
    compute_score's dicts out, through one batch of the pool."""
    ev = _common.get_evaluator()
    solutions = list(solution_strs)
    ground = list(ground_truths)
    # a numpy array has no truth value: test for None, never `or`
    infos = [None] * len(solutions) if extra_infos is None else list(extra_infos)
    if not len(ground) == len(infos) == len(solutions):
        raise ValueError(f"{len(solutions)} solutions, {len(ground)} ground truths, "
                         f"{len(infos)} extra infos")
    pairs = [_problem_and_prompt(e, g) for e, g in zip(infos, ground)]
    problems = [p for p, _ in pairs]
    reads = [_common.read(s, prompt, p) for s, (p, prompt) in zip(solutions, pairs)]
    reports = _common.evaluate(ev, problems, reads)
    return _results(ev, _common.judge_all(reports))


async def compute_score_async(data_source, solution_str, ground_truth, extra_info=None,
                              **kwargs):
    """compute_score for verl's reward loop as a coroutine: awaited on the
    loop (the pool is waited for without a thread per sample)."""
    ev = _common.get_evaluator()
    problem, prompt = _problem_and_prompt(extra_info, ground_truth)
    report = await _common.evaluate_async(ev, problem, _common.read(solution_str, prompt, problem))
    return _results(ev, _common.judge_all([report]))[0]
