"""A ModelNew evaluation (the Runner's result dict) as a kreward.Report: the
library's verdicts, flags, metrics and texts, so that it is scored by the
reward table like any report and read by trainers like any report
(docs/report-format.md, "ModelNew reports").

Verdicts: pass -> passed, wrong -> incorrect, compile_error ->
compile_error, denied -> incorrect with the flag sandbox_denied (the
candidate's doing), crash -> fault (its process died), timeout -> timeout,
error -> error (the environment's: not scored).

The result as the runner wrote it goes along as the text "kernelbench" (JSON)
for whoever wants the phases, batches and kernels."""
import json
import math
import threading

from ..core import Report
from .scoring import LAUNCH_BOUND

VERDICTS = {"pass": "passed", "wrong": "incorrect", "compile_error": "compile_error",
            "denied": "incorrect", "crash": "fault", "timeout": "timeout", "error": "error"}
# this order: the confidence level of [min, max] over n batches for the
# median is 1 - 2 / 2^n (five batches: 94 %); widened like the C engine's
# interval by the timing's resolution
RESOLUTION = 0.005


def _number(x):
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def speedup_interval(result):
    """(low, high) of the speedup from the batches both sides ran: the
    slowest baseline batch over the fastest candidate one and the reverse,
    widened by RESOLUTION; None without both sides' batches. A launch-bound
    candidate's batches spread, so its interval is wide: presets that read
    speedup_low pay it on its conservative end. The baseline memo's
    samples that stood in for batches not timed count as batches
    (baseline_memo.py), so every candidate's interval spans as many
    baseline batches as the schedule has."""
    b = result.get("batches_us") or {}
    cand, base = b.get("candidate") or [], (b.get("baseline") or []) + (b.get("baseline_memo") or [])
    if not cand or not base or min(cand) <= 0:
        return None
    low = min(base) / max(cand) * (1 - RESOLUTION)
    high = max(base) / min(cand) * (1 + RESOLUTION)
    return low, high


def _feedback(result, verdict):
    """What the model reads: why it failed, or how it did; then the notes
    that speak of its code (not the sandbox's own notes)."""
    fb = result.get("feedback")
    if verdict == "pass":
        cases = result.get("cases") or []
        parts = [f"correct on all {len(cases)} case{'s' if len(cases) != 1 else ''}"]
        s, t, b = result.get("speedup"), result.get("time_us"), result.get("baseline_us")
        if _number(s) and _number(t) and _number(b):
            parts.append(f"{s:.2f}x the reference's speed ({t:.1f} us a call against {b:.1f} us)")
        elif _number(t):
            parts.append(f"{t:.1f} us a call (the reference was not timed)")
        fb = "; ".join(parts)
    notes = [n for n in result.get("notes") or () if not str(n).startswith(("sandbox:", "no sandbox"))]
    return "; ".join([x for x in [fb] + notes if x]) or None


def _message(result, verdict):
    if verdict == "pass":
        return None
    fb = str(result.get("feedback") or verdict)
    return fb.splitlines()[0][:500] if fb else verdict


def to_report(result, problem_name=None, candidate_name=None, source=None, weak=None):
    """The kreward.Report of a Runner result. weak: why the problem cannot
    tell fast from lazy (its soundness check), or None: then the result's
    own "weak_problem" (the Runner puts its problem's there)."""
    weak = weak or (result or {}).get("weak_problem")
    r = Report()
    try:
        _fill(r, result, problem_name, candidate_name, source, weak)
    except BaseException:
        r.close()
        raise
    return r


