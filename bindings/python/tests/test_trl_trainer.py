"""TRL for real: the reward function make_trl_reward returns pickled and
called in another process (TRL's AsyncGRPOTrainer sends reward functions to
its rollout process), and TRL's GRPOTrainer trained for two steps on the CPU
with a tiny model made from a config (no download) and kreward's reward,
against the stand-in backend (kreward/backends/standin.py), which stands in
for the GPU. Skips without trl (scripts/deps.sh installs it)."""
import json
import os
import pickle
import subprocess
import sys

import pytest

from kreward.backends.standin import candidate
from kreward.trainers import make_trl_reward, make_trl_reward_async
from serve_util import ROOT

VADD = str(ROOT / "examples" / "problems" / "l1_vector_add" / "problem.json")

CHILD = """
import json, pickle, sys, asyncio, inspect
reward = pickle.loads(sys.stdin.buffer.read())
completions = json.loads(sys.argv[1])
call = dict(prompts=["p"] * len(completions), completions=completions, completion_ids=None,
            problem=[sys.argv[2]] * len(completions))
out = asyncio.run(reward(**call)) if inspect.iscoroutinefunction(reward) else reward(**call)
print(json.dumps({"rewards": out, "name": getattr(reward, "__name__", None) or reward.func.__name__}))
"""


def run_child(payload, completions):
    env = dict(os.environ, PYTHONPATH=str(ROOT / "bindings" / "python"))
    r = subprocess.run([sys.executable, "-c", CHILD, json.dumps(completions), VADD],
                       input=payload, capture_output=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr.decode()
    return json.loads(r.stdout.decode().splitlines()[-1])


@pytest.mark.parametrize("make", [make_trl_reward, make_trl_reward_async])
def test_the_reward_pickles_and_runs_in_another_process(make):
    reward = make(backend="standin")
    completions = [candidate("passed", 2.0), candidate("fault"), "no code", candidate("error")]
    out = run_child(pickle.dumps(reward), completions)
    assert out["name"] == "kreward"  # TRL logs rewards/kreward/...
    rewards = out["rewards"]
    assert rewards[0] > 10 and rewards[1] == -5.0 and rewards[2] == -10.0
    assert rewards[3] is None  # not judged: no number (TRL leaves it out)


def test_a_reward_bound_to_a_live_evaluator_says_why_it_does_not_pickle():
    from kreward.backends.standin import StandIn
    with StandIn() as ev:
        with pytest.raises(TypeError, match="pass backend="):
            pickle.dumps(make_trl_reward(evaluator=ev))


def test_grpo_trainer_two_steps_on_the_cpu_with_kreward_rewards(tmp_path):
    pytest.importorskip("trl", reason="TRL's GRPOTrainer (scripts/deps.sh installs trl)")
    torch = pytest.importorskip("torch")
    from datasets import Dataset
    from tokenizers import Tokenizer, models
    from transformers import AutoModelForCausalLM, GPT2Config, PreTrainedTokenizerFast
    from trl import GRPOConfig, GRPOTrainer

    # a character-level tokenizer and a one-layer GPT-2, made here: no download
    vocab = {"<pad>": 0, "<eos>": 1, "<unk>": 2}
    for c in [chr(i) for i in range(32, 127)] + ["\n"]:
        vocab[c] = len(vocab)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token="<unk>")),
        pad_token="<pad>", eos_token="<eos>", unk_token="<unk>")
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(GPT2Config(
        vocab_size=len(vocab), n_positions=128, n_embd=16, n_layer=1, n_head=2,
        bos_token_id=1, eos_token_id=1, pad_token_id=0))
    data = Dataset.from_dict({"prompt": ["Write vector_add as a CUDA kernel: "] * 8,
                              "problem": [VADD] * 8})
    args = GRPOConfig(output_dir=str(tmp_path), use_cpu=True, per_device_train_batch_size=4,
                      num_generations=4, max_completion_length=8, max_steps=2, report_to="none",
                      logging_steps=1, save_strategy="no", bf16=False, fp16=False)
    trainer = GRPOTrainer(model=model, reward_funcs=[make_trl_reward(backend="standin")],
                          args=args, train_dataset=data, processing_class=tokenizer)
    trainer.train()
    assert trainer.state.global_step == 2
    logged = [h for h in trainer.state.log_history if "rewards/kreward/mean" in h]
    assert len(logged) == 2
    # a random model writes no code: each completion is kreward's no-code
    # report, compile_error under makora (-10), judged, logged through TRL
    assert all(h["rewards/kreward/mean"] == -10.0 and h["kreward/judged"] == 1.0 for h in logged)


@pytest.mark.parametrize("args", [[], ["--standin"]])
def test_the_trl_example_runs(args):
    """examples/python/trl_reward.py: without a GPU it says nothing can be
    judged here (never a number); with the stand-in it prints a reward per
    completion."""
    env = dict(os.environ, PYTHONPATH=str(ROOT / "bindings" / "python"))
    out = subprocess.run([sys.executable, str(ROOT / "examples" / "python" / "trl_reward.py"),
                          *args], capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr
    if args:
        assert len(out.stdout.splitlines()) == 3 and "-10.000" in out.stdout
    else:
        from conftest import has_gpu
        assert has_gpu() or out.stdout.startswith("not judged here:")
