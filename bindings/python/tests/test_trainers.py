"""The trainer adapters, called exactly as each trainer's current code calls
them (the call sites are cited; versions pinned in docs/trainers.md), with a
fake evaluator standing in for the GPU pool (trainer_fakes.py): what the
adapters return for each kind of outcome, what they log, concurrency, and
the loud failures. test_trainers_pool.py runs them through the real
library (a compile-only pool here; the GPU pool with -m gpu)."""
import asyncio
import concurrent.futures
import functools
import importlib
import importlib.util
import inspect
import math
import threading
import types

import pytest

import kreward
from kreward import trainers
from kreward.trainers import EvaluationUnavailable, _common
from kreward.trainers._common import CandidateNotJudged
from kreward import openrlhf_answer
from kreward.trainers import openrlhf as orl
from trainer_fakes import FakeEvaluator, Sample, candidate

PASSED = candidate("passed", 2.0)
FAULT = candidate("fault")
ERROR = candidate("error")
NOT_RUN = candidate("not_run")
NO_CODE = "Sorry, I can't help with that."
PASS_SCORE = 13.465735702799726  # makora: passed at 2x, 20 lines, 4 KiB (checked below)
KEYS = {"score", "verdict", "judged", "passed", "speedup", "time_us", "feedback"}


@pytest.fixture
def fake():
    ev = FakeEvaluator()
    trainers.set_evaluator(ev)
    yield ev
    trainers.set_evaluator(None)
    ev.close()


def test_the_fake_scores_with_the_real_reward(fake, vadd):
    r = fake.evaluate(vadd, PASSED)
    assert r.verdict == "passed" and r.reward == pytest.approx(PASS_SCORE)
    assert fake.evaluate(vadd, FAULT).reward == -5.0
    assert fake.evaluate(vadd, ERROR).reward is None


# ---- verl ----

class Ambiguous(list):
    """A numpy object array's manners: no truth value."""
    def __bool__(self):
        raise ValueError("The truth value of an array with more than one element is ambiguous")


def test_verl_compute_score(fake, vadd):
    out = trainers.compute_score("kernels", PASSED, vadd, extra_info={"index": 3})
    assert set(out) == KEYS and out["score"] == pytest.approx(PASS_SCORE)
    assert out["verdict"] == "passed" and out["passed"] == 1.0 and out["speedup"] == 2.0
    out = trainers.compute_score("kernels", FAULT, vadd)
    assert out["score"] == -5.0 and out["verdict"] == "fault"
    assert math.isnan(out["speedup"]) and math.isnan(out["time_us"])  # never None
    out = trainers.compute_score("kernels", NO_CODE, vadd)
    assert out["score"] == -10.0 and "no code found" in out["feedback"]
    # the environment's failure: no number for it; by name, the fallback
    with pytest.raises(CandidateNotJudged, match="could not be judged"):
        trainers.compute_score("kernels", ERROR, vadd)


def test_verl_not_judged_gets_the_fallback_only_when_asked(fake, vadd, monkeypatch, caplog):
    monkeypatch.setenv("KREWARD_NOT_JUDGED", "fallback")
    out = trainers.compute_score("kernels", ERROR, vadd)
    assert out["score"] == 0.0 and out["judged"] == 0.0 and out["verdict"] == "error"
    assert any(r.levelname == "ERROR" and "gets the fallback" in r.message for r in caplog.records)
    monkeypatch.setenv("KREWARD_NOT_JUDGED", "maybe")
    with pytest.raises(ValueError, match="KREWARD_NOT_JUDGED"):
        trainers.compute_score("kernels", ERROR, vadd)


def test_verl_problem_from_extra_info(fake, vadd):
    out = trainers.compute_score("kernels", PASSED, "not a problem", extra_info={"problem": vadd})
    assert out["verdict"] == "passed"
    with pytest.raises((kreward.KrewardError, OSError)):  # a broken dataset is loud
        trainers.compute_score("kernels", PASSED, "/nonexistent/problem.json")


