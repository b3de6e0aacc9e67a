"""A backend that needs no GPU: reports whose speedup is a function of the
knobs, for testing a tuning setup (the space, the checks, a strategy) on
any machine. It has the backend methods TuneEnv uses (evaluate_batch,
score_of, close) and reads each variant's knobs back from the `#define`
lines CudaKernel puts on top of the source, so it sees exactly what a real
backend would be sent. Every report it makes says "synthetic" in its
message: nothing it returns was measured."""
import re

from ..context import Context
from ..core import Report

_DEFINE = re.compile(r"^#define (\w+) (\S+)$", re.M)


def knobs_of(source):
    """{knob: value} from a variant's leading #define lines (ints as ints)."""
    head = source.split("#line 1", 1)[0]
    return {k: int(v) if re.fullmatch(r"-?\d+", v) else v for k, v in _DEFINE.findall(head)}


class SyntheticBackend:
    """speedup(knobs) -> float, or None for a configuration that should
    read as incorrect. base_us: the baseline's time (time_us = base_us /
    speedup). calls: how many configurations it was asked to evaluate;
    batches: the size of each batch."""

    def __init__(self, speedup, reward="makora", base_us=100.0, fallback=0.0):
        self._speedup = speedup
        self.base_us = base_us
        self.fallback = fallback
        self.preset = "fast"
        self._ctx = Context(no_device=True)
        self.reward = self._ctx.reward(reward)
        self.calls = 0
        self.batches = []
        self.seen = []

    def evaluate(self, problem, source, name="candidate.cu"):
        return self.evaluate_batch([problem], [source])[0]

    def evaluate_batch(self, problems, sources):
        sources = list(sources)
        self.batches.append(len(sources))
        out = []
        for src in sources:
            self.calls += 1
            knobs = knobs_of(src)
            self.seen.append(knobs)
            s = self._speedup(knobs)
            r = Report()
            r["compiled"] = 1
            r.set_text("message", f"synthetic report for {knobs}: nothing was measured")
            if s is None:
                r.verdict = "incorrect"
                r["correct"] = 0
            else:
                r.verdict = "passed"
                r["correct"] = 1
                r["speedup"] = s
                r["baseline_us"] = self.base_us
                r["time_us"] = self.base_us / s
            self.reward.score(r)
            out.append(r)
        return out

    def score_of(self, report):
        return self.fallback if report.reward is None else report.reward

    def close(self):
        self.reward.close()
        self._ctx.close()