def _fill(r, result, problem_name, candidate_name, source, weak):
    verdict = result.get("verdict") or "error"
    r.verdict = VERDICTS.get(verdict, "error")
    flags = []
    if verdict != "error":  # (an environment's failure says nothing of the candidate)
        r["compiled"] = 0 if verdict == "compile_error" else 1
    r["correct"] = 1 if verdict == "pass" else 0
    if verdict == "denied":
        flags.append("sandbox_denied")
    metrics = {"time_us": "time_us", "baseline_us": "baseline_us", "speedup": "speedup",
               "compile_seconds": "compile_seconds", "custom_share": "custom_share",
               "kernel_share": "kernel_share", "launch_luck": "launch_luck",
               "calls": "timed_calls", "batches": "timed_batches", "event_us": "time_event_us",
               "prepare_us": "prepare_us", "baseline_prepare_us": "baseline_prepare_us",
               "baseline_compile_seconds": "baseline_compile_seconds",
               # the compile stage's (builds.py): its build's wall, and what
               # the GPU turn waited for it
               "build_seconds": "build_seconds", "build_wait_s": "build_wait_s"}
    for key, name in metrics.items():
        if _number(result.get(key)):
            r[name] = result[key]
    memo = result.get("baseline_memo")
    if isinstance(memo, dict) and _number(memo.get("memo")):
        # (the C path's name: how many baseline samples came from earlier evaluations)
        r["baseline_shared_samples"] = memo["memo"]
    if isinstance(result.get("compile_cached"), bool):
        r["compile_cached"] = float(result["compile_cached"])
    cases = result.get("cases") or []
    r["cases_total"] = len(cases)
    if verdict == "pass":
        interval = speedup_interval(result)
        if interval is not None and _number(result.get("speedup")):
            r["speedup_low"], r["speedup_high"] = interval
        tf = result.get("torch_fallback")
        if tf is None:
            flags.append("unattributed")
        else:
            r["torch_fallback"] = float(tf)
            if tf:
                flags.append("torch_fallback")
        if result.get("mostly_torch"):
            flags.append("mostly_torch")
        share = result.get("kernel_share")
        if _number(share) and share < LAUNCH_BOUND:
            flags.append("launch_bound")
        if result.get("timing_mismatch"):
            flags.append("timing_mismatch")
        if weak:
            flags.append("weak_problem")
    for phase, seconds in (result.get("phases_s") or {}).items():
        if _number(seconds):
            r[f"phase_{phase}_s"] = seconds
    if _number(sum(v for v in (result.get("phases_s") or {}).values() if _number(v))):
        r["evaluation_s"] = round(sum(v for v in (result.get("phases_s") or {}).values()
                                      if _number(v)), 4)
    r.flags = flags
    if isinstance(result.get("worker_start"), str):  # "zygote", "exec" or "exec (why)"
        r.set_text("worker_start", result["worker_start"])
    fb = _feedback(result, verdict)
    if weak and verdict == "pass":
        fb = f"{fb}; the problem cannot tell fast from lazy ({weak}): no speed credit"
    if fb:
        r.set_text("feedback", fb)
    msg = _message(result, verdict)
    if msg:
        r.set_text("message", msg)
    if problem_name:
        r.set_text("problem", problem_name)
    if candidate_name:
        r.set_text("candidate", candidate_name)
    if source is not None:
        r.set_text("source", source)
    r.set_text("kind", "kernelbench")
    r.set_text("kernelbench", json.dumps(_plain(result), default=str))


def _plain(result):
    """The result without what is long and of no use in a report: the
    kernels' lists stay (attribution's evidence)."""
    return {k: v for k, v in result.items() if k not in ("reward",)}


def error_report(message, problem_name=None, candidate_name=None, verdict="error"):
    """A report for a candidate that could not be evaluated (the
    environment's failure): verdict error (never scored) unless told."""
    r = Report()
    r.verdict = verdict
    r.set_text("message", message)
    r.set_text("kind", "kernelbench")
    if problem_name:
        r.set_text("problem", problem_name)
    if candidate_name:
        r.set_text("candidate", candidate_name)
    return r


_table = None
_table_lock = threading.Lock()


def reward_of(result):
    """A Runner result's reward under the reward table's kernelbench preset
    (lib/reward, docs/rewards.md: 0.5 for a correct candidate, up to 1.0 at
    4x the baseline; no speed pay without kernels of its own or with a
    clock that disagreed, in proportion to custom_share below one half),
    the same number every front door gives its report (kernelbench/
    report.py to_report). None for a result that was not judged (verdict
    error): never a number for what could not be judged."""
    global _table
    from ..pool import UNSCORED
    report = to_report(result)
    try:
        if report.verdict in UNSCORED:
            return None
        with _table_lock:
            if _table is None:
                from ..context import Context
                ctx = Context(no_device=True)
                _table = (ctx, ctx.reward("kernelbench"))
            _table[1].score(report)
        return report.reward
    finally:
        report.close()
