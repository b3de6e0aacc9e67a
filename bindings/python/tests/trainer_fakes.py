"""Stand-ins for the trainer tests on a machine without a GPU.

FakeEvaluator has the Evaluator's interface the adapters use; what happens
to a candidate is written in its source (`// fake: VERDICT [SPEEDUP]`), and
its report is scored by the library's real reward, as the pool's collecting
thread scores it. Problems are parsed by the library (a bad one raises).
Sample is slime's Sample with the fields the adapter reads
(slime/utils/types.py:94-151 at 624b824)."""
import dataclasses
import re
import threading

import kreward
from kreward.pool import UNSCORED

_FAKE = re.compile(r"// fake: (\w+)(?: ([0-9.]+))?")


def candidate(verdict, speedup=None, body="x[0] = 1;"):
    """A completion whose kernel the fake evaluator judges `verdict`."""
    tag = f"// fake: {verdict}" + (f" {speedup}" if speedup is not None else "")
    return (f"Here is my kernel.\n```cuda\nextern \"C\" __global__ void k(float* x) {{ {body} }}\n"
            f"{tag}\n```\nDone.")


class FakeEvaluator:
    def __init__(self, reward="makora", fallback=0.0, raise_error=None):
        self.ctx = kreward.Context(no_device=True)
        self.reward = self.ctx.reward(reward)
        self.fallback = fallback
        self.raise_error = raise_error   # an exception evaluate_batch raises
        self.sources = []                # every source evaluated, in order
        self.threads = set()             # the threads that called
        self._lock = threading.Lock()
        self._problems = {}

    def close(self):
        for p in self._problems.values():
            p.close()
        self.reward.close()
        self.ctx.close()

    def problem(self, spec):
        key = spec if isinstance(spec, str) else repr(spec)
        with self._lock:
            if key not in self._problems:
                self._problems[key] = self.ctx.problem(spec)
            return self._problems[key]

    def _report(self, source):
        m = _FAKE.search(source)
        r = kreward.Report()
        r.verdict = m.group(1) if m else "compile_error"
        r["compiled"] = 0 if r.verdict == "compile_error" else 1
        if m and m.group(2):
            s = float(m.group(2))
            r["speedup"], r["speedup_low"], r["time_us"] = s, s * 0.99, 100.0 / s
        if r.verdict == "passed":
            r["memory_bytes"], r["code_lines"] = 4096, 20
        if r.verdict in ("error", "not_run"):
            r.set_text("message", "the fake environment failed")
        r.set_text("feedback", f"fake {r.verdict}")
        if r.verdict not in UNSCORED:
            self.reward.score(r)
        return r

    def evaluate_batch(self, problems, sources):
        if self.raise_error is not None:
            raise self.raise_error
        for p in problems:
            self.problem(p)
        with self._lock:
            self.sources.extend(sources)
            self.threads.add(threading.get_ident())
        return [self._report(s) for s in sources]

    def evaluate(self, problem, source):
        return self.evaluate_batch([problem], [source])[0]

    async def evaluate_async(self, problem, source):
        return self.evaluate(problem, source)

    no_code = kreward.Evaluator.no_code


@dataclasses.dataclass
class Sample:
    prompt: object = ""
    response: str = ""
    label: object = None
    reward: object = None
    metadata: dict = dataclasses.field(default_factory=dict)

    def get_reward_value(self, args):  # slime/utils/types.py:246-247
        return self.reward if not args.reward_key else self.reward[args.reward_key]
