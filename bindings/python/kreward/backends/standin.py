"""A test double that stands in for the GPU: the Evaluator protocol
(backends/base.py) with every verdict written in the candidate itself, for
testing a trainer's wiring end to end on a machine without a GPU (CI, a
laptop). Nothing is compiled or run.

A candidate says what becomes of it in a line holding `standin: VERDICT
[SPEEDUP]` (in a `//` or `#` comment), e.g. `// standin: passed 2.0`; a
candidate without such a line is a compile_error (as a completion without
code is). The verdicts `error` and `not_run` are reports that were not
judged (reward None). Reports are real kreward.Reports scored by the
library's reward table, so rewards, ladders and flags are the real ones;
problems of either kind are checked as the Evaluator checks them
(kreward problems are parsed, KernelBench ones must look like one).

    ev = kreward.backend.resolve("standin")        # or KREWARD_BACKEND=standin
    kreward.trainers.set_evaluator(ev)

Not a backend for training: its rewards are whatever the candidates say."""
import re
import threading

from .. import problems as _problems
from ..context import Context
from ..core import Report
from ..pool import UNSCORED
from .base import Backend
from .local import no_code_report


def candidate(verdict, speedup=None, body="x[0] = 1;", marker="standin"):
    """A completion whose kernel the stand-in judges `verdict`."""
    tag = f"// {marker}: {verdict}" + (f" {speedup}" if speedup is not None else "")
    return (f"Here is my kernel.\n```cuda\nextern \"C\" __global__ void k(float* x) {{ {body} }}\n"
            f"{tag}\n```\nDone.")


class StandIn(Backend):
    """reward: a preset name or JSON configuration (default makora);
    fallback: score_of's value for a report that was not judged (None: the
    rule everywhere, no number); raise_error: an exception evaluate_batch
    raises (to test a trainer's handling of a failing backend)."""
    marker = "standin"

    def __init__(self, reward="makora", fallback=None, raise_error=None, preset="fast"):
        self.ctx = Context(no_device=True)
        self.reward = self.ctx.reward(reward)
        self.fallback = fallback
        self.raise_error = raise_error
        self.sources = []     # every source evaluated, in order
        self.threads = set()  # the threads that called
        self._pattern = re.compile(r"(?://|#) *%s: (\w+)(?: ([0-9.]+))?" % re.escape(self.marker))
        self._lock = threading.Lock()
        self._problems = {}

    def close(self):
        for p in self._problems.values():
            p.close()
        self.reward.close()
        self.ctx.close()

    def problem(self, spec):
        key = _problems.key_of(spec) if not hasattr(spec, "handle") else id(spec)
        with self._lock:
            if key not in self._problems:
                if _problems.kind_of(spec) == _problems.KERNELBENCH:
                    self._problems[key] = _problems.kernelbench(spec)
                else:
                    self._problems[key] = self.ctx.problem(spec)
            return self._problems[key]

    def _report(self, problem, source):
        m = self._pattern.search(source or "")
        r = Report()
        r.verdict = m.group(1) if m else "compile_error"
        r["compiled"] = 0 if r.verdict == "compile_error" else 1
        if m and m.group(2):
            s = float(m.group(2))
            r["speedup"], r["speedup_low"], r["time_us"] = s, s * 0.99, 100.0 / s
        if r.verdict == "passed":
            r["memory_bytes"], r["code_lines"] = 4096, 20
        if r.verdict in ("error", "not_run"):
            r.set_text("message", f"the {self.marker} environment failed")
        r.set_text("feedback", f"{self.marker} {r.verdict}")
        kind = getattr(problem, "kind", None)
        if kind:
            r.set_text("kind", kind)
        if r.verdict not in UNSCORED:
            self.reward.score(r)
        return r

    def evaluate_batch(self, problems, sources):
        if self.raise_error is not None:
            raise self.raise_error
        problems = [self.problem(p) for p in problems]
        with self._lock:
            self.sources.extend(sources)
            self.threads.add(threading.get_ident())
        return [self._report(p, s) for p, s in zip(problems, sources)]

    def evaluate(self, problem, source, name="candidate.cu"):
        return self.evaluate_batch([problem], [source])[0]

    async def evaluate_async(self, problem, source, name="candidate.cu"):
        return self.evaluate(problem, source)

    def evaluate_completion(self, problem, completion):
        from ..completion import extract_code
        p = self.problem(problem)
        code = extract_code(completion, kind=getattr(p, "kind", None))
        return self.no_code(kind=getattr(p, "kind", None)) if code is None \
            else self.evaluate(p, code)

    def no_code(self, why=None, kind=None):
        return no_code_report(self.reward, why, kind)
