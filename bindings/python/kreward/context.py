"""The Context: compile, problems, plans, verify, benchmark, evaluate."""
import ctypes
import json
import os

from . import _lib
from ._lib import fn
from .core import Plan, Problem, Program, Report, _Handle, _is_file, _string_array
from .errors import KrewardError, check
from .reward import Reward

PRESETS = {"fast": 1, "precise": 2}
NO_DEVICE, NO_TRACE = 0x1, 0x2


class Context(_Handle):
    """Loaded driver libraries, device, compile cache, last error. Works on
    machines without a GPU (compile and score). Use one per thread."""
    _free = staticmethod(fn.context_free)

    def __init__(self, device=0, cache_dir=None, cuda_home=None, default_arch=None,
                 no_device=False, no_trace=False, cache_memory_bytes=256 << 20):
        o = _lib.ContextOptions()
        check(fn.context_options_init(ctypes.byref(o), 1))
        o.device = device
        o.cache_dir = _lib.encode(cache_dir or os.environ.get("KREWARD_CACHE_DIR"))
        o.cuda_home = _lib.encode(cuda_home)
        o.default_arch = _lib.encode(default_arch)
        o.cache_memory_bytes = cache_memory_bytes
        o.flags = (NO_DEVICE if no_device else 0) | (NO_TRACE if no_trace else 0)
        out = ctypes.c_void_p()
        check(fn.context_new(ctypes.byref(out), ctypes.byref(o)))
        super().__init__(out)

    @property
    def has_device(self):
        return bool(fn.context_has_device(self.handle))

    @property
    def arch(self):
        return _lib.text(fn.context_arch(self.handle))

    def info(self):
        out = ctypes.c_void_p()
        check(fn.context_info_json(self.handle, ctypes.byref(out)), self.handle)
        return json.loads(_lib.take_string(out))

    # ---- compile ----
    def compile(self, source, name="candidate.cu", arch=None, defines=(), include_dirs=(),
                name_expressions=(), std=None, fast_math=False, line_info=False,
                time_limit_s=0.0, extra_options=(), cache=True):
        o = _lib.CompileOptions()
        check(fn.compile_options_init(ctypes.byref(o), 1))
        keep = []
        o.name, o.arch, o.std = _lib.encode(name), _lib.encode(arch), _lib.encode(std)
        for field, values in (("defines", defines), ("include_dirs", include_dirs),
                              ("name_expressions", name_expressions),
                              ("extra_options", extra_options)):
            arr, n = _string_array(values)
            keep.append(arr)
            setattr(o, field, ctypes.cast(arr, _lib.PP(ctypes.c_char_p)))
            setattr(o, "num_" + field, n)
        o.fast_math, o.line_info, o.time_limit_s = int(fast_math), int(line_info), time_limit_s
        o.flags = 0 if cache else 1
        src = _lib.encode(source)
        out = ctypes.c_void_p()
        check(fn.compile(self.handle, ctypes.byref(out), src, len(src), ctypes.byref(o)), self.handle)
        return Program(out, self)

    def program_from_binary(self, data, name="binary"):
        out = ctypes.c_void_p()
        buf = ctypes.create_string_buffer(bytes(data), len(data))
        check(fn.program_from_binary(self.handle, ctypes.byref(out), buf, len(data),
                                     _lib.encode(name)), self.handle)
        return Program(out, self)

    # ---- problems and plans ----
    def load_problem(self, path):
        out = ctypes.c_void_p()
        check(fn.problem_load(self.handle, ctypes.byref(out), _lib.encode(path)), self.handle)
        return Problem(out, self)

    def parse_problem(self, spec, name="problem.json", base_dir=None):
        if isinstance(spec, dict):
            spec = json.dumps(spec)
        text = _lib.encode(spec)
        out = ctypes.c_void_p()
        check(fn.problem_parse(self.handle, ctypes.byref(out), text, len(text), _lib.encode(name),
                               _lib.encode(base_dir)), self.handle)
        return Problem(out, self)

    def problem(self, spec):
        """A Problem from a path, JSON text or dict."""
        return self.load_problem(spec) if _is_file(spec) else self.parse_problem(spec)

    def plan_from_source(self, source, name="candidate.cu"):
        src = _lib.encode(source)
        out = ctypes.c_void_p()
        check(fn.plan_from_source(self.handle, ctypes.byref(out), src, len(src), _lib.encode(name)),
              self.handle)
        return Plan(out, self)

    def plan_from_json(self, plan, name="plan.json"):
        text = _lib.encode(json.dumps(plan) if isinstance(plan, dict) else plan)
        out = ctypes.c_void_p()
        check(fn.plan_parse_json(self.handle, ctypes.byref(out), text, len(text), _lib.encode(name)),
              self.handle)
        return Plan(out, self)

    def check_plan(self, plan, problem, program):
        check(fn.plan_check(self.handle, plan.handle, problem.handle, program.handle), self.handle)

    # ---- rewards ----
    def reward(self, config=None):
        return Reward(self, config)

    # ---- verify, benchmark, evaluate ----
    def _verify_options(self, seed=0, seeds_per_case=0, timeout_s=0.0, single_run=False):
        o = _lib.VerifyOptions()
        check(fn.verify_options_init(ctypes.byref(o), 1))
        o.seed, o.seeds_per_case, o.timeout_s = seed, seeds_per_case, timeout_s
        o.flags = 1 if single_run else 0
        return o

    def _bench_options(self, preset="fast", seed=0, **kw):
        o = _lib.BenchOptions()
        check(fn.bench_options_init(ctypes.byref(o), 1, PRESETS[preset]))
        o.seed = seed
        for k, v in kw.items():
            setattr(o, k, v)
        return o

    def verify(self, problem, program, plan, **opts):
        o = self._verify_options(**opts)
        out = ctypes.c_void_p()
        rc = fn.verify(self.handle, problem.handle, program.handle, plan.handle, ctypes.byref(o),
                       ctypes.byref(out))
        report = Report(out, self)
        _raise_golden(problem)
        if rc != 0:
            raise KrewardError(rc, report.message or _lib.text(fn.context_errmsg(self.handle)))
        return report

    def benchmark(self, problem, program, plan, preset="fast", baseline=None, report=None, **opts):
        """Times the candidate against a baseline: None (the problem's
        reference), a (program, plan) pair, or a kreward.Baseline."""
        o = self._bench_options(preset, **opts)
        base, keep = _baseline_struct(baseline)
        out = ctypes.c_void_p(report.handle.value if report else None)
        rc = fn.benchmark(self.handle, problem.handle, program.handle, plan.handle,
                          ctypes.byref(o), ctypes.byref(base) if base else None, ctypes.byref(out))
        if report is None:
            report = Report(out, self)
        _raise_callback(keep)
        if rc != 0:
            raise KrewardError(rc, _lib.text(fn.context_errmsg(self.handle)))
        return report

    def evaluate_program(self, problem, program, plan, reward=None, preset="fast", seed=0,
                         baseline=None):
        """verify, benchmark (when correct) and score a program built
        elsewhere (e.g. from Triton), as evaluate() does for source."""
        return _merge_evaluate_program(self, problem, program, plan, reward, preset, seed, baseline)

    def evaluate(self, problem, source, reward=None, preset="fast", seed=0, name="candidate.cu",
                 verify_only=False, baseline=None, compile_options=None):
        """The environment step: compile, plan, verify, benchmark, score.
        Always returns a Report; the verdict says what happened ('not_run'
        without a GPU). reward: a Reward, a preset name, a JSON config or None."""
        if not isinstance(problem, Problem):
            problem = self.problem(problem)
        own_reward = None
        if reward is not None and not isinstance(reward, Reward):
            own_reward = reward = Reward(self, reward)
        vo = self._verify_options(seed=seed)
        bo = self._bench_options(preset, seed=seed)
        base, keep = _baseline_struct(baseline)
        o = _lib.EvaluateOptions()
        check(fn.evaluate_options_init(ctypes.byref(o), 1))
        o.flags = 1 if verify_only else 0
        o.verify = ctypes.pointer(vo)
        o.bench = ctypes.pointer(bo)
        if base:
            o.baseline = ctypes.pointer(base)
        if reward is not None:
            o.reward = reward.handle
        o.name = _lib.encode(name)
        src = _lib.encode(source)
        out = ctypes.c_void_p()
        reward_error = None
        if reward is not None:
            reward._py_error = None
        fn.evaluate(self.handle, problem.handle, src, len(src), ctypes.byref(o), ctypes.byref(out))
        report = Report(out, self)
        if reward is not None:
            reward_error = reward._py_error
        if own_reward is not None:
            own_reward.close()
        _raise_golden(problem)
        _raise_callback(keep)
        if reward_error is not None:
            raise reward_error
        return report


