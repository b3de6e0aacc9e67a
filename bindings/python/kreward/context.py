"""The Context: compile, problems, plans, verify, benchmark, evaluate."""
import ctypes
import json
import os
import weakref

from . import _lib, constants
from ._lib import fn
from .core import Plan, Problem, Program, Report, _ContextRef, _Handle, _is_file, _string_array
from .reward import Reward

PRESETS = constants.BENCH_PRESETS
NO_DEVICE, NO_TRACE = constants.CONTEXT_NO_DEVICE, constants.CONTEXT_NO_TRACE


class Context(_Handle):
    """Loaded driver libraries, device, compile cache, last error. Works on
    machines without a GPU (compile and score). Use one per thread.

    close() (or the end of a with-block, or garbage collection) ends the
    Context for new calls. Programs, rewards and problems made from it count
    on it: the C context is freed once the last of them is closed or
    collected too, so they stay usable after the Context is closed, and C
    always sees them freed before their context."""

    def __init__(self, device=0, cache_dir=None, cuda_home=None, default_arch=None,
                 no_device=False, no_trace=False, cache_memory_bytes=256 << 20):
        o = _lib.ContextOptions()
        fn.context_options_init(ctypes.byref(o), _lib.CONTEXT_OPTIONS_VERSION)
        o.device = device
        o.cache_dir = _lib.encode(cache_dir or os.environ.get("KREWARD_CACHE_DIR"))
        o.cuda_home = _lib.encode(cuda_home)
        o.default_arch = _lib.encode(default_arch)
        o.cache_memory_bytes = cache_memory_bytes
        o.flags = (NO_DEVICE if no_device else 0) | (NO_TRACE if no_trace else 0)
        out = ctypes.c_void_p()
        fn.context_new(ctypes.byref(out), ctypes.byref(o))
        # The Context's own count on the C context; every child holds one more.
        self._ref = _ContextRef(out.value)
        super().__init__(out, owned=False)
        self._finalizer = weakref.finalize(self, self._ref.release)
        self._finalizer.atexit = False

    def _error_context(self):
        return self._ref.ptr

    @property
    def has_device(self):
        return bool(fn.context_has_device(self.handle))

    @property
    def arch(self):
        return _lib.text(fn.context_arch(self.handle))

    def info(self):
        out = ctypes.c_void_p()
        fn.context_info_json(ctypes.byref(out), self.handle)
        return json.loads(_lib.take_string(out))

    # ---- compile ----
    def compile(self, source, name="candidate.cu", **options):
        """A Program from CUDA C++ source. options: arch, defines,
        include_dirs, name_expressions, std, fast_math, line_info,
        time_limit_s, extra_options, max_log_bytes, cache (see
        compile_options). A compile error raises KrewardError (KR_ECOMPILE)
        with the NVRTC log as its detail."""
        o, keep = compile_options(name=name, **options)
        src = _lib.encode(source)
        out = ctypes.c_void_p()
        fn.compile(ctypes.byref(out), self.handle, src, len(src), ctypes.byref(o))
        return Program(out, self._ref)

    def program_from_binary(self, data, name="binary"):
        """A Program from a CUBIN or PTX image built elsewhere (e.g. Triton)."""
        out = ctypes.c_void_p()
        buf = ctypes.create_string_buffer(bytes(data), len(data))
        fn.program_from_binary(ctypes.byref(out), self.handle, buf, len(data), _lib.encode(name))
        return Program(out, self._ref)

    # ---- problems and plans ----
    def load_problem(self, path):
        out = ctypes.c_void_p()
        fn.problem_load(ctypes.byref(out), self.handle, _lib.encode(path))
        return Problem(out, self._ref)

    def parse_problem(self, spec, name="problem.json", base_dir=None):
        if isinstance(spec, dict):
            spec = json.dumps(spec)
        text = _lib.encode(spec)
        out = ctypes.c_void_p()
        fn.problem_parse(ctypes.byref(out), self.handle, text, len(text), _lib.encode(name),
                         _lib.encode(base_dir))
        return Problem(out, self._ref)

    def problem(self, spec):
        """A Problem from a path, JSON text or dict. A string that is neither
        JSON nor an existing file raises FileNotFoundError."""
        spec = os.fspath(spec) if isinstance(spec, os.PathLike) else spec
        return self.load_problem(spec) if _is_file(spec, "problem file") else self.parse_problem(spec)

    def plan_from_source(self, source, name="candidate.cu"):
        src = _lib.encode(source)
        out = ctypes.c_void_p()
        fn.plan_from_source(ctypes.byref(out), self.handle, src, len(src), _lib.encode(name))
        return Plan(out)

    def plan_from_json(self, plan, name="plan.json"):
        text = _lib.encode(json.dumps(plan) if isinstance(plan, dict) else plan)
        out = ctypes.c_void_p()
        fn.plan_parse_json(ctypes.byref(out), self.handle, text, len(text), _lib.encode(name))
        return Plan(out)

    def check_plan(self, plan, problem, program):
        fn.plan_check(self.handle, plan.handle, problem.handle, program.handle)

    # ---- rewards ----
    def reward(self, config=None):
        return Reward(self, config)

    # ---- verify, benchmark, evaluate ----
    # Each writes into one Report. The candidate's outcomes are verdicts
    # (not_run without a GPU included: see _lib._judged); a failed
    # environment raises KrewardError with the report as .report. An
    # exception in a Python callback (golden, baseline, reward term) is
    # re-raised once the call returns.
    def verify(self, problem, program, plan, report=None, **opts):
        """Verifies the candidate: seed, seeds_per_case, timeout_s, single_run."""
        o = _verify_options(**opts)
        report = report if report is not None else Report()
        with _lib.reraise_callbacks(problem._golden_slot):
            fn.verify(report.handle, self.handle, problem.handle, program.handle, plan.handle,
                      ctypes.byref(o))
        return report

    def benchmark(self, problem, program, plan, preset="fast", baseline=None, report=None, **opts):
        """Times the candidate against a baseline: None (the problem's
        reference), a (program, plan) pair, or a kreward.Baseline. opts: the
        fields of kr_bench_options (seed, max_time_s, case_index, ...)."""
        o = _bench_options(preset, **opts)
        base, keep = _baseline_struct(baseline)
        report = report if report is not None else Report()
        with _lib.reraise_callbacks(problem._golden_slot, *keep.slots):
            fn.benchmark(report.handle, self.handle, problem.handle, program.handle, plan.handle,
                         ctypes.byref(o), ctypes.byref(base) if base else None)
        return report

    def evaluate_program(self, problem, program, plan, reward=None, preset="fast", seed=0,
                         baseline=None, verify_only=False, name=None):
        """The environment step for a program built elsewhere (e.g. from
        Triton) and its plan (kr_evaluate_program): check the plan, verify,
        benchmark, score, with the program's compile metrics in the report."""
        if not isinstance(problem, Problem):
            problem = self.problem(problem)
        with _EvaluateOptions(self, reward, preset, seed, baseline, verify_only, name,
                              None) as ev:
            with _lib.reraise_callbacks(problem._golden_slot, *ev.slots):
                fn.evaluate_program(ev.report.handle, self.handle, problem.handle,
                                    program.handle, plan.handle, ctypes.byref(ev.o))
            return ev.report

    def evaluate(self, problem, source, reward=None, preset="fast", seed=0, name="candidate.cu",
                 verify_only=False, baseline=None, compile_options=None):
        """The environment step (kr_evaluate): compile, plan, verify,
        benchmark, score. Returns a Report for every outcome of the
        candidate; its verdict says what happened ('not_run' without a GPU).
        When the environment fails it raises KrewardError, with the report
        as .report (Evaluator.evaluate returns that report instead).
        reward: a Reward, a preset name, a JSON config or None;
        compile_options: a dict of Context.compile's options."""
        if not isinstance(problem, Problem):
            problem = self.problem(problem)
        with _EvaluateOptions(self, reward, preset, seed, baseline, verify_only, name,
                              compile_options) as ev:
            src = _lib.encode(source)
            with _lib.reraise_callbacks(problem._golden_slot, *ev.slots):
                fn.evaluate(ev.report.handle, self.handle, problem.handle, src, len(src),
                            ctypes.byref(ev.o))
            return ev.report


