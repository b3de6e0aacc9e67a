"""Evaluating many completions for a trainer.

Isolated (the default): candidates are untrusted code, so they run in a
kreward.Pool, in sandboxed worker processes (one per GPU, compile workers on
the CPUs): a candidate that faults or hangs costs a worker, never the
trainer's own CUDA context. Golden callbacks (e.g. PyTorch references) and
reward terms still run here, in the trainer's process. Without a GPU (and
no gpus asked for) the pool only compiles and checks, as the CLI does: the
candidates end not_run and score the fallback.

In-process (isolated=False, for trusted code and debugging): compiles a
batch in a thread pool (a compile-only context per thread, sharing a disk
cache), then evaluates the candidates one after the other on this process's
GPU context, where the compiles are cache hits."""
import asyncio
import concurrent.futures
import os
import tempfile
import threading
import warnings

from .completion import extract_code
from .constants import Status
from .context import Context
from .core import Report
from .errors import KrewardError
from .pool import Pool


def no_code_report(reward, why=None):
    """A completion without code, as a report (scored with reward when
    given: the policy's doing): compile_error, why as its feedback."""
    r = Report()
    r.verdict = "compile_error"
    r["compiled"] = 0
    r.set_text("message", "no code found in the completion")
    r.set_text("feedback", why or "no code found: put the CUDA kernel in a ```cuda fenced "
               "block, with its // kreward: launch line")
    if reward is not None:
        reward.score(r)
    return r


class Evaluator:
    """reward: a preset name, a JSON config or None; preset: "fast" or
    "precise"; fallback: the score of a report that could not be judged.

    isolated: evaluate through a Pool (default) or in this process.
    gpus: the pool's GPUs (None: every visible one; "none": compile only);
    require_gpu: fail rather than fall back to compile-only when no GPU
    worker can start; pool_options: more Pool options (compile_workers,
    job_timeout_s, ...). device and compile_threads: the in-process path's.
    no_device: never use a GPU (compile and check only), either way."""

    def __init__(self, reward="makora", preset="fast", cache_dir=None, compile_threads=None,
                 device=0, fallback=0.0, isolated=True, gpus=None, require_gpu=False,
                 pool_options=None, no_device=False):
        self.cache_dir = cache_dir or os.environ.get("KREWARD_CACHE_DIR") or os.path.join(
            tempfile.gettempdir(), f"kreward-cache-{os.getuid()}")
        self.isolated = isolated
        self.pool = None
        if isolated:  # no CUDA context here: candidates never run in this process
            self.ctx = Context(no_device=True, cache_dir=self.cache_dir)
        else:
            self.ctx = Context(device=device, cache_dir=self.cache_dir, no_device=no_device)
        self._problems = {}
        self._lock = threading.Lock()  # the problem cache
        self.reward = None
        try:
            self.reward = self.ctx.reward(reward) if reward is not None else None
            if isolated:
                self.pool = self._start_pool("none" if no_device else gpus, require_gpu,
                                             dict(pool_options or {}))
        except BaseException:
            self.close()
            raise
        self.preset = preset
        self.fallback = fallback
        self.threads = compile_threads or max(1, (os.cpu_count() or 2) - 1)
        self._gpu = threading.Lock()   # in-process: one evaluation on the GPU at a time
        self._local = threading.local()

    def _start_pool(self, gpus, require_gpu, options):
        options.setdefault("cache_dir", self.cache_dir)
        try:
            return Pool(gpus=gpus, **options)
        except KrewardError as e:
            if e.code != Status.ENODEVICE or gpus is not None or require_gpu:
                raise
            warnings.warn(f"kreward: {e.message}: compile checks only (verification and timing "
                          "need an NVIDIA GPU); candidates score the fallback", RuntimeWarning,
                          stacklevel=3)
            return Pool(gpus="none", **options)

    def close(self):
        if self.pool is not None:  # first: its jobs point to the problems
            self.pool.close()
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
        with self._lock:
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

    def _submit(self, problem, source, name):
        return self.pool.submit(problem, source, name=name, reward=self.reward,
                                preset=self.preset)

    def evaluate(self, problem, source, name="candidate.cu"):
        """A Report, whatever happened to the candidate: also when the
        environment failed (verdict error, unscored: score_of gives the
        fallback), so one broken step does not stop a training run. Python
        callbacks' exceptions (golden, reward terms) are raised."""
        p = self.problem(problem)
        if source is None:
            return self.no_code()
        if self.pool is not None:
            return self.pool.wait(self._submit(p, source, name))
        with self._gpu:
            try:
                return self.ctx.evaluate(p, source, reward=self.reward, preset=self.preset,
                                         name=name)
            except KrewardError as e:
                # a poisoned context fails every later candidate the same
                # way: raised, so a trainer stops rather than score them all
                # as environment errors
                if e.report is None or e.code == Status.EPOISONED:
                    raise
                return e.report

    def evaluate_completion(self, problem, completion):
        return self.evaluate(problem, extract_code(completion))

    def evaluate_batch(self, problem_specs, sources):
        """Reports for a batch (a GRPO group), in order. Isolated: one
        kr_evaluate_batch through the pool (identical candidates evaluated
        once); in-process: compiles in parallel, then evaluates one by one.
        A source of None (no code in the completion) gets a compile_error
        report without being evaluated."""
        problem_specs, sources = list(problem_specs), list(sources)
        if len(problem_specs) != len(sources):
            raise ValueError(f"{len(problem_specs)} problems for {len(sources)} sources")
        if self.pool is None:
            with concurrent.futures.ThreadPoolExecutor(self.threads) as pool:
                list(pool.map(self._compile_only, [s for s in sources if s]))
            return [self.evaluate(p, s) for p, s in zip(problem_specs, sources)]
        problems = [self.problem(p) for p in problem_specs]
        todo = [i for i, s in enumerate(sources) if s is not None]
        jobs = [dict(problem=problems[i], source=sources[i], reward=self.reward,
                     preset=self.preset) for i in todo]
        done = dict(zip(todo, self.pool.evaluate_batch(jobs)))
        return [done[i] if i in done else self.no_code() for i in range(len(sources))]

    async def evaluate_async(self, problem, source, name="candidate.cu"):
        """evaluate() for an event loop: never blocks it (isolated: the job
        is submitted and its report awaited; in-process: run in the loop's
        executor)."""
        if self.pool is None:
            return await asyncio.get_running_loop().run_in_executor(None, self.evaluate, problem,
                                                                    source)
        p = self.problem(problem)
        if source is None:
            return self.no_code()
        return await self.pool.wait_async(self._submit(p, source, name))

    def no_code(self, why=None):
        """The report of a completion without code (scored: the policy's
        doing): compile_error, why as its feedback."""
        return no_code_report(self.reward, why)

    def score_of(self, report):
        """The reward, or the fallback when the candidate could not be judged
        (no GPU, an environment error)."""
        r = report.reward
        return self.fallback if r is None else r
