"""What every trainer adapter shares: the process's Evaluator, reading a
completion against what its prompt showed, and judging a report.

A report is one of three things to a trainer:
- judged: the candidate's own outcome (passed, incorrect, compile_error,
  fault, timeout, ...), scored by the reward, whatever the score;
- not judged: the environment failed for this candidate (verdict error or
  none). The trainer leaves it out where it can (TRL: None), else it gets
  the Evaluator's fallback, and is logged;
- impossible here: nothing can be run (no GPU: verdict not_run; the pool
  lost every GPU worker or was closed; a poisoned in-process context).
  EvaluationUnavailable is raised, never a score: a training run without a
  GPU would otherwise learn from zeros.

Imports are absolute (kreward....): verl and OpenRLHF load an adapter's
file by path, outside its package."""
import asyncio
import json
import logging
import math
import os
import threading

from kreward import problems
from kreward.completion import Extraction, extract, safe_text, shown_code
from kreward.problems import KERNELBENCH
from kreward.constants import Status
from kreward.errors import KrewardError
from kreward.backends.local import Evaluator
from kreward.pool import FREED_MESSAGE

log = logging.getLogger("kreward.trainers")

NAN = float("nan")
JUDGED_NOT = frozenset({"error", "none"})

_HINT = ("set KREWARD_GPUS to the device ordinals the pool may use (a Ray actor started with "
         "num_gpus=0 sees CUDA_VISIBLE_DEVICES='', and the pool then takes KREWARD_GPUS as "
         "physical ordinals), or build an Evaluator yourself and pass it to set_evaluator(); "
         "see docs/trainers.md")


class EvaluationUnavailable(RuntimeError):
    """Candidates cannot be evaluated here (no GPU, no pool, a poisoned
    context): raised instead of a score."""


# ---- the process's evaluator ----

_lock = threading.Lock()   # trainers call from several threads at once (verl, OpenRLHF)
_evaluator = None


def set_evaluator(evaluator):
    """The Evaluator the adapters use in this process (None: build one from
    the environment on next use)."""
    global _evaluator
    with _lock:
        _evaluator = evaluator


def get_evaluator():
    """The process's Evaluator, built on first use from the environment:
    KREWARD_REWARD (preset name or JSON path, default makora), KREWARD_PRESET
    (fast or precise), KREWARD_GPUS (the pool's GPUs, e.g. "0,1"; "none":
    compile checks only, every candidate that compiles then raises
    EvaluationUnavailable), KREWARD_IN_PROCESS=1 (trusted code only: no
    pool). No GPU: EvaluationUnavailable, saying why.

    KREWARD_URL (a `kreward serve`) or KREWARD_RAY (a Ray cluster: "1" or
    an address) send the candidates there instead (kreward.backend.resolve):
    the way for trainers whose reward code runs where no GPU is (verl's
    reward workers, slime's rollout manager)."""
    global _evaluator
    with _lock:
        if _evaluator is None and (os.environ.get("KREWARD_URL") or
                                   os.environ.get("KREWARD_BACKEND") or
                                   os.environ.get("KREWARD_RAY", "0") not in ("", "0")):
            from ..backend import resolve
            _evaluator = resolve(reward=os.environ.get("KREWARD_REWARD", "makora"),
                                 preset=os.environ.get("KREWARD_PRESET", "fast"))
        if _evaluator is None:
            isolated = os.environ.get("KREWARD_IN_PROCESS", "") in ("", "0")
            gpus = os.environ.get("KREWARD_GPUS") or None
            try:
                _evaluator = Evaluator(reward=os.environ.get("KREWARD_REWARD", "makora"),
                                       preset=os.environ.get("KREWARD_PRESET", "fast"),
                                       isolated=isolated, gpus=gpus, require_gpu=True,
                                       no_device=not isolated and gpus == "none")
            except KrewardError as e:
                if e.code != Status.ENODEVICE:
                    raise
                raise EvaluationUnavailable(f"kreward: no pool can evaluate candidates in this "
                                            f"process: {e.message}; {_HINT}") from e
        return _evaluator