# ---- options ----

def compile_options(name=None, arch=None, defines=(), include_dirs=(), name_expressions=(),
                    std=None, fast_math=False, line_info=False, time_limit_s=0.0,
                    extra_options=(), max_log_bytes=0, cache=True):
    """A kr_compile_options and what it points to (keep both alive)."""
    o = _lib.CompileOptions()
    fn.compile_options_init(ctypes.byref(o), _lib.COMPILE_OPTIONS_VERSION)
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
    o.max_log_bytes = max_log_bytes
    o.flags = 0 if cache else constants.COMPILE_NO_CACHE
    return o, keep


def _verify_options(seed=0, seeds_per_case=0, timeout_s=0.0, single_run=False):
    o = _lib.VerifyOptions()
    fn.verify_options_init(ctypes.byref(o), _lib.VERIFY_OPTIONS_VERSION)
    o.seed, o.seeds_per_case, o.timeout_s = seed, seeds_per_case, timeout_s
    o.flags = constants.VERIFY_SINGLE_RUN if single_run else 0
    return o


def _bench_options(preset="fast", seed=0, **kw):
    o = _lib.BenchOptions()
    fn.bench_options_init(ctypes.byref(o), _lib.BENCH_OPTIONS_VERSION, PRESETS[preset])
    o.seed = seed
    for k, v in kw.items():
        if k not in dict(_lib.BenchOptions._fields_) or k == "version":
            raise TypeError(f"unknown benchmark option {k!r}")
        setattr(o, k, v)
    return o


