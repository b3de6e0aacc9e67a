"""Reports in the shapes other trainers' reward clients read.

- KernelGYM (hkust-nlp/KernelGYM@3a84417, kernelgym/server/api/models.py,
  EvaluationResponse; drkernel/kernel/rewards/reward_client.py reads
  status, compiled, correctness, speedup, decoy_kernel, error_message):
  a task is "completed" when the candidate was judged (whatever the
  verdict), "failed" when it could not be (not_run, error).
- OpenRLHF (OpenRLHF/OpenRLHF@3c3be62, openrlhf/utils/agent.py,
  SingleTurnAgentExecutor._fetch_rewards_via_http): {"rewards", "scores",
  "extra_logs"}, lists as long as the request's "query", the file
  adapter's own answer (kreward.trainers.openrlhf.answer: scores the reward
  on the ladder's 0..1, no speedup log).
- slime (THUDM/slime@624b824, slime/rollout/rm_hub/__init__.py, remote_rm):
  the response body is the sample's reward: a number, or an object when
  slime is run with --reward-key.
Neither gets a number for a candidate that was not judged: the route
answers 503 naming it (not_judged)."""
import json
import time

from ..openrlhf_answer import answer
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


def reward_of(report):
    """The report's total reward; None when it was not judged (never a
    number for what could not be judged)."""
    return report["reward"]["total"] if judged(report) else None


def iso(t):
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t)) if t else None


def kernelgym(task_id, report, submitted, completed):
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
                     "reward": reward_of(report),
                     "feedback": texts.get("feedback", ""), "report": report},
        "error_message": None if verdict == "passed" else (texts.get("message")
                                                         or texts.get("feedback") or verdict),
        "error_code": None if verdict == "passed" else ERROR_CODES.get(verdict, "UNKNOWN_ERROR"),
        "submitted_at": iso(submitted),
        "completed_at": iso(completed),
        "processing_time": None if completed is None else round(completed - submitted, 6),
    }


def judged(report):
    """Whether a report (as JSON) was judged: a verdict of the candidate's
    own, scored."""
    r = report.get("reward")
    return report.get("verdict") not in UNSCORED and isinstance(r, dict) and bool(r.get("terms"))


def not_judged(reports):
    """The reports of a request that were not judged, as (index, verdict,
    why) rows; the OpenRLHF and slime routes answer 503 when there are any,
    never a number."""
    return [(i, r.get("verdict"), (r.get("texts") or {}).get("message") or r.get("verdict"))
            for i, r in enumerate(reports) if not judged(r)]


def openrlhf(reports, bounds):
    """OpenRLHF's answer for judged reports: the adapter's own shape
    (kreward.trainers.openrlhf.answer), lists for JSON."""
    return answer([float(r["reward"]["total"]) for r in reports],
                  [r.get("verdict") == "passed" for r in reports],
                  [r.get("verdict") != "compile_error" for r in reports],
                  [True] * len(reports), bounds)


def slime(report, detail):
    reward = float(report["reward"]["total"])
    if not detail:
        return reward
    m = report.get("metrics", {})
    return {"reward": reward, "verdict": report.get("verdict"),
            "passed": report.get("verdict") == "passed", "speedup": m.get("speedup"),
            "feedback": report.get("texts", {}).get("feedback", "")}


def loads(text):
    return json.loads(text)
