"""Device-only Triton candidates with a plan, compiled per case.

Triton specialises a kernel on every launch: integer arguments by their
value (divisible by 16, equal to 1: then the argument disappears from the
kernel's parameters), pointers by their alignment, and the constexprs the
launch passes (a BLOCK that follows the row length). One compiled kernel for
every case of a problem is therefore wrong twice over: a specialisation for
the timing case's sizes may be invalid on the others (n % 16 == 0 assumed
where n is odd), and constexprs that depend on sizes cannot change. Here
every case gets its own specialisation, its own program and plan, verified
on that case alone; the timing case is then benchmarked and scored.

The candidate is a Python source (a ```python fence of a completion) with
@triton.jit kernels and one launch line, in the same form as a CUDA
candidate's (docs/problem-format.md), plus the kernel's meta-parameters:

    # kreward: launch add_kernel grid=(cdiv(N, BLOCK)) args=(a, b, c, N) BLOCK=min(1024, next_pow2(N)) num_warps=4

- args: the kernel's non-constexpr parameters in order: a tensor or scalar of
  the problem, or an integer expression over its dims;
- NAME=expr: a constexpr of the kernel, or a launch option (num_warps,
  num_stages), an integer expression over the dims (and earlier names);
- grid: expressions over the dims and the constexprs (an autotuned kernel's
  chosen config included).
An @triton.autotune kernel gets the autotuner's choice for each case (it runs
on the GPU, on tensors of the case's shapes); @triton.heuristics apply.

The kernel's module is compiled in a separate process
(triton_compile_worker.py) from a stripped copy: imports, jitted functions
and literal constants only; ModelNew classes and other module code never run.
One launch, one kernel per candidate: a plan's program is one CUBIN."""
import ast
import base64
import copy
import json
import os
import re
import subprocess
import sys
import tempfile

from .triton_expr import ExprError, evaluate, names_in

WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "triton_compile_worker.py")
OPTIONS = ("num_warps", "num_stages", "num_ctas", "maxnreg")
_LAUNCH = re.compile(r"^\s*#\s*kreward:\s*launch\s+(.*)$", re.M)
_FENCE = re.compile(r"```(?:python|py)[^\n]*\n(.*?)```", re.S)
_TRITON_DECORATORS = ("jit", "autotune", "heuristics")
_IMPORTS = ("triton", "math")


class TritonCandidateError(ValueError):
    """A Triton candidate that cannot be planned or compiled; the message says why."""


# ---- the source ----

def _decorator_name(dec):
    return ast.unparse(dec.func if isinstance(dec, ast.Call) else dec)


def _is_triton_def(node):
    return isinstance(node, ast.FunctionDef) and any(
        _decorator_name(d).split(".")[-1] in _TRITON_DECORATORS for d in node.decorator_list)


def triton_source(completion):
    """The code of the last ```python fence with a @triton.jit kernel and a
    `# kreward: launch` line, or None."""
    for block in reversed(_FENCE.findall(completion or "")):
        if _LAUNCH.search(block) and re.search(r"@(?:triton\.)?jit\b", block):
            return block
    return None


def kernel_params(source, kernel):
    """[(name, is_constexpr)] of a jitted function of the source."""
    for node in ast.parse(source).body:
        if isinstance(node, ast.FunctionDef) and node.name == kernel and _is_triton_def(node):
            return [(a.arg, a.annotation is not None and ast.unparse(a.annotation).endswith("constexpr"))
                    for a in node.args.args]
    raise TritonCandidateError(f"no @triton.jit kernel '{kernel}' in the source")


def kernel_module(source):
    """The source reduced to what compiling its kernels needs: imports of
    triton and math, jitted functions, and constants bound to literals
    (`BLOCK = 128`, `X: tl.constexpr = tl.constexpr(4)`). Everything else
    (classes, calls, other imports) is dropped, so nothing of ModelNew or the
    module's own code runs when the kernel is compiled."""
    keep = []
    for node in ast.parse(source).body:
        if isinstance(node, ast.Import) and all(a.name.split(".")[0] in _IMPORTS for a in node.names):
            keep.append(node)
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in _IMPORTS:
            keep.append(node)
        elif _is_triton_def(node):
            keep.append(node)
        elif isinstance(node, ast.Assign) and _literal(node.value) and all(
                isinstance(t, ast.Name) for t in node.targets):
            keep.append(node)  # a name bound to a literal; never `os.environ[...] = ...`
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and _literal(node.value):
            keep.append(node)
    return ast.unparse(ast.Module(body=keep, type_ignores=[])) + "\n"