_backends = {}


def backend_for(spec):
    """The backend of a spec in this process (kreward.backend.resolve, made
    once per spec); None: the process's evaluator (get_evaluator())."""
    if spec is None:
        return get_evaluator()
    with _lock:
        if spec not in _backends:
            from ..backend import resolve
            _backends[spec] = resolve(spec, reward=os.environ.get("KREWARD_REWARD", "makora"),
                                      preset=os.environ.get("KREWARD_PRESET", "fast"))
        return _backends[spec]


# ---- reading a sample ----

_refs = {}
_refs_lock = threading.Lock()


def _problem_json(spec):
    """(the problem's JSON object, its folder) or (None, None)."""
    if isinstance(spec, dict):
        return spec, None
    if not isinstance(spec, str):
        return None, None
    text = spec.lstrip()
    if text.startswith("{"):
        return json.loads(text), None
    with open(spec) as f:
        return json.load(f), os.path.dirname(os.path.abspath(spec))


def reference_sources(spec):
    """The reference of a problem (the code a prompt usually shows): a
    tuple of 0 or 1 sources, cached per problem (a kreward problem's
    reference kernel, a KernelBench problem's file)."""
    key = spec if isinstance(spec, str) else repr(spec)
    with _refs_lock:
        if key in _refs:
            return _refs[key]
    out = ()
    try:
        if kind_of(spec) == KERNELBENCH:
            out = (problems.kernelbench(spec).source,)
            with _refs_lock:
                _refs[key] = out
            return out
        problem, folder = _problem_json(spec)
        ref = (problem or {}).get("reference") or {}
        if isinstance(ref.get("cuda"), str):
            out = (ref["cuda"],)
        elif isinstance(ref.get("source"), str):
            path = ref["source"]
            if folder is not None and not os.path.isabs(path):
                path = os.path.join(folder, path)
            with open(path, encoding="utf-8", errors="replace") as f:
                out = (f.read(),)
    except (OSError, ValueError, TypeError, AttributeError, problems.ProblemError):
        out = ()  # a problem that cannot be read fails loudly when it is evaluated
    with _refs_lock:
        _refs[key] = out
    return out


def kind_of(spec):
    """The kind of a problem spec ("kreward" or "kernelbench"); "kreward"
    for what cannot be told (it fails loudly when evaluated)."""
    try:
        return problems.kind_of(spec)
    except problems.ProblemError:
        return problems.KREWARD


def read(completion, prompt=None, problem=None):
    """The candidate in a completion (an Extraction), never one of the
    blocks the prompt showed nor the problem's reference: for a KernelBench
    problem its ModelNew module, else its kernel."""
    try:
        sources = reference_sources(problem) if problem is not None else ()
        kind = kind_of(problem) if problem is not None else None
        return extract(completion, shown_code(prompt, sources), kind)
    except Exception as e:  # noqa: BLE001 -- one sample never costs the batch
        return Extraction(None, f"the completion could not be read ({type(e).__name__})")


# ---- evaluating and judging ----

# What a remote backend (kreward serve, a Ray cluster) raises when it cannot
# evaluate at all; a request it refuses as malformed is raised as it is.
_REMOTE_DOWN_STATUS = (401, 403, 429, 500, 502, 503, 504)


def _remote_unavailable(e):
    import http.client
    import socket
    from ..backends.http import ClientError
    if isinstance(e, ClientError) and e.status in _REMOTE_DOWN_STATUS:
        return f"the reward server answered {e.status}: {e.message}"
    # refused, reset, unreachable, timed out, a broken answer (a missing
    # problem file is an OSError too, and is the caller's to see)
    if isinstance(e, (ConnectionError, TimeoutError, socket.gaierror, http.client.HTTPException)):
        return f"the reward server cannot be reached: {e}"
    if type(e).__module__.startswith("ray."):
        return f"the Ray cluster failed: {type(e).__name__}: {e}"
    return None


