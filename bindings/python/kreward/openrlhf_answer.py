"""OpenRLHF's answer, one implementation for its two doors: the file
adapter (kreward/trainers/openrlhf.py, loaded by OpenRLHF's --remote_rm_url
PATH) and `kreward serve`'s /openrlhf route. The response in a query, the
0..1 scores from a reward's ladder, and the {"rewards", "scores",
"extra_logs"} shape. Imports nothing of either door."""
import threading

from .completion import safe_text

_ranges = {}
_ranges_lock = threading.Lock()


def response_of(query, prompt):
    """The response in a query: what follows the prompt's first occurrence;
    the whole query when the prompt is not found verbatim (then blocks the
    prompt showed are recognised and skipped by the extraction, which
    compares code without whitespace)."""
    query = safe_text(query)
    prompt = safe_text(prompt)
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