def _literal(value):
    if value is None:
        return False
    if isinstance(value, ast.Call) and ast.unparse(value.func) in ("tl.constexpr", "triton.language.constexpr"):
        return len(value.args) == 1 and not value.keywords and _literal(value.args[0])
    try:
        ast.literal_eval(value)
        return True
    except ValueError:
        return False


# ---- the launch line ----

class Launch:
    """A parsed launch line: kernel, grid and args (expression texts),
    meta ([(name, expression)] in order: constexprs and options)."""

    def __init__(self, kernel, grid, args, meta):
        self.kernel, self.grid, self.args, self.meta = kernel, grid, args, meta

    def __repr__(self):
        return f"Launch({self.kernel!r}, grid={self.grid!r}, args={self.args!r}, meta={self.meta!r})"


def _split_top(text, sep=","):
    """text split at `sep` outside parentheses."""
    out, depth, cur = [], 0, ""
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == sep and depth == 0:
            out.append(cur.strip())
            cur = ""
        else:
            cur += ch
    if depth:
        raise TritonCandidateError(f"unbalanced parentheses in '{text}'")
    if cur.strip():
        out.append(cur.strip())
    return out


def _fields(text):
    """`key=value` fields separated by spaces (values may hold spaces inside
    parentheses)."""
    out, i = [], 0
    while i < len(text):
        while i < len(text) and text[i].isspace():
            i += 1
        m = re.compile(r"(\w+)\s*=\s*").match(text, i)
        if not m:
            if i < len(text):
                raise TritonCandidateError(f"expected key=value at '{text[i:][:40]}'")
            break
        j, depth = m.end(), 0
        while j < len(text) and (depth or not text[j].isspace()):
            depth += text[j] == "("
            depth -= text[j] == ")"
            j += 1
        out.append((m.group(1), text[m.end():j]))
        i = j
    return out


def _tuple(value):
    v = value.strip()
    if v.startswith("(") and v.endswith(")"):
        v = v[1:-1]
    return _split_top(v)


def parse_launch(source):
    """The Launch of a source's `# kreward: launch` line (exactly one)."""
    lines = _LAUNCH.findall(source)
    if len(lines) != 1:
        raise TritonCandidateError(f"{len(lines)} '# kreward: launch' lines: a Triton candidate has "
                                   "exactly one (one kernel, one CUBIN)")
    head, _, rest = lines[0].strip().partition(" ")
    if not re.fullmatch(r"\w+", head):
        raise TritonCandidateError(f"launch line: '{head}' is not a kernel name")
    grid, args, meta = None, None, []
    for key, value in _fields(rest):
        if key == "grid":
            grid = _tuple(value)
        elif key == "args":
            args = _tuple(value)
        else:
            meta.append((key, value))
    if not grid or not 1 <= len(grid) <= 3:
        raise TritonCandidateError("launch line: grid=(...) with 1 to 3 expressions is required")
    if args is None:
        raise TritonCandidateError("launch line: args=(...) is required")
    return Launch(head, grid, args, meta)


# ---- per case ----

def _cases(spec):
    return [{k: v for k, v in c.items() if k not in ("name", "timing")} for c in spec["cases"]]


