"""Evaluating many completions for a trainer, of either kind of problem.

A problem is a kreward problem (problem.json's path, its JSON or a dict:
CUDA or Triton kernels with a launch plan) or a KernelBench problem (a .py
path, the file's text or a registered name: ModelNew modules); a batch may
mix them (kreward.problems tells them apart). Every evaluation returns a
kreward.Report, scored by the same reward table.

Isolated (the default): candidates are untrusted code, so they run in
worker processes, on one rail (kreward.rail): kreward problems in a
kreward.Pool (sandboxed kreward-worker processes, one per GPU, compile
workers on the CPUs), ModelNew candidates in the ModelNew scheduler (one
lane per GPU this process sees, each candidate in a sandboxed worker of its
own; the golden outputs are made here with the problem's Model). A
candidate that faults or hangs costs a worker, never the trainer. Golden
callbacks and reward terms run here, in the trainer's process. Without a
GPU (and no gpus asked for) the pool only compiles and checks: kreward
candidates end not_run, and ModelNew candidates cannot be evaluated
(KrewardError ENODEVICE when one is submitted).

In-process (isolated=False, for trusted code and debugging): kreward
problems compile in a thread pool, then run one after the other on this
process's GPU context; ModelNew candidates still run in their workers."""
import asyncio
import concurrent.futures
import os
import tempfile
import threading
import warnings

from .. import problems as _problems
from ..completion import KERNELBENCH, extract_code, no_code_feedback
from ..constants import Status
from ..context import Context
from ..core import Problem, Report
from ..errors import KrewardError
from ..pool import Pool
from ..rail import Rail
from .base import Backend


def no_code_report(reward, why=None, kind=None):
    """A completion without code, as a report (scored with reward when
    given: the policy's doing): compile_error, why as its feedback."""
    r = Report()
    r.verdict = "compile_error"
    r["compiled"] = 0
    r.set_text("message", "no code found in the completion")
    r.set_text("feedback", why or no_code_feedback(kind))
    if kind:
        r.set_text("kind", kind)
    if reward is not None:
        reward.score(r)
    return r