def _unavailable(ev, e):
    """An error that means nothing can be evaluated here (a poisoned or
    GPU-less context, a closed pool, a server or cluster that cannot be
    reached), as EvaluationUnavailable; None for other errors, which are
    raised as they are."""
    if isinstance(e, KrewardError) and e.code in (Status.EPOISONED, Status.ENODEVICE):
        return EvaluationUnavailable(f"kreward: candidates cannot be evaluated in this process: "
                                     f"{e.message}")
    remote = None if isinstance(ev, Evaluator) else _remote_unavailable(e)
    if remote is not None:
        return EvaluationUnavailable(f"kreward: {remote}")
    pool = getattr(ev, "pool", None)
    if isinstance(e, ValueError) and pool is not None and pool.closed:
        return EvaluationUnavailable(f"kreward: the Evaluator's pool is closed ({e})")
    return None


def _raise_unavailable(ev, e):
    err = _unavailable(ev, e)
    if err is None:
        raise e
    log.error("%s", err)
    raise err from e


def evaluate(ev, problems, extractions):
    """Reports for a batch, in order: one kr_evaluate_batch for the samples
    with code, a compile_error saying why for the others."""
    todo = [i for i, x in enumerate(extractions) if x.code is not None]
    try:
        got = ev.evaluate_batch([problems[i] for i in todo],
                                [extractions[i].code for i in todo]) if todo else []
    except Exception as e:  # noqa: BLE001 -- mapped, or raised as it is
        _raise_unavailable(ev, e)
    done = dict(zip(todo, got))
    return [done[i] if i in done else ev.no_code(x.why) for i, x in enumerate(extractions)]


async def evaluate_async(ev, problem, extraction):
    """One report, awaited without blocking the event loop (a backend
    without evaluate_async is called from the loop's executor)."""
    if extraction.code is None:
        return ev.no_code(extraction.why)
    try:
        if hasattr(ev, "evaluate_async"):
            return await ev.evaluate_async(problem, extraction.code)
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(None, ev.evaluate, problem, extraction.code)
    except Exception as e:  # noqa: BLE001 -- mapped, or raised as it is
        _raise_unavailable(ev, e)


class Judgement:
    """A report as a trainer sees it: score (None when not judged), judged,
    verdict, passed, speedup and time_us (NaN when not measured), feedback."""
    __slots__ = ("score", "judged", "verdict", "passed", "speedup", "time_us", "feedback",
                 "message")

    def details(self, score):
        """The same keys for every sample (verl stacks them into arrays;
        numbers are floats, NaN when absent, so np.mean works)."""
        return {"score": score, "verdict": self.verdict, "judged": float(self.judged),
                "passed": float(self.passed), "speedup": self.speedup,
                "time_us": self.time_us, "feedback": self.feedback}


def _number(report, key):
    v = report.get(key)
    return NAN if v is None or not math.isfinite(v) else float(v)


def judge(report):
    """A Judgement of a report, which it closes. Raises
    EvaluationUnavailable when the report says nothing can run here."""
    try:
        j = Judgement()
        j.verdict = report.verdict
        message = report.text("message") or ""
        if j.verdict == "not_run":
            raise EvaluationUnavailable(
                "kreward: the candidate compiled but could not be run: no GPU worker here "
                f"({message or 'compile checks only'}); {_HINT}")
        if report.text("unavailable"):
            raise EvaluationUnavailable(f"kreward: the candidate could not be evaluated here: "
                                        f"{report.text('unavailable')}; {_HINT}")
        if j.verdict in JUDGED_NOT and (message == FREED_MESSAGE or
                                        "worker can be started" in message):
            raise EvaluationUnavailable(f"kreward: the pool cannot evaluate candidates any "
                                        f"more: {message}")
        j.judged = j.verdict not in JUDGED_NOT and report.reward is not None
        j.score = float(report.reward) if j.judged else None
        j.passed = j.verdict == "passed"
        j.speedup = _number(report, "speedup")
        j.time_us = _number(report, "time_us")
        j.feedback = safe_text(report.text("feedback") or message) or ""
        j.message = message
        if not j.judged:
            log.error("kreward: a candidate could not be judged (verdict %s: %s)", j.verdict,
                      message or "no message")
        return j
    except EvaluationUnavailable as e:
        log.error("%s", e)
        raise
    finally:
        report.close()