def _merge_evaluate_program(ctx, problem, program, plan, reward, preset, seed, baseline):
    report = ctx.verify(problem, program, plan, seed=seed)
    if report.passed:
        ctx.benchmark(problem, program, plan, preset=preset, baseline=baseline, report=report,
                      seed=seed)
    if reward is not None:
        r = reward if isinstance(reward, Reward) else Reward(ctx, reward)
        try:
            r.score(report)
        finally:
            if r is not reward:
                r.close()
    return report


def _raise_golden(problem):
    err = getattr(problem, "_golden_error", None)
    if err is not None:
        problem._golden_error = None
        raise err


def _raise_callback(keep):
    for k in keep:
        err = getattr(k, "error", None)
        if err is not None:
            k.error = None
            raise err


class Baseline:
    """A baseline for benchmark/evaluate: a callable enqueuing work on a
    stream, fn(stream: int, pointers: list[int]) (e.g. PyTorch through
    kreward.torch_interop), or a (program, plan) pair."""

    def __init__(self, fn=None, program=None, plan=None, name=None):
        self.fn, self.program, self.plan, self.name = fn, program, plan, name
        self.error = None


def _baseline_struct(baseline):
    if baseline is None:
        return None, []
    if isinstance(baseline, tuple):
        baseline = Baseline(program=baseline[0], plan=baseline[1])
    b = _lib.Baseline()
    b.version = 1
    b.name = _lib.encode(baseline.name)
    keep = [baseline]
    if baseline.fn is not None:
        def trampoline(user, stream, ptrs, n, errbuf, errsize):
            try:
                baseline.fn(stream or 0, [ptrs[i] for i in range(n)])
                return 0
            except BaseException as e:
                baseline.error = e
                _lib.write_error(errbuf, errsize, e)
                return 1
        cb = _lib.BASELINE_FN(trampoline)
        keep.append(cb)
        b.kind, b.fn = 3, cb
    else:
        b.kind, b.program, b.plan = 2, baseline.program.handle, baseline.plan.handle
    keep.append(b)
    return b, keep
