"""Kernels with knobs, and their variants: one knob assignment made into
something a backend can evaluate, checked first without a GPU.

CudaKernel: a CUDA C++ source whose knobs are preprocessor names and may
appear in its `// kreward: launch` lines (grid, block, smem, args). A
variant is the source with a `#define KNOB VALUE` line per knob on top
(then `#line 1`, so compile errors keep the source's line numbers) and the
knobs in the plan lines replaced by their values. A #define at the top is
what -D does for the preprocessor; carrying it in the text makes each
variant one self-contained source that every backend takes (a local pool,
`kreward serve`, Ray), and the compile cache, which keys on the source
text, keys each variant by its content.

TritonKernel: a @triton.jit function whose knobs are constexpr
meta-parameters, plus `num_warps` and `num_stages` (knobs of those names go
to Triton's compiler). A variant is the cubin Triton builds and the plan
kreward.triton_interop makes for it."""
import hashlib
import json
import re
import time

from ..errors import KrewardError
from ..constants import Status
from . import cubin, expr, limits
from .space import KnobSpace

_PLAN_LINE = re.compile(r"^\s*//\s*kreward:", re.M)
TRITON_COMPILER_KNOBS = ("num_warps", "num_stages")


class Variant:
    """One assignment made concrete. key: the content hash (sha256 of the
    source, or of the cubin and plan); invalid: why it cannot run (None if
    it passed the checks) and verdict: the verdict a GPU run would have
    given it (compile_error, invalid_plan, launch_error); resources:
    {kernel: {registers, shared_static, shared_reserved}}."""
    __slots__ = ("assignment", "key", "source", "binary", "plan", "invalid", "verdict",
                 "resources", "check_s", "by_constraint")

    def __init__(self, assignment):
        self.assignment = dict(assignment)
        self.key = self.source = self.binary = self.plan = None
        self.invalid = self.verdict = None
        self.resources = {}
        self.check_s = 0.0
        self.by_constraint = False  # refused by a declared constraint: nothing was compiled

    def refuse(self, verdict, why, by_constraint=False):
        self.verdict, self.invalid, self.by_constraint = verdict, why, by_constraint
        return self


def _problem_info(ctx, problem_spec):
    with ctx.problem(problem_spec) as p:
        return p.info()


class _Kernel:
    """What CUDA and Triton kernels share: the space, the problem's cases
    (dims for constraints and plan expressions) and the checks."""

    def __init__(self, problem, knobs, constraints, name):
        self.problem = problem
        self.space = knobs if isinstance(knobs, KnobSpace) else KnobSpace(knobs, constraints)
        if isinstance(knobs, KnobSpace) and constraints:
            self.space = KnobSpace(knobs.knobs, list(knobs.constraints) + list(constraints))
        self.name = name
        self._info = None

    def problem_info(self, ctx):
        if self._info is None:
            self._info = _problem_info(ctx, self.problem)
            taken = set(self._info["dims"]) | {t["name"] for t in self._info["tensors"]} | {
                s["name"] for s in self._info.get("scalars", [])}
            clash = taken & set(self.space.names)
            if clash:
                raise ValueError(f"knobs {sorted(clash)} are also names of the problem's dims, "
                                 "tensors or scalars: rename them")
        return self._info

    def cases(self, ctx):
        return [c["dims"] for c in self.problem_info(ctx)["cases"]]

    def _check_resources(self, v, ctx, plan_json, image, arch):
        """Threads, registers x threads and shared memory of every launch
        in every case, against the arch's limits (kreward.tune.limits)."""
        try:
            v.resources = cubin.kernel_resources(image)
        except cubin.CubinError:
            v.resources = {}  # PTX or an unknown layout: the plan check stands alone
        numeric = {k: x for k, x in v.assignment.items() if not isinstance(x, str)}
        for launch in plan_json["launches"]:
            res = v.resources.get(launch["kernel"], {})
            for dims in self.cases(ctx):
                env = {**dims, **numeric}
                try:
                    threads = 1
                    for b in launch["block"]:
                        threads *= expr.evaluate(str(b), env)
                    smem = expr.evaluate(str(launch.get("smem", 0)), env)
                except expr.ExprError as e:
                    return v.refuse("invalid_plan", f"launch {launch['kernel']}: {e}")
                bad = limits.check_launch(arch, threads, res.get("registers"),
                                          res.get("shared_static", 0), smem)
                if bad:
                    return v.refuse(bad[0], f"launch {launch['kernel']}, case {dims}: {bad[1]}")
        return v


