"""The tuning environment: Gymnasium-style reset/step over a kernel's
knobs. action = one index per knob (a knob assignment); observation =
problem features + the last result; reward = the reward preset's score of
the evaluation (a kreward reward: the backend's, or `reward`'s for
configurations refused before running); info carries the verdict, the
speedup and the time.

Every assignment is checked here first, without a GPU (kernels.py:
constraints, NVRTC compile, plan check, registers and shared memory
against the arch's limits): a configuration that cannot run gets the
verdict and reward a GPU run would have given it, in milliseconds.
Configurations that pass go to the backend in batches (step_batch): a
local kreward pool spreads one batch over every GPU of the host.

Results are memoised by the variant's content hash and by assignment: an
assignment seen before (or one whose variant has the same content) is
never evaluated again, and costs no budget."""
import math
import time

from .. import backend as _backend
from ..context import Context
from ..core import Report
from ..errors import KrewardError
from ..reward import Reward
from . import _spaces
from .kernels import TritonKernel


class Result:
    """One judged configuration. verdict: the report's (or the check's);
    reward: the preset's score (None: could not be judged, e.g. no GPU);
    speedup, time_us: from the benchmark when it passed; invalid: why the
    check refused it (no GPU run); ran: whether a backend evaluated it;
    wall_s: this configuration's share of its batch's wall time plus its
    check; report: the report as a dict; cached: it came from the memo;
    counted: it spent budget (new, and not refused by a declared
    constraint, which costs no compile)."""
    __slots__ = ("assignment", "key", "verdict", "reward", "speedup", "time_us", "invalid", "ran",
                 "wall_s", "report", "cached", "counted")

    def __init__(self, assignment, key, verdict, reward, speedup=None, time_us=None, invalid=None,
                 ran=False, wall_s=0.0, report=None):
        self.assignment, self.key, self.verdict, self.reward = dict(assignment), key, verdict, reward
        self.speedup, self.time_us, self.invalid, self.ran = speedup, time_us, invalid, ran
        self.wall_s, self.report, self.cached = wall_s, report, False
        self.counted = False  # whether it spent budget (a new configuration that was compiled)

    @property
    def passed(self):
        return self.verdict == "passed"

    def as_info(self):
        return {"knobs": dict(self.assignment), "verdict": self.verdict, "reward": self.reward,
                "speedup": self.speedup, "time_us": self.time_us, "invalid": self.invalid,
                "ran": self.ran, "cached": self.cached, "counted": self.counted,
                "wall_s": self.wall_s, "key": self.key}

    def __repr__(self):
        s = f"{self.speedup:.3g}x" if self.speedup is not None else "-"
        return f"<Result {self.assignment} {self.verdict} {s} reward={self.reward}>"


def better(a, b):
    """Whether result a beats b: passed first, then the higher speedup
    (the reward where there is no speedup)."""
    if b is None:
        return a is not None and a.passed
    if a is None or not a.passed:
        return False
    ka = (a.speedup if a.speedup is not None else -math.inf, a.reward or -math.inf)
    kb = (b.speedup if b.speedup is not None else -math.inf, b.reward or -math.inf)
    return ka > kb