def test_verl_batch_reward_manager_with_object_arrays(fake, vadd, monkeypatch):
    # BatchRewardManager.verify (verl/workers/reward_manager/batch.py:65-76):
    # data_sources and extra_infos are numpy object arrays, each extra_info
    # a dict that verify added rollout_reward_scores to
    extras = Ambiguous([{"rollout_reward_scores": {}}, {"problem": vadd,
                                                         "rollout_reward_scores": {}},
                        {"rollout_reward_scores": {}}, {"rollout_reward_scores": {}}])
    kw = dict(data_sources=Ambiguous(["k"] * 4), solution_strs=[PASSED, FAULT, NO_CODE, ERROR],
              ground_truths=[vadd, None, vadd, vadd], extra_infos=extras)
    with pytest.raises(CandidateNotJudged) as e:  # one of four was not judged: no numbers
        trainers.compute_score_batch(**kw)
    assert [j.verdict for j in e.value.judgements] == ["passed", "fault", "compile_error", "error"]
    monkeypatch.setenv("KREWARD_NOT_JUDGED", "fallback")
    scores = trainers.compute_score_batch(**kw)
    assert [s["verdict"] for s in scores] == ["passed", "fault", "compile_error", "error"]
    assert [s["score"] for s in scores] == [pytest.approx(PASS_SCORE), -5.0, -10.0, 0.0]
    # reward_loop.py:366-369 stacks every key of the first result
    assert all(set(s) == KEYS for s in scores)
    # metric_utils.process_validation_metrics: np.mean of numbers, strings skipped
    for key in KEYS - {"verdict", "feedback"}:
        assert all(isinstance(s[key], float) for s in scores), key
    assert trainers.compute_score_batch(["k"], [PASSED], [vadd])[0]["verdict"] == "passed"


def test_verl_batch_with_numpy(fake, vadd, monkeypatch):
    np = pytest.importorskip("numpy")
    monkeypatch.setenv("KREWARD_NOT_JUDGED", "fallback")
    extras = np.array([{"index": i} for i in range(3)], dtype=object)
    scores = trainers.compute_score_batch(np.array(["k"] * 3, dtype=object),
                                          [PASSED, FAULT, ERROR], [vadd] * 3, extras)
    assert np.isfinite(np.mean([s["score"] for s in scores]))
    assert np.isnan(np.mean([s["speedup"] for s in scores]))  # NaN, not a TypeError


def _verl_custom_fn(raw_fn):
    """verl's get_custom_reward_fn (verl/trainer/ppo/reward.py:70-86): the
    function wrapped with the config's reward_kwargs."""
    def call(raw, extra, *args, **kwargs):
        return raw(*args, **{**kwargs, **extra})

    async def call_async(raw, extra, *args, **kwargs):
        return await raw(*args, **{**kwargs, **extra})
    if inspect.iscoroutinefunction(raw_fn):
        return functools.partial(call_async, raw_fn, {})
    return functools.partial(call, raw_fn, {})