class CudaKernel(_Kernel):
    """source: CUDA C++ with `// kreward: launch` lines that may use the
    knobs; knobs: {name: [values]} or a KnobSpace; constraints: see
    KnobSpace; problem: a problem path, JSON text or dict."""

    def __init__(self, source, knobs, problem, constraints=(), name="candidate.cu"):
        super().__init__(problem, knobs, constraints, name)
        self.template = source
        if not _PLAN_LINE.search(source):
            raise ValueError("the source has no `// kreward: launch` line")
        for k in self.space.names:
            d = re.search(rf"^\s*#\s*define\s+{k}\b", source, re.M)
            guard = re.search(rf"^\s*#\s*(ifndef\s+{k}\b|if\s+!\s*defined\s*\(?\s*{k}\b)", source,
                              re.M)
            if d and (not guard or guard.start() > d.start()):
                raise ValueError(f"the source #defines knob {k} itself, which would override the "
                                 f"tuned value: guard its default with #ifndef {k}")

    def render(self, assignment):
        """The variant's source for an assignment."""
        head = "".join(f"#define {k} {_token(v)}\n" for k, v in assignment.items())

        def subst(m):
            line = m.group(0)
            for k, v in assignment.items():
                if re.search(rf"\b{k}\b", line):
                    if isinstance(v, str):
                        raise ValueError(f"knob {k}={v!r} appears in a plan line: plan "
                                         "expressions take integers only")
                    line = re.sub(rf"\b{k}\b", str(int(v)), line)
            return line
        body = re.sub(r"^\s*//\s*kreward:.*$", subst, self.template, flags=re.M)
        return f'{head}#line 1 "{self.name}"\n{body}'

    def variant(self, assignment, ctx):
        """A checked Variant: constraints, an NVRTC compile (a cache hit
        for the pool's workers later when they share the cache), the
        library's plan check, then registers and shared memory."""
        t0 = time.perf_counter()
        v = Variant(assignment)
        try:
            v.source = self.render(assignment)
            v.key = hashlib.sha256(v.source.encode()).hexdigest()
            why = self.space.violated(assignment, self.cases(ctx))
            if why:
                return v.refuse("invalid_plan", why, by_constraint=True)
            self._check_source(v, ctx)
        finally:
            v.check_s = time.perf_counter() - t0
        return v

    def _check_source(self, v, ctx):
        try:
            program = ctx.compile(v.source, name=self.name)
        except KrewardError as e:
            if e.code == Status.ECOMPILE:
                return v.refuse("compile_error", _first_error(e))
            raise
        with program:
            try:
                with ctx.plan_from_source(v.source, name=self.name) as plan, \
                        ctx.problem(self.problem) as problem:
                    ctx.check_plan(plan, problem, program)
                    plan_json = plan.info()
            except KrewardError as e:
                if e.code in (Status.EPLAN, Status.EPARSE):
                    return v.refuse("invalid_plan", e.message)
                raise
            image, _kind = program.binary()
            arch = program.arch
        return self._check_resources(v, ctx, plan_json, image, arch)


class TritonKernel(_Kernel):
    """fn: a @triton.jit function; knobs: its constexpr meta-parameters
    and, optionally, num_warps and num_stages; grid: 1 to 3 expressions
    over dims and knobs (the number of programs, e.g. "cdiv(N, BLOCK)");
    args: the kernel's non-constexpr arguments as plan arguments (tensor
    names, dims, scalars); example_args: what Triton's warmup needs to
    specialise the signature, e.g. torch dtypes for pointers and an int
    that is neither 1 nor a multiple of 16 for sizes (so the cubin is not
    specialised to one case's shape). Compiling needs Triton and a GPU
    driver in this process (Triton asks it for the target)."""

    def __init__(self, fn, knobs, problem, grid, args, example_args, constraints=(),
                 name=None):
        super().__init__(problem, knobs, constraints, name or getattr(fn, "__name__", "triton"))
        if not hasattr(fn, "warmup"):
            raise TypeError("fn is a @triton.jit function (a JITFunction with warmup)")
        self.fn = fn
        self.grid = [str(g) for g in (grid if isinstance(grid, (list, tuple)) else [grid])]
        self.args = list(args)
        self.example_args = list(example_args)

    def compile(self, assignment):
        meta = {k: v for k, v in assignment.items() if k not in TRITON_COMPILER_KNOBS}
        opts = {k: assignment[k] for k in TRITON_COMPILER_KNOBS if k in assignment}
        return self.fn.warmup(*self.example_args, grid=(1,), **meta, **opts)

    def variant(self, assignment, ctx):
        from ..triton_interop import plan_for_triton, program_from_triton
        t0 = time.perf_counter()
        v = Variant(assignment)
        try:
            why = self.space.violated(assignment, self.cases(ctx))
            if why:
                v.key = hashlib.sha256(repr(sorted(assignment.items())).encode()).hexdigest()
                return v.refuse("invalid_plan", why, by_constraint=True)
            try:
                compiled = self.compile(assignment)
            except Exception as e:  # noqa: BLE001 -- Triton's compile errors have no common base
                v.key = hashlib.sha256(repr(sorted(assignment.items())).encode()).hexdigest()
                return v.refuse("compile_error", f"{type(e).__name__}: {str(e)[:400]}")
            numeric = {k: x for k, x in assignment.items() if not isinstance(x, str)}
            grid = [_substitute(g, numeric) for g in self.grid]
            with program_from_triton(ctx, compiled) as program:
                v.binary, _kind = program.binary()
                v.plan = plan_for_triton(ctx, compiled, program, grid, self.args)
                plan_json = v.plan.info()
                v.key = hashlib.sha256(v.binary + json.dumps(plan_json, sort_keys=True).encode()
                                       ).hexdigest()
                try:
                    with ctx.problem(self.problem) as problem:
                        ctx.check_plan(v.plan, problem, program)
                except KrewardError as e:
                    if e.code in (Status.EPLAN, Status.EPARSE):
                        return v.refuse("invalid_plan", e.message)
                    raise
                return self._check_resources(v, ctx, plan_json, v.binary, program.arch)
        finally:
            v.check_s = time.perf_counter() - t0


def _substitute(text, values):
    for k, v in values.items():
        text = re.sub(rf"\b{k}\b", str(int(v)), text)
    return text


def _token(v):
    if isinstance(v, bool):
        return "1" if v else "0"
    return str(v)


def _first_error(e):
    log = e.detail or ""
    for line in log.splitlines():
        if "error" in line:
            return line.strip()
    return e.message
