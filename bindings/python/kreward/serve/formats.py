"""Reports in the shapes other trainers' reward clients read.

- KernelGYM (hkust-nlp/KernelGYM@3a84417, kernelgym/server/api/models.py,
  EvaluationResponse; drkernel/kernel/rewards/reward_client.py reads
  status, compiled, correctness, speedup, decoy_kernel, error_message):
  a task is "completed" when the candidate was judged (whatever the
  verdict), "failed" when it could not be (not_run, error).
- OpenRLHF (OpenRLHF/OpenRLHF@3c3be62, openrlhf/utils/agent.py,
  SingleTurnAgentExecutor._fetch_rewards_via_http): {"rewards", "scores",
  "extra_logs"}, lists as long as the request's "query"; scores in [0, 1]
  (OpenRLHF filters groups on them): 1 for passed, 0 otherwise.
- slime (THUDM/slime@624b824, slime/rollout/rm_hub/__init__.py, remote_rm):
  the response body is the sample's reward: a number, or an object when
  slime is run with --reward-key."""
import json
import time

from ..pool import UNSCORED

# KernelGYM's ErrorCode for each verdict that is not a pass
ERROR_CODES = {
    "compile_error": "COMPILATION_ERROR",
    "incorrect": "CORRECTNESS_ERROR",
    "invalid_plan": "VALIDATION_ERROR",
    "launch_error": "RUNTIME_ERROR",
    "fault": "RUNTIME_ERROR",
    "timeout": "TIMEOUT_ERROR",
    "not_run": "RESOURCE_ERROR",
    "error": "SYSTEM_ERROR",
    "none": "UNKNOWN_ERROR",
}
# KernelGYM's decoy: a kernel that does not do the work (defined and never
# run, or run beside the work); its client pays a decoy nothing
DECOY_FLAGS = ("implausible_speed", "side_stream", "torch_fallback")


def reward_of(report, fallback):
    """The report's total reward; the fallback when it was not scored (a
    candidate that could not be judged here)."""
    if report.get("verdict") in UNSCORED:
        return fallback
    r = report.get("reward")
    return r["total"] if isinstance(r, dict) and r.get("terms") else fallback


def iso(t):
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t)) if t else None


def kernelgym(task_id, report, submitted, completed, fallback):
    verdict = report.get("verdict", "none")
    m = report.get("metrics", {})
    texts = report.get("texts", {})
    flags = report.get("flags", [])
    judged = verdict not in UNSCORED
    ms = (lambda us: None if us is None else us / 1e3)
    return {
        "task_id": task_id,
        "status": "completed" if judged else "failed",
        "compiled": bool(m.get("compiled")) if "compiled" in m else None,
        "correctness": verdict == "passed" if judged else None,
        "decoy_kernel": any(f in flags for f in DECOY_FLAGS),
        "reference_runtime": ms(m.get("baseline_us")),
        "kernel_runtime": ms(m.get("time_us")),
        "speedup": m.get("speedup"),
        "metadata": {"verdict": verdict, "flags": flags,
                     "reward": reward_of(report, fallback),
                     "feedback": texts.get("feedback", ""), "report": report},
        "error_message": None if verdict == "passed" else (texts.get("message")
                                                         or texts.get("feedback") or verdict),
        "error_code": None if verdict == "passed" else ERROR_CODES.get(verdict, "UNKNOWN_ERROR"),
        "submitted_at": iso(submitted),
        "completed_at": iso(completed),
        "processing_time": None if completed is None else round(completed - submitted, 6),
    }


def response_of(query, prompt):
    """OpenRLHF's query is prompt + response (decoded with the chat
    template): the response is what follows the prompt."""
    if isinstance(query, str) and isinstance(prompt, str) and query.startswith(prompt):
        return query[len(prompt):]
    return query


def openrlhf(reports, fallback):
    rewards = [float(reward_of(r, fallback)) for r in reports]
    verdicts = [r.get("verdict") for r in reports]
    metrics = [r.get("metrics", {}) for r in reports]
    return {
        "rewards": rewards,
        "scores": [1.0 if v == "passed" else 0.0 for v in verdicts],
        "extra_logs": {
            "passed": [float(v == "passed") for v in verdicts],
            "compiled": [float(m.get("compiled", 0.0) or 0.0) for m in metrics],
            "speedup": [float(m.get("speedup") or 0.0) for m in metrics],
        },
    }


def slime(report, fallback, detail):
    reward = float(reward_of(report, fallback))
    if not detail:
        return reward
    m = report.get("metrics", {})
    return {"reward": reward, "verdict": report.get("verdict"),
            "passed": report.get("verdict") == "passed", "speedup": m.get("speedup"),
            "feedback": report.get("texts", {}).get("feedback", "")}


def loads(text):
    return json.loads(text)