def case_specs(source, spec, configs=None):
    """One compile spec per case of the problem `spec` (a dict): the case's
    dims, each kernel argument (tensor dtype and shape, scalar, integer),
    the constexprs and options evaluated for the case, and the grid's
    expressions. configs: {case index: autotune config index} to compile
    an autotuned kernel without a GPU."""
    launch = parse_launch(source)
    params = kernel_params(source, launch.kernel)
    runtime = [p for p, const in params if not const]
    constexpr = {p for p, const in params if const}
    if len(launch.args) != len(runtime):
        raise TritonCandidateError(f"launch line: {len(launch.args)} args for the {len(runtime)} "
                                   f"non-constexpr parameters of {launch.kernel} ({', '.join(runtime)})")
    for key, _ in launch.meta:
        if key not in constexpr and key not in OPTIONS:
            raise TritonCandidateError(f"launch line: '{key}' is neither a constexpr of {launch.kernel} "
                                       f"({', '.join(sorted(constexpr)) or 'none'}) nor a launch option "
                                       f"({', '.join(OPTIONS)})")
    tensors = {t["name"]: t for t in spec["tensors"]}
    scalars = {s["name"]: s for s in spec.get("scalars", [])}
    dims = spec.get("dims", [])
    out = []
    for c, case in enumerate(spec["cases"]):
        values = {d: case[d] for d in dims if d in case}
        try:
            args = []
            for param, a in zip(runtime, launch.args):
                if a in tensors:
                    t = tensors[a]
                    shape = [evaluate(s, values) if isinstance(s, str) else s for s in t["shape"]]
                    args.append({"param": param, "kind": "tensor", "dtype": t["dtype"], "shape": shape})
                elif a in scalars:
                    s = scalars[a]
                    kind = "float" if s.get("dtype", "f32").startswith(("f", "bf")) else "int"
                    args.append({"param": param, "kind": kind, "value": s["value"]})
                else:
                    args.append({"param": param, "kind": "int", "value": evaluate(a, values)})
            names, constexprs, options = dict(values), {}, {}
            for key, text in launch.meta:
                v = evaluate(text, names)
                names[key] = v
                (options if key in OPTIONS else constexprs)[key] = v
            for g in launch.grid:
                unknown = names_in(g) - set(names) - constexpr
                if unknown:
                    raise ExprError(f"'{g}': unknown name '{sorted(unknown)[0]}'")
        except ExprError as e:
            raise TritonCandidateError(f"case {case.get('name', c)}: {e}") from None
        out.append({"case": c, "name": case.get("name", str(c)), "dims": values, "args": args,
                    "constexprs": constexprs, "options": options, "grid": list(launch.grid),
                    "config": (configs or {}).get(c)})
    return launch, out


def compile_cases(source, cases, kernel, arch=None, timeout_s=600.0, python=None):
    """Compiles the kernel for every case spec in a worker process (arch:
    None for the GPU of this machine, or an sm number, e.g. 90, to compile
    without one). A list, per case, of the compiled kernel's description or
    {"error": ...}."""
    with tempfile.TemporaryDirectory(prefix="kr-triton-") as tmp:
        module = os.path.join(tmp, "kr_triton_candidate.py")
        with open(module, "w") as f:
            f.write(kernel_module(source))
        req, res = os.path.join(tmp, "request.json"), os.path.join(tmp, "result.json")
        with open(req, "w") as f:
            json.dump({"module_path": module, "kernel": kernel, "arch": arch, "cases": cases}, f)
        keep = ("PATH", "HOME", "LD_LIBRARY_PATH", "CUDA_HOME", "CUDA_VISIBLE_DEVICES", "TMPDIR",
                "TRITON_CACHE_DIR", "TRITON_PTXAS_PATH", "TRITON_DEFAULT_FP_FUSION")
        env = {k: v for k, v in os.environ.items() if k in keep}
        try:
            p = subprocess.run([python or sys.executable, WORKER, req, res], capture_output=True, text=True,
                               timeout=timeout_s, env=env, start_new_session=True, cwd=tmp)
        except subprocess.TimeoutExpired:
            raise TritonCandidateError(f"compiling the Triton kernel ran past {timeout_s:.0f} s") from None
        if p.returncode != 0 or not os.path.exists(res):
            tail = " | ".join((p.stderr or "").strip().splitlines()[-4:])
            raise TritonCandidateError(f"the Triton compile process failed (exit {p.returncode}): {tail}")
        with open(res) as f:
            return json.load(f)