class Evaluator(Backend):
    """reward: a preset name, a JSON config or None; preset: "fast" or
    "precise"; fallback: what score_of gives a report that could not be
    judged (None, the default: no number; a number only where asked for).

    isolated: evaluate kreward problems through a Pool (default) or in this
    process. gpus: the pool's GPUs (None: every visible one; "none": compile
    only); require_gpu: fail rather than fall back to compile-only when no
    GPU worker can start; pool_options: more Pool options (compile_workers,
    job_timeout_s, ...). device and compile_threads: the in-process path's.
    no_device: never use a GPU (compile and check only), either way.

    kernelbench: options of the ModelNew scheduler, a dict: "devices" (the
    lanes' devices, default every GPU this process sees; ["cpu"] runs
    candidates on the CPU, for tests: no kernel attribution, so no speed
    pay), "runner" (kreward.kernelbench.runner.Runner's options: cache_dir,
    timeout_s, sandbox, ...), "keep_warm" (Runners per lane, 8),
    "in_flight" (candidates evaluated at once per lane, timed one at a
    time: 1, the default, is one at a time; opt-in, docs/kernelbench.md),
    "max_spares" (with in_flight > 1, the most spare workers a lane keeps:
    default in_flight), "prepare_ahead" (True: with in_flight > 1, a queued
    problem's baseline started while the lane's candidates run),
    "affinity_s" (30: a lane keeps to the problem it ran last for queued
    candidates submitted up to this long after the oldest; 0: in
    submission order),
    "max_attempts" (3), "job_timeout_s" (the backstop,
    default the Runner's evaluation limit plus its timeout), "problems"
    (folders of KernelBench files to register by name)."""

    def __init__(self, reward="makora", preset="fast", cache_dir=None, compile_threads=None,
                 device=0, fallback=None, isolated=True, gpus=None, require_gpu=False,
                 pool_options=None, no_device=False, kernelbench=None):
        self.cache_dir = cache_dir or os.environ.get("KREWARD_CACHE_DIR") or os.path.join(
            tempfile.gettempdir(), f"kreward-cache-{os.getuid()}")
        self.isolated = isolated
        self.pool = None
        self.rail = None
        self.kernelbench_options = dict(kernelbench or {})
        self.no_device = no_device
        if isolated:  # no CUDA context here: kreward candidates never run in this process
            self.ctx = Context(no_device=True, cache_dir=self.cache_dir)
        else:
            self.ctx = Context(device=device, cache_dir=self.cache_dir, no_device=no_device)
        self._problems = {}
        self._lock = threading.Lock()  # the problem cache
        self._names = {}
        for folder in self.kernelbench_options.get("problems") or ():
            self._names.update(_problems.scan_kernelbench(folder))
        self.reward = None
        try:
            self.reward = self.ctx.reward(reward) if reward is not None else None
            if isolated:
                self.pool = self._start_pool("none" if no_device else gpus, require_gpu,
                                             dict(pool_options or {}))
            self.rail = Rail(self.pool, self._make_scheduler)
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
                          "need an NVIDIA GPU); a candidate that compiles is not judged (no "
                          "reward)", RuntimeWarning, stacklevel=3)
            return Pool(gpus="none", **options)

    def _make_scheduler(self):
        """The ModelNew scheduler, on the first ModelNew candidate
        (kernelbench/lanes.py make_scheduler)."""
        from ..kernelbench.lanes import make_scheduler
        return make_scheduler(self.kernelbench_options, self.cache_dir, self.no_device)

    def close(self):
        if self.rail is not None:    # first: its jobs point to the problems
            self.rail.close()
        elif self.pool is not None:
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

    # ---- problems ----
    def kind_of(self, spec):
        """"kreward" or "kernelbench" for a problem spec."""
        return _problems.kind_of(spec, self._kernelbench_names())

    def _kernelbench_names(self):
        names = _problems.registered()
        names.update(self._names)
        return names

    def problem(self, spec):
        """The problem of a spec (kept per spec): a kreward.Problem, or a
        KernelBenchProblem, imported here (its probes run once per file and
        are kept on disk) so that a file the importer refuses is refused
        now, with the reason (ProblemError)."""
        if isinstance(spec, _problems.KernelBenchProblem):
            spec.imported()
            return spec
        if isinstance(spec, Problem):
            return spec
        key = _problems.key_of(spec)
        with self._lock:
            if key in self._problems:
                return self._problems[key]
        names = self._kernelbench_names()
        if _problems.kind_of(spec, names) == _problems.KERNELBENCH:
            p = _problems.kernelbench(spec, names)
            p.imported()
        else:
            p = self.ctx.problem(spec)
        with self._lock:
            return self._problems.setdefault(key, p)

    # ---- one candidate ----
    def _compile_only(self, source):
        ctx = getattr(self._local, "ctx", None)
        if ctx is None:
            ctx = self._local.ctx = Context(no_device=True, cache_dir=self.cache_dir,
                                            default_arch=self.ctx.arch)
        try:
            ctx.compile(source).close()
        except KrewardError:
            pass  # the evaluation reports it

    def _on_rail(self, problem):
        return self.isolated or isinstance(problem, _problems.KernelBenchProblem)

    def _submit(self, problem, source, name):
        return self.rail.submit(problem, source, name=name, reward=self.reward,
                                preset=self.preset)

    def evaluate(self, problem, source, name="candidate.cu"):
        """A Report, whatever happened to the candidate: also when the
        environment failed (verdict error, unscored: score_of gives the
        fallback), so one broken step does not stop a training run. Python
        callbacks' exceptions (golden, reward terms) are raised."""
        p = self.problem(problem)
        if source is None:
            return self.no_code(kind=getattr(p, "kind", None))
        if self._on_rail(p):
            return self.rail.wait(self._submit(p, source, name))
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
        p = self.problem(problem)
        return self.evaluate(p, extract_code(completion, kind=getattr(p, "kind", None)))

    def evaluate_batch(self, problem_specs, sources):
        """Reports for a batch (a GRPO group; the problems may be of either
        kind), in order. On the rail: every candidate submitted at once
        (identical kreward candidates are evaluated once); in-process:
        kreward candidates compile in parallel, then run one by one. A
        source of None (no code in the completion) gets a compile_error
        report without being evaluated."""
        problem_specs, sources = list(problem_specs), list(sources)
        if len(problem_specs) != len(sources):
            raise ValueError(f"{len(problem_specs)} problems for {len(sources)} sources")
        problems = [self.problem(p) for p in problem_specs]
        on_rail = [i for i, s in enumerate(sources) if s is not None and self._on_rail(problems[i])]
        local = [i for i, s in enumerate(sources) if s is not None and i not in set(on_rail)]
        done = {}
        if on_rail:
            jobs = [dict(problem=problems[i], source=sources[i], reward=self.reward,
                         preset=self.preset) for i in on_rail]
            done.update(zip(on_rail, self.rail.evaluate_batch(jobs)))
        if local:
            with concurrent.futures.ThreadPoolExecutor(self.threads) as pool:
                list(pool.map(self._compile_only, [sources[i] for i in local]))
            for i in local:
                done[i] = self.evaluate(problems[i], sources[i])
        return [done[i] if i in done else self.no_code(kind=getattr(problems[i], "kind", None))
                for i in range(len(sources))]

    async def evaluate_async(self, problem, source, name="candidate.cu"):
        """evaluate() for an event loop: never blocks it (on the rail: the
        job is submitted and its report awaited; in-process: run in the
        loop's executor)."""
        loop = asyncio.get_running_loop()
        p = await loop.run_in_executor(None, self.problem, problem)
        if source is None:
            return self.no_code(kind=getattr(p, "kind", None))
        if not self._on_rail(p):
            return await loop.run_in_executor(None, self.evaluate, p, source)
        return await self.rail.wait_async(self._submit(p, source, name))

    def no_code(self, why=None, kind=None):
        """The report of a completion without code (scored: the policy's
        doing): compile_error, why as its feedback."""
        return no_code_report(self.reward, why, kind)

    def score_of(self, report):
        """The reward, or the fallback when the candidate could not be judged
        (no GPU, an environment error)."""
        r = report.reward
        return self.fallback if r is None else r


__all__ = ["Evaluator", "KERNELBENCH", "no_code_report"]