class CandidateNotJudged(RuntimeError):
    """A candidate the environment failed on (verdict error), for a trainer
    whose reward must be a number: raised rather than a number
    (KREWARD_NOT_JUDGED=fallback, asked for by name, gives the Evaluator's
    fallback instead, logged at ERROR each time). .judgements: the batch."""

    def __init__(self, message, judgements):
        super().__init__(message)
        self.judgements = judgements


NOT_JUDGED_ENV = "KREWARD_NOT_JUDGED"


def not_judged_policy():
    """"raise" (the default: no number for what was not judged) or
    "fallback" ($KREWARD_NOT_JUDGED=fallback: the Evaluator's fallback, each
    one logged at ERROR)."""
    v = os.environ.get(NOT_JUDGED_ENV, "raise").strip().lower() or "raise"
    if v not in ("raise", "fallback"):
        raise ValueError(f"{NOT_JUDGED_ENV}={v!r}: 'raise' (the default) or 'fallback'")
    return v


def fallback(ev):
    """The number a not-judged sample gets under KREWARD_NOT_JUDGED=fallback:
    the Evaluator's fallback (0.0 when it has none)."""
    v = getattr(ev, "fallback", None)
    return 0.0 if v is None else float(v)


STREAK_ENV = "KREWARD_NOT_JUDGED_STREAK"
_streak = [0]  # candidates not judged in a row, in this process (lock: _lock)


def check_batch(judgements):
    """No rewards at all stops the run: EvaluationUnavailable (logged at
    ERROR) when a batch of several candidates had none judged, or when the
    last $KREWARD_NOT_JUDGED_STREAK (default 32) candidates this process saw
    had none judged (trainers that call one sample at a time: verl's reward
    loop, OpenRLHF, slime). A batch of none passes."""
    limit = int(os.environ.get(STREAK_ENV, "32") or 32)
    with _lock:
        for j in judgements:
            _streak[0] = 0 if j.judged else _streak[0] + 1
        streak = _streak[0]
    whole = len(judgements) > 1 and not any(j.judged for j in judgements)
    if whole or streak >= limit:
        reasons = sorted({f"{j.verdict}: {j.message or 'no message'}" for j in judgements
                          if not j.judged})
        what = (f"no candidate of this batch of {len(judgements)}" if whole else
                f"none of the last {streak} candidates")
        err = EvaluationUnavailable(f"kreward: {what} could be judged "
                                    f"({'; '.join(reasons)[:600]}): no reward to train on; "
                                    f"{_HINT}")
        log.error("%s", err)
        raise err
    return judgements


def scores(ev, judgements):
    """The numbers of a batch for a trainer whose reward must be a number
    (verl, OpenRLHF, slime): every judged candidate's score; for one that
    was not judged CandidateNotJudged (the default) or, with
    KREWARD_NOT_JUDGED=fallback, the Evaluator's fallback."""
    check_batch(judgements)
    missing = [i for i, j in enumerate(judgements) if not j.judged]
    if missing and not_judged_policy() == "raise":
        first = judgements[missing[0]]
        why = first.message or "no message"
        err = CandidateNotJudged(f"kreward: {len(missing)} of {len(judgements)} candidates could "
                                 f"not be judged (verdict {first.verdict}: {why}); a reward must "
                                 "be a number here, and none is given for what was not judged "
                                 f"(set {NOT_JUDGED_ENV}=fallback to give them the Evaluator's "
                                 "fallback instead)", judgements)
        log.error("%s", err)
        raise err
    out = []
    for j in judgements:
        if not j.judged:
            log.error("kreward: a candidate that could not be judged gets the fallback %s "
                      "(%s=fallback)", fallback(ev), NOT_JUDGED_ENV)
        out.append(j.score if j.judged else fallback(ev))
    return out


def judge_all(reports):
    """judge() for a batch; every report is closed, also when one raises."""
    try:
        return [judge(r) for r in reports]
    finally:
        for r in reports:
            r.close()