def _load_by_path(name, module_name):
    """How verl (utils/import_utils.py:121-131) and OpenRLHF
    (utils/agent.py:196-200) load a reward file: by path, outside its
    package."""
    path = importlib.import_module(f"kreward.trainers.{name}").__file__
    spec = importlib.util.spec_from_file_location(module_name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("name", ["compute_score", "compute_score_async"])
def test_verl_reward_loop_calls_it_from_many_threads(fake, vadd, name, monkeypatch):
    # NaiveRewardManager.run_single (verl/experimental/reward_loop/
    # reward_manager/naive.py:67-83): a sync compute_score runs in the
    # loop's default executor, an async one is awaited; RewardLoopWorker.
    # compute_score_batch gathers one task per sample
    monkeypatch.setenv("KREWARD_NOT_JUDGED", "fallback")  # an ERROR in every four
    module = _load_by_path("verl", "custom_module_123")
    compute_score = _verl_custom_fn(getattr(module, name))
    is_async = inspect.iscoroutinefunction(compute_score)
    assert is_async == (name == "compute_score_async")
    responses = [PASSED, FAULT, NO_CODE, ERROR] * 8

    async def run_single(response):
        extra_info = {"num_turns": None, "rollout_reward_scores": {}}
        kw = dict(data_source="kernels", solution_str=response, ground_truth=vadd,
                  extra_info=extra_info)
        if is_async:
            return await compute_score(**kw)
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(None, lambda: compute_score(**kw))

    async def batch():
        return await asyncio.gather(*[asyncio.create_task(run_single(r)) for r in responses])

    results = asyncio.run(batch())
    assert [r["verdict"] for r in results] == ["passed", "fault", "compile_error", "error"] * 8
    assert len({frozenset(r) for r in results}) == 1
    if not is_async:
        assert len(fake.threads) > 1  # it really was called from several threads


def test_get_evaluator_builds_one_evaluator_for_concurrent_callers(monkeypatch):
    made = []

    def slow_evaluator(**kwargs):
        made.append(kwargs)
        threading.Event().wait(0.05)  # long enough for the other threads to arrive
        return FakeEvaluator()
    monkeypatch.setattr(_common, "Evaluator", slow_evaluator)
    monkeypatch.setenv("KREWARD_GPUS", "0,1")
    trainers.set_evaluator(None)
    try:
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            evs = list(pool.map(lambda _: trainers.get_evaluator(), range(8)))
        assert len(made) == 1 and len({id(e) for e in evs}) == 1
        assert made[0]["gpus"] == "0,1" and made[0]["require_gpu"] is True
    finally:
        trainers.get_evaluator().close()
        trainers.set_evaluator(None)


def test_get_evaluator_sends_candidates_to_a_server_when_kreward_url_is_set(monkeypatch):
    """Trainers whose reward code runs where no GPU is (verl's reward
    workers, slime's rollout manager) point KREWARD_URL at `kreward serve`:
    every adapter then evaluates through the HTTP client, not a local pool."""
    from kreward.backends.http import Client
    monkeypatch.setenv("KREWARD_URL", "http://127.0.0.1:9")
    monkeypatch.setenv("KREWARD_PRESET", "precise")
    monkeypatch.setattr(_common, "Evaluator", lambda **kw: pytest.fail("built a local pool"))
    trainers.set_evaluator(None)
    try:
        ev = trainers.get_evaluator()
        assert isinstance(ev, Client) and trainers.get_evaluator() is ev
    finally:
        trainers.set_evaluator(None)


def test_adapters_on_a_server_that_cannot_be_reached(monkeypatch, vadd):
    """Through a remote backend (KREWARD_URL): a completion without code is
    still the policy's compile error (scored here with KREWARD_REWARD, the
    backends have no no_code), a sync and an async adapter alike; a
    candidate that needs the server, which refuses the connection, raises
    EvaluationUnavailable rather than an OSError out of the trainer."""
    import socket
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("KREWARD_URL", f"http://127.0.0.1:{port}")
    monkeypatch.setenv("KREWARD_REWARD", "makora")
    trainers.set_evaluator(None)
    try:
        out = trainers.compute_score("kernels", NO_CODE, vadd)
        assert out["score"] == -10.0 and out["verdict"] == "compile_error"
        from kreward.trainers import slime
        args = types.SimpleNamespace(reward_key=None, eval_reward_key=None)
        sample = Sample(prompt="p", response=NO_CODE, label=vadd)
        assert asyncio.run(slime.custom_rm(args, sample)) == -10.0
        with pytest.raises(EvaluationUnavailable, match="cannot be reached"):
            trainers.compute_score("kernels", PASSED, vadd)
    finally:
        trainers.set_evaluator(None)


# ---- TRL ----

class TrlLog:
    """GRPOTrainer._log_completion_extra and _log_metric
    (trl/trainer/grpo_trainer.py:1586-1609)."""
    def __init__(self):
        self.extra, self.metrics = {}, {}

    def log_extra(self, column, values):
        self.extra.setdefault(column, []).extend(values)

    def log_metric(self, name, value):
        self.metrics.setdefault(name, []).append(value)


def _trl_calculate_rewards(reward_func, prompts, completions, inputs, log):
    """GRPOTrainer._calculate_rewards (grpo_trainer.py:1612-1683): the
    dataset's other columns, trainer_state, log_extra and log_metric as
    keyword arguments; None becomes NaN; an async function runs on TRL's
    event loop thread."""
    keys = [k for k in inputs[0] if k not in ("prompt", "completion", "completion_ids")]
    reward_kwargs = {k: [example[k] for example in inputs] for k in keys}
    reward_kwargs["trainer_state"] = types.SimpleNamespace(global_step=7)
    reward_kwargs["log_extra"] = log.log_extra
    reward_kwargs["log_metric"] = log.log_metric
    ids = [[1, 2, 3]] * len(completions)
    if inspect.iscoroutinefunction(reward_func):
        loop = asyncio.new_event_loop()
        thread = threading.Thread(target=loop.run_forever, daemon=True)
        thread.start()
        try:
            async def invoke():
                return await reward_func(prompts=prompts, completions=completions,
                                         completion_ids=ids, **reward_kwargs)
            out = asyncio.run_coroutine_threadsafe(invoke(), loop).result()
        finally:
            loop.call_soon_threadsafe(loop.stop)
            thread.join()
            loop.close()
    else:
        out = reward_func(prompts=prompts, completions=completions, completion_ids=ids,
                          **reward_kwargs)
    return [r if r is not None else math.nan for r in out]


@pytest.mark.parametrize("make", [trainers.make_trl_reward, trainers.make_trl_reward_async])
def test_trl(fake, vadd, make):
    completions = [PASSED, FAULT, ERROR, NO_CODE, "bad \udc80 sample " + PASSED]
    inputs = [{"prompt": "p", "problem": vadd, "level": 1} for _ in completions]
    log = TrlLog()
    out = _trl_calculate_rewards(make(), ["p"] * 5, completions, inputs, log)
    assert out[0] == pytest.approx(PASS_SCORE) and out[1] == -5.0 and math.isnan(out[2])
    assert out[3] == -10.0 and out[4] == pytest.approx(PASS_SCORE)  # the surrogate costs nothing
    assert log.extra["kreward_verdict"] == ["passed", "fault", "error", "compile_error", "passed"]
    assert log.extra["kreward_speedup"][0] == 2.0 and math.isnan(log.extra["kreward_speedup"][1])
    assert len(log.extra["kreward_feedback"]) == 5 and "no code" in log.extra["kreward_feedback"][3]
    assert log.metrics["kreward/pass_rate"] == [0.4] and log.metrics["kreward/judged"] == [0.8]
    assert log.metrics["kreward/speedup_passed"] == [2.0]


def test_trl_conversational(fake, vadd):
    prompt = [{"role": "user", "content": "Write a kernel."}]
    completions = [[{"role": "assistant", "content": FAULT}],
                   [{"role": "assistant", "content": PASSED}],
                   [{"content": PASSED}]]  # no role: not the assistant's answer
    f = trainers.make_trl_reward(problem=vadd)
    out = f(prompts=[prompt] * 3, completions=completions, completion_ids=None)
    assert out == [-5.0, pytest.approx(PASS_SCORE), -10.0]
    with pytest.raises(ValueError, match="no problem"):
        trainers.make_trl_reward()(prompts=["p"], completions=[PASSED], completion_ids=None)


def test_trl_never_grades_the_prompts_kernel(fake, vadd):
    reference = candidate("passed", 1.0, body="x[0] = 0;")  # the kernel shown
    prompt = "Make this faster:\n" + reference
    answer = PASSED + "\nFor comparison, the original kernel:\n" + reference
    f = trainers.make_trl_reward(problem=vadd)
    assert f(prompts=[prompt], completions=[answer]) == [pytest.approx(PASS_SCORE)]
    log = TrlLog()
    assert f(prompts=[prompt], completions=[reference], log_extra=log.log_extra) == [-10.0]
    assert "repeat code shown in the prompt" in log.extra["kreward_feedback"][0]


# ---- OpenRLHF ----

def test_openrlhf_as_the_single_turn_executor_calls_it(fake, vadd):
    # SingleTurnAgentExecutor (openrlhf/utils/agent.py:191-200, 282-320):
    # loaded by path, called per sample through asyncio.to_thread
    module = _load_by_path("openrlhf", "reward_func")
    prompt = "<|im_start|>user\nWrite a kernel.<|im_end|>\n<|im_start|>assistant\n"
    responses = [PASSED, FAULT, NO_CODE] * 4

    async def fetch(query):
        return await asyncio.gather(asyncio.to_thread(module.reward_func, [query], [prompt],
                                                      [vadd]))

    async def run():
        return await asyncio.gather(*[fetch("<s>" + prompt + r + "<|im_end|>")
                                      for r in responses])
    infos = [r[0] for r in asyncio.run(run())]
    rewards = [float(i["rewards"][0]) for i in infos]
    scores = [float(i["scores"][0]) for i in infos]
    assert rewards[:3] == [pytest.approx(PASS_SCORE), -5.0, -10.0]
    # makora's ladder is -10..35: scores are the reward on 0..1
    assert scores[:3] == [pytest.approx((PASS_SCORE + 10) / 45), pytest.approx(5 / 45), 0.0]
    assert all(0.0 <= s <= 1.0 for s in scores)
    assert [float(i["extra_logs"]["passed"][0]) for i in infos[:3]] == [1.0, 0.0, 0.0]
    assert [float(i["extra_logs"]["judged"][0]) for i in infos[:3]] == [1.0, 1.0, 1.0]
    assert [float(i["extra_logs"]["compiled"][0]) for i in infos[:3]] == [1.0, 1.0, 0.0]
    # each log is averaged by OpenRLHF: never NaN, and no speedup (a 0.0 for
    # the candidates nothing measured would drag the mean)
    assert all(not math.isnan(float(v[0])) for i in infos for v in i["extra_logs"].values())
    assert all(set(i["extra_logs"]) == {"passed", "compiled", "judged"} for i in infos)
    assert len(fake.threads) > 1
    # a candidate that could not be judged: raised, never a number (OpenRLHF
    # keeps no reward for it); logged at ERROR here, as OpenRLHF logs at INFO
    with pytest.raises(CandidateNotJudged):
        module.reward_func([prompt + ERROR], [prompt], [vadd])


def test_openrlhf_dynamic_filtering_keeps_mixed_groups(fake, vadd):
    # samples_generator.py:169-176: kept when min < mean score < max, (0, 1)
    out = trainers.reward_func(["q" + r for r in (PASSED, FAULT, NO_CODE)], ["q"] * 3, [vadd] * 3)
    mean = sum(float(s) for s in out["scores"]) / 3
    assert 0.0 < mean < 1.0
    out = trainers.reward_func(["q" + NO_CODE] * 2, ["q"] * 2, [vadd] * 2)
    assert [float(s) for s in out["scores"]] == [0.0, 0.0]  # all failed to compile: dropped


def test_openrlhf_prompt_stripping_never_grades_the_prompts_kernel(fake, vadd):
    reference = candidate("passed", 1.0, body="x[0] = 0;")
    prompt = "<|im_start|>user\nSpeed up:\n" + reference + "<|im_end|>\n<|im_start|>assistant\n"
    # the query does not start with the prompt: a BOS token, one space of
    # chat-template difference
    for query in ("<s>" + prompt + NO_CODE, prompt.replace("user\n", "user \n") + NO_CODE):
        out = trainers.reward_func([query], [prompt], [vadd])
        assert float(out["rewards"][0]) == -10.0, query
    assert orl.response_of("<s>" + prompt + "answer", prompt) == "answer"
    assert orl.response_of("x", None) == "x"


def test_openrlhf_scores_without_a_ladder():
    assert openrlhf_answer.unit_score(3.0, True, None) == 1.0 and openrlhf_answer.unit_score(3.0, False, None) == 0.0
    assert openrlhf_answer.unit_score(-100, False, (-10, 35)) == 0.0
    assert openrlhf_answer.unit_score(100, True, (-10, 35)) == 1.0


# ---- slime ----

def _slime_load_function(path):
    """slime/utils/misc.py:39-47."""
    module_path, _, attr = path.rpartition(".")
    return getattr(importlib.import_module(module_path), attr)


def test_slime_custom_rm_sample_and_list(fake, vadd, monkeypatch):
    rm = _slime_load_function("kreward.trainers.slime.custom_rm")
    args = types.SimpleNamespace(custom_rm_path="kreward.trainers.slime.custom_rm",
                                 reward_key=None, eval_reward_key=None, group_rm=False)
    s1 = Sample(prompt="Write a kernel.", response=FAULT, label=vadd)
    s2 = Sample(prompt=[{"role": "user", "content": "Write"}], response=PASSED, label=None,
                metadata={"problem": vadd})
    s3 = Sample(response=ERROR, label=vadd)

    async def run():
        # async_rm (rm_hub/__init__.py:55-63) and batched_async_rm (101-109)
        one = await rm(args, s1)
        many = await rm(args, [s1, s2, s3, Sample(response=NO_CODE, label=vadd)],
                        evaluation=False)
        return one, many
    with pytest.raises(CandidateNotJudged):  # s3: no number for what was not judged
        asyncio.run(run())
    monkeypatch.setenv("KREWARD_NOT_JUDGED", "fallback")
    one, many = asyncio.run(run())
    assert one == -5.0
    assert many == [-5.0, pytest.approx(PASS_SCORE), 0.0, -10.0]
    assert trainers.batched_custom_rm is trainers.custom_rm


def test_slime_reward_key(fake, vadd):
    args = types.SimpleNamespace(reward_key="score", eval_reward_key="acc")
    samples = [Sample(response=PASSED, label=vadd), Sample(response=FAULT, label=vadd)]
    rewards = asyncio.run(trainers.custom_rm(args, samples))
    for s, r in zip(samples, rewards):  # sglang_rollout.py:277-279 assigns them
        s.reward = r
    assert samples[0].get_reward_value(args) == pytest.approx(PASS_SCORE)
    assert samples[1].reward["acc"] == -5.0 and samples[1].reward["verdict"] == "fault"


# ---- loud failures ----

def _every_adapter(vadd, completion):
    return [
        lambda: trainers.compute_score("k", completion, vadd),
        lambda: asyncio.run(trainers.compute_score_async("k", completion, vadd)),
        lambda: trainers.make_trl_reward(problem=vadd)(prompts=["p"], completions=[completion]),
        lambda: asyncio.run(trainers.make_trl_reward_async(problem=vadd)(
            prompts=["p"], completions=[completion])),
        lambda: trainers.reward_func(["p" + completion], ["p"], [vadd]),
        lambda: asyncio.run(trainers.custom_rm(None, Sample(response=completion, label=vadd))),
        lambda: asyncio.run(trainers.custom_rm(None, [Sample(response=completion, label=vadd)])),
    ]


def test_not_run_is_never_a_score(fake, vadd):
    for call in _every_adapter(vadd, NOT_RUN):
        with pytest.raises(EvaluationUnavailable, match="could not be run"):
            call()


@pytest.mark.parametrize("code", ["EPOISONED", "ENODEVICE"])
def test_a_poisoned_or_gpu_less_context_is_never_a_score(fake, vadd, code):
    fake.raise_error = kreward.KrewardError(kreward.Status[code], "the context is gone")
    for call in _every_adapter(vadd, PASSED):
        with pytest.raises(EvaluationUnavailable, match="the context is gone"):
            call()


def test_a_lost_pool_is_never_a_score(fake, vadd):
    for message in ("no GPU worker can be started any more (it died)", "the pool was freed"):
        fake._report = lambda problem, source, m=message: _error_report(m)
        for call in _every_adapter(vadd, PASSED):
            with pytest.raises(EvaluationUnavailable, match="cannot evaluate candidates"):
                call()


def _error_report(message):
    r = kreward.Report()
    r.verdict = "error"
    r.set_text("message", message)
    return r


def test_in_process_evaluator_raises_once_poisoned(tmp_path, vadd, monkeypatch):
    ev = kreward.Evaluator(reward="makora", cache_dir=str(tmp_path), isolated=False,
                           no_device=True)
    try:
        def poisoned(*a, **kw):
            raise kreward.KrewardError(kreward.Status.EPOISONED, "an earlier fault",
                                       report=_error_report("poisoned"))
        monkeypatch.setattr(ev.ctx, "evaluate", poisoned)
        with pytest.raises(kreward.KrewardError) as e:
            ev.evaluate(vadd, "int x;")
        assert e.value.code == kreward.Status.EPOISONED
        trainers.set_evaluator(ev)
        with pytest.raises(EvaluationUnavailable, match="an earlier fault"):
            trainers.compute_score("k", PASSED, vadd)
    finally:
        trainers.set_evaluator(None)
        ev.close()