class TuneEnv(_spaces.EnvBase):
    """kernel: a CudaKernel or TritonKernel. backend: anything
    kreward.backend.resolve takes (None: $KREWARD_URL, $KREWARD_RAY or a
    local pool over every GPU), or a Context for in-process evaluation of
    trusted kernels. reward, preset: for the backend it creates and for
    scoring refused configurations (a given Evaluator's own reward is used
    when it has one). max_evals: new configurations compiled per episode
    before `truncated` (memo hits and constraint refusals are free); arch: the target for the checks (None: the context's
    default, sm_90a); cache_dir: the compile cache (None: the backend's)."""
    metadata = {"render_modes": []}

    def __init__(self, kernel, backend=None, reward="makora", preset="fast", max_evals=None,
                 arch=None, cache_dir=None, seed=None):
        self.kernel = kernel
        self.max_evals = max_evals
        self._own_backend = backend is None or isinstance(backend, str)
        if isinstance(backend, Context):
            self.backend, self._inproc = None, backend
        else:
            self._inproc = None
            opts = {"reward": reward, "preset": preset} if self._own_backend else {}
            self.backend = _backend.resolve(backend, **opts) if self._own_backend else \
                _backend.resolve(backend)
        cache_dir = cache_dir or getattr(self.backend, "cache_dir", None)
        self.ctx = Context(no_device=True, cache_dir=cache_dir, default_arch=arch)
        given = getattr(self.backend, "reward", None)
        self._own_reward = not isinstance(given, Reward)
        self.reward = self.ctx.reward(reward) if self._own_reward else given
        self.preset = getattr(self.backend, "preset", preset)
        self.fallback = getattr(self.backend, "fallback", 0.0)
        info = kernel.problem_info(self.ctx)
        timing = info["cases"][[c.get("timing") for c in info["cases"]].index(True)] \
            if any(c.get("timing") for c in info["cases"]) else info["cases"][-1]
        self._features = [math.log2(max(1, timing["dims"][d])) for d in info["dims"]] + [
            math.log2(1 + timing.get("roofline_bytes", 0) or 1),
            math.log2(1 + timing.get("roofline_flops", 0) or 1)]
        self.space = kernel.space
        self.action_space = _spaces.multi_discrete(self.space.nvec, seed=seed)
        n = len(self._features) + len(self.space.nvec) + 5
        self.observation_space = _spaces.box(n)
        self.by_key, self.by_assignment = {}, {}
        self.history = []               # every step's Result, in order, cached ones included
        self.gpu_runs = 0               # configurations a backend evaluated (ever)
        self.gpu_wall_s = 0.0           # wall time of those batches
        self.check_wall_s = 0.0         # wall time of the checks
        self.reset(seed=seed)

    # ---- gymnasium ----
    def reset(self, seed=None, options=None):
        if _spaces.HAVE_GYMNASIUM:
            super().reset(seed=seed)
        self.evaluations = 0            # new evaluations this episode
        self.steps = 0
        self.last = None
        self.best = None
        return self._obs(), {}

    def step(self, action):
        obs, rewards, terminated, truncated, infos = self.step_batch([action])
        return obs, rewards[0], terminated, truncated, infos[0]

    def step_batch(self, actions):
        """Several actions at once (one batch to the backend: spread over
        its GPUs). Returns (obs, rewards, terminated, truncated, infos)."""
        assignments = [a if isinstance(a, dict) else self.space.decode(a) for a in actions]
        results = self.evaluate(assignments)
        rewards = [self.fallback if r.reward is None else r.reward for r in results]
        return self._obs(), rewards, False, self.exhausted, [r.as_info() for r in results]

    def close(self):
        if self._own_backend and self.backend is not None:
            self.backend.close()
        if self._own_reward and self.reward is not None:
            self.reward.close()
        self.ctx.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    @property
    def exhausted(self):
        return self.max_evals is not None and self.evaluations >= self.max_evals

    # ---- evaluation ----
    def cached(self, assignment):
        key = self.by_assignment.get(self.space.key(assignment))
        return self.by_key.get(key) if key is not None else None

    def evaluate(self, assignments):
        """Results for assignments, in order: memoised ones from the memo,
        the rest checked here, the runnable ones evaluated as one batch."""
        out, fresh = [None] * len(assignments), []
        waiting = {}      # content key -> indices of this batch waiting for its result
        batch_keys = {}   # assignment key -> content key, for this batch's new ones
        for i, a in enumerate(assignments):
            hit = self.cached(a)
            if hit is not None:
                out[i] = _copy(hit, cached=True, assignment=a)
                continue
            akey = self.space.key(a)
            if akey in batch_keys:          # the same assignment twice in one batch
                waiting[batch_keys[akey]].append(i)
                continue
            t0 = time.perf_counter()
            variant = self.kernel.variant(a, self.ctx)
            self.check_wall_s += time.perf_counter() - t0
            batch_keys[akey] = variant.key
            same = self.by_key.get(variant.key)
            if same is not None:            # another assignment made the same content
                self.by_assignment[akey] = variant.key
                out[i] = _copy(same, cached=True, assignment=a)
                continue
            if variant.key in waiting:      # ... earlier in this batch
                self.by_assignment[akey] = variant.key
                waiting[variant.key].append(i)
                continue
            waiting[variant.key] = [i]
            fresh.append(variant)
        runnable = [v for v in fresh if v.invalid is None]
        reports, batch_wall = self._run(runnable)
        share = batch_wall / len(runnable) if runnable else 0.0
        for v in fresh:
            r = self._result_of(v, reports.pop(0), share) if v.invalid is None else self._refused(v)
            self.by_key[v.key] = r
            self.by_assignment[self.space.key(v.assignment)] = v.key
            r.counted = not v.by_constraint
            self.evaluations += r.counted
            first, *rest = waiting[v.key]
            out[first] = r
            for i in rest:
                out[i] = _copy(r, cached=True, assignment=assignments[i])
        for r in out:
            self.steps += 1
            self.history.append(r)
            self.last = r
            if better(r, self.best):
                self.best = r
        return out

    def _run(self, variants):
        if not variants:
            return [], 0.0
        t0 = time.perf_counter()
        if isinstance(self.kernel, TritonKernel):
            reports = self._run_binaries(variants)
        elif self._inproc is not None:
            reports = [_report_of(self._inproc.evaluate, self.kernel.problem, v.source,
                                  reward=self.reward, preset=self.preset, name=self.kernel.name)
                       for v in variants]
        else:
            reports = self.backend.evaluate_batch([self.kernel.problem] * len(variants),
                                                  [v.source for v in variants])
        wall = time.perf_counter() - t0
        self.gpu_runs += len(variants)
        self.gpu_wall_s += wall
        return list(reports), wall

    def _run_binaries(self, variants):
        """Triton variants: cubin + plan jobs, through the backend's pool
        (or this process's Context when evaluating in-process)."""
        if self._inproc is not None:
            out = []
            for v in variants:
                with self._inproc.program_from_binary(v.binary, name=self.kernel.name) as prog:
                    out.append(_report_of(self._inproc.evaluate_program, self.kernel.problem,
                                          prog, v.plan, reward=self.reward, preset=self.preset))
            return out
        pool = getattr(self.backend, "pool", None)
        if pool is None:
            raise TypeError("Triton variants are a cubin and a plan: they need a local "
                            "kreward.Evaluator (a pool) or a Context as the backend, not "
                            f"{type(self.backend).__name__}")
        problem = self.backend.problem(self.kernel.problem)
        return pool.evaluate_batch([dict(problem=problem, binary=v.binary, plan=v.plan,
                                         reward=self.reward, preset=self.preset,
                                         name=self.kernel.name) for v in variants])

    def _result_of(self, v, report, wall):
        d = report.to_dict()
        reward = report.reward      # None: unscored (not_run, error): not the kernel's doing
        if hasattr(report, "close"):
            report.close()
        m = d.get("metrics", {})
        return Result(v.assignment, v.key, d.get("verdict"), reward,
                      speedup=m.get("speedup") if d.get("verdict") == "passed" else None,
                      time_us=m.get("time_us"), ran=True, wall_s=wall + v.check_s, report=d)

    def _refused(self, v):
        """The report a refused configuration gets: the verdict a GPU run
        would have given, the check's reason as message and feedback, scored
        by the preset."""
        with Report() as r:
            r.verdict = v.verdict
            r["compiled"] = 0 if v.verdict == "compile_error" else 1
            r.set_text("message", v.invalid)
            r.set_text("feedback", v.invalid)
            self.reward.score(r)
            return Result(v.assignment, v.key, v.verdict, r.reward, invalid=v.invalid,
                          wall_s=v.check_s, report=r.to_dict())

    # ---- observation ----
    def _obs(self):
        last = self.last
        idx = self.space.encode(last.assignment) if last else [0] * len(self.space.nvec)
        pos = [i / (n - 1) if n > 1 else 0.0 for i, n in zip(idx, self.space.nvec)]
        sp = last.speedup if last is not None and last.speedup else None
        best = self.best.speedup if self.best is not None and self.best.speedup else None
        budget = self.evaluations / self.max_evals if self.max_evals else 0.0
        return _spaces.vector(self._features + pos + [
            1.0 if last is not None else 0.0,
            1.0 if last is not None and last.passed else 0.0,
            math.log(sp) if sp else 0.0,
            math.log(best) if best else 0.0,
            budget])


def _report_of(call, *args, **kw):
    """An in-process evaluation's report, also when the environment failed
    (KrewardError carries it), as Evaluator.evaluate does."""
    try:
        return call(*args, **kw)
    except KrewardError as e:
        if e.report is None:
            raise
        return e.report


def _copy(r, cached, assignment=None):
    c = Result(assignment or r.assignment, r.key, r.verdict, r.reward, r.speedup, r.time_us,
               r.invalid, r.ran, 0.0, r.report)
    c.cached = cached
    return c
