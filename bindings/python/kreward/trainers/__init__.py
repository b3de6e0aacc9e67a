"""Reward functions called the way RL trainers call them (docs/trainers.md):

- TRL: make_trl_reward() / make_trl_reward_async() (kreward.trainers.trl)
- verl: compute_score, compute_score_async, compute_score_batch
  (kreward.trainers.verl)
- OpenRLHF: reward_func (--remote_rm_url .../kreward/trainers/openrlhf.py)
- slime: custom_rm (--custom-rm-path kreward.trainers.slime.custom_rm)

The problem of a sample is a problem.json path or its JSON text, taken
from the trainer's label field. Candidates are evaluated by the process's
Evaluator (get_evaluator(), from the environment, or set_evaluator()), in
the library's sandboxed worker processes. A candidate's own outcome is
always scored; a candidate the environment failed on is left out (TRL) or
gets the Evaluator's fallback; when nothing can run here (no GPU, no pool)
EvaluationUnavailable is raised, never a score."""
from kreward.trainers._common import (EvaluationUnavailable, get_evaluator, read,
                                      set_evaluator)
from kreward.trainers.openrlhf import reward_func
from kreward.trainers.slime import batched_custom_rm, custom_rm
from kreward.trainers.trl import make_trl_reward, make_trl_reward_async
from kreward.trainers.verl import compute_score, compute_score_async, compute_score_batch

__all__ = ["EvaluationUnavailable", "batched_custom_rm", "compute_score", "compute_score_async",
           "compute_score_batch", "custom_rm", "get_evaluator", "make_trl_reward",
           "make_trl_reward_async", "read", "reward_func", "set_evaluator"]