class _EvaluateOptions:
    """kr_evaluate_options for evaluate and evaluate_program, with the
    report they write and everything the options point to; a reward given
    by name or config is made here and freed on exit."""

    def __init__(self, ctx, reward, preset, seed, baseline, verify_only, name, compile_opts):
        self.own_reward = None
        if reward is not None and not isinstance(reward, Reward):
            self.own_reward = reward = Reward(ctx, reward)
        self.verify = _verify_options(seed=seed)
        self.bench = _bench_options(preset, seed=seed)
        self.base, self.keep = _baseline_struct(baseline)
        o = self.o = _lib.EvaluateOptions()
        fn.evaluate_options_init(ctypes.byref(o), _lib.EVALUATE_OPTIONS_VERSION)
        o.flags = constants.EVALUATE_NO_BENCH if verify_only else 0
        o.verify, o.bench = ctypes.pointer(self.verify), ctypes.pointer(self.bench)
        if compile_opts:
            self.compile, self.compile_keep = compile_options(**compile_opts)
            o.compile = ctypes.pointer(self.compile)
        if self.base is not None:
            o.baseline = ctypes.pointer(self.base)
        self.slots = list(self.keep.slots)
        if reward is not None:
            o.reward = reward.handle
            self.slots.append(reward._errors)
        o.name = _lib.encode(name)
        self.report = Report()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self.own_reward is not None:
            self.own_reward.close()


# ---- baselines ----

class Baseline:
    """A baseline for benchmark/evaluate: a callable enqueuing work on a
    stream, fn(stream: int, pointers: list[int]) (e.g. PyTorch through
    kreward.torch_interop), or a (program, plan) pair."""

    def __init__(self, fn=None, program=None, plan=None, name=None):
        self.fn, self.program, self.plan, self.name = fn, program, plan, name


class _Kept:
    """What a kr_baseline points to, alive for the call; slots: where a
    Python baseline's exception waits."""

    def __init__(self, *objects, slots=()):
        self.objects, self.slots = objects, slots


def _baseline_struct(baseline):
    if baseline is None:
        return None, _Kept()
    if isinstance(baseline, tuple):
        baseline = Baseline(program=baseline[0], plan=baseline[1])
    b = _lib.Baseline()
    fn.baseline_init(ctypes.byref(b), _lib.BASELINE_VERSION)
    b.name = _lib.encode(baseline.name)
    if baseline.fn is not None:
        user_fn = baseline.fn

        def enqueue(user, stream, ptrs, n, errbuf, errsize):
            user_fn(stream or 0, [ptrs[i] for i in range(n)])

        slot = _lib.ErrorSlot()
        cb = _lib.c_callback(_lib.BASELINE_FN, enqueue, slot,
                             lambda user, stream, ptrs, n, errbuf, errsize: (errbuf, errsize))
        b.kind, b.fn = constants.BASELINE_CALLBACK, cb
        return b, _Kept(baseline, cb, slots=(slot,))
    b.kind = constants.BASELINE_PROGRAM
    b.program, b.plan = baseline.program.handle, baseline.plan.handle
    return b, _Kept(baseline)
