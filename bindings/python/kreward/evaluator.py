"""Evaluating many completions: parallel compiles, one GPU, async helpers.

Compiling is CPU work and releases the GIL (ctypes calls do), so the
Evaluator compiles a batch in a thread pool (a compile-only context per
thread, sharing a disk cache), then evaluates the candidates one after the
other on the GPU, where the compiles are cache hits: timings never overlap,
and nothing waits for NVRTC twice."""
import asyncio
import concurrent.futures
import os
import tempfile
import threading

from .completion import completion_text, extract_code
from .context import Context
from .core import Report
from .errors import KrewardError


class Evaluator:
    def __init__(self, reward="makora", preset="fast", cache_dir=None, compile_threads=None,
                 device=0, fallback=0.0):
        self.cache_dir = cache_dir or os.environ.get("KREWARD_CACHE_DIR") or os.path.join(
            tempfile.gettempdir(), f"kreward-cache-{os.getuid()}")
        self.ctx = Context(device=device, cache_dir=self.cache_dir)
        self.reward = self.ctx.reward(reward) if reward is not None else None
        self.preset = preset
        self.fallback = fallback
        self.threads = compile_threads or max(1, (os.cpu_count() or 2) - 1)
        self._problems = {}
        self._gpu = threading.Lock()   # one evaluation on the GPU at a time
        self._local = threading.local()

    def close(self):
        if self.reward is not None:
            self.reward.close()
        for p in self._problems.values():
            p.close()
        self.ctx.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def problem(self, spec):
        key = spec if isinstance(spec, str) else repr(sorted(spec.items()))
        if key not in self._problems:
            self._problems[key] = self.ctx.problem(spec)
        return self._problems[key]

    def _compile_only(self, source):
        ctx = getattr(self._local, "ctx", None)
        if ctx is None:
            ctx = self._local.ctx = Context(no_device=True, cache_dir=self.cache_dir,
                                            default_arch=self.ctx.arch)
        try:
            ctx.compile(source).close()
        except KrewardError:
            pass  # the evaluation reports it

    def evaluate(self, problem, source, name="candidate.cu"):
        """A Report, whatever happened to the candidate: also when the
        environment failed (verdict error, unscored: score_of gives the
        fallback), so one broken step does not stop a training run. Python
        callbacks' exceptions (golden, reward terms) are raised."""
        p = self.problem(problem)
        if source is None:
            return self._no_code()
        with self._gpu:
            try:
                return self.ctx.evaluate(p, source, reward=self.reward, preset=self.preset,
                                         name=name)
            except KrewardError as e:
                if e.report is None:
                    raise
                return e.report

    def evaluate_completion(self, problem, completion):
        return self.evaluate(problem, extract_code(completion_text(completion)))

    def evaluate_batch(self, problem_specs, sources):
        """Reports for a batch (a GRPO group): compiles in parallel, then
        evaluates one by one."""
        with concurrent.futures.ThreadPoolExecutor(self.threads) as pool:
            list(pool.map(self._compile_only, [s for s in sources if s]))
        return [self.evaluate(p, s) for p, s in zip(problem_specs, sources)]

    async def evaluate_async(self, problem, source):
        return await asyncio.get_running_loop().run_in_executor(None, self.evaluate, problem, source)

    def _no_code(self):
        r = Report()
        r.verdict = "compile_error"
        r["compiled"] = 0
        r.set_text("message", "no code found in the completion")
        r.set_text("feedback", "no code found: put the CUDA kernel in a ```cuda fenced block, "
                   "with its // kreward: launch line")
        if self.reward is not None:
            self.reward.score(r)
        return r

    def score_of(self, report):
        """The reward, or the fallback when the candidate could not be judged
        (no GPU, an environment error)."""
        r = report.reward
        return self.fallback if r is None else r