def plan_for_case(compiled, case, args, num_params):
    """The launch plan (a dict) of one case's compiled kernel. args: the
    launch line's args; those Triton turned into constants for this case
    (an integer equal to 1) are dropped; the parameters the CUBIN has beyond
    the kernel's own (Triton's global and profile scratch pointers) get
    zeroed scratch buffers of the size its metadata asks per program."""
    kept = [a for a, spec in zip(args, case["args"]) if spec["param"] not in compiled["specialised"]]
    extra = num_params - len(kept)
    if extra < 0:
        raise TritonCandidateError(f"case {case['name']}: {len(kept)} arguments for a kernel with "
                                   f"{num_params} parameters")
    grid = [str(g) for g in compiled["grid"]]
    programs = "*".join(f"({g})" for g in grid)
    sizes = [compiled.get("global_scratch_size", 0), compiled.get("profile_scratch_size", 0)]
    scratch, names = [], []
    for i in range(extra):
        names.append(f"__triton_scratch{i}")
        per = sizes[i] if i < len(sizes) else 0
        scratch.append({"name": names[-1], "bytes": f"max(1, {per} * {programs})", "init": "zero"})
    return {"launches": [{"kernel": compiled["name"], "grid": grid, "block": [32 * compiled["num_warps"]],
                          "smem": compiled["shared"], "args": kept + names}],
            "scratch": scratch}


def one_case_spec(spec, case):
    """The problem with only its case `case` (timed)."""
    sub = copy.deepcopy(spec)
    c = dict(sub["cases"][case])
    c["timing"] = True
    sub["cases"] = [c]
    return sub


# ---- the evaluation ----

class TritonResult:
    """What evaluate_triton_cases found: .report (the Report that decides:
    the first case that failed, else the timing case's full evaluation),
    .cases ([(case name, verdict)] in the order run), .failed_case (a name
    or None), .compiled (per case: the compiled kernel's description)."""

    def __init__(self, report, cases, failed_case, compiled):
        self.report, self.cases, self.failed_case, self.compiled = report, cases, failed_case, compiled

    @property
    def verdict(self):
        return self.report.verdict


def evaluate_triton_cases(ctx, spec, source, golden=None, base_dir=None, reward=None, preset="fast",
                          seed=0, baseline=None, arch=None, compiled=None):
    """A device-only Triton candidate (source or completion) on the problem
    `spec` (a dict, or a problem.json path), each case with its own compiled
    kernel. golden: the problem's golden callback (golden problems), called
    with the original case numbering; base_dir: where a reference source
    lives (set from a path). compiled: the result of compile_cases (else it
    runs here). The non-timing cases are verified first; the timing case is
    verified, benchmarked against `baseline` and scored. A TritonResult."""
    if isinstance(spec, (str, os.PathLike)):
        base_dir = base_dir or os.path.dirname(os.path.abspath(spec))
        with open(spec) as f:
            spec = json.load(f)
    code = source if "```" not in source else triton_source(source)
    if code is None:
        raise TritonCandidateError("no ```python fence with a @triton.jit kernel and a "
                                   "'# kreward: launch' line")
    launch, cases = case_specs(code, spec, None)
    compiled = compiled or compile_cases(code, cases, launch.kernel, arch)
    timing = next((i for i, c in enumerate(spec["cases"]) if c.get("timing")), 0)
    order = [c for c in range(len(cases)) if c != timing] + [timing]
    seen = []
    report = None
    for c in order:
        sub = ctx.parse_problem(one_case_spec(spec, c), name=f"{spec.get('name', 'problem')}[{cases[c]['name']}]",
                                base_dir=base_dir)
        if golden is not None:
            sub.set_golden(_remapped(golden, c))
        if "error" in compiled[c]:
            raise TritonCandidateError(f"case {cases[c]['name']}: {compiled[c]['error']}")
        program = ctx.program_from_binary(base64.b64decode(compiled[c]["cubin"]),
                                          name=f"{compiled[c]['name']}.{cases[c]['name']}.cubin")
        try:
            nparams = len(program.info()["kernels"][0]["params"])
            plan = ctx.plan_from_json(plan_for_case(compiled[c], cases[c], launch.args, nparams),
                                      name=f"{launch.kernel} (triton, case {cases[c]['name']})")
            try:
                report = ctx.evaluate_program(sub, program, plan, reward, preset, seed,
                                              baseline if c == timing else None, verify_only=c != timing)
            finally:
                plan.close()
        finally:
            program.close()
        seen.append((cases[c]["name"], report.verdict))
        if report.verdict not in ("passed", "not_run"):  # not_run: no GPU here, every case checked as far as it goes
            return TritonResult(report, seen, cases[c]["name"], compiled)
    return TritonResult(report, seen, None, compiled)


def _remapped(golden, case):
    def callback(req):
        req.case = case  # the callback knows the problem by its own case numbers
        return golden(req)
    return callback
