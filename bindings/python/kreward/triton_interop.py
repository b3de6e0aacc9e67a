"""Triton interop: a compiled @triton.jit kernel becomes a program and a
launch plan, evaluated like any CUDA candidate.

Triton's launcher uses block = 32 * num_warps, dynamic shared memory =
metadata.shared, and passes two extra pointers after the kernel's own
arguments (global and profile scratch); the plan does the same, with
scratch buffers for them.

One compiled kernel serves every case here: right only when the caller
compiled it without size-dependent specialisation (e.g. warmup with an odd
n). Device-only Triton candidates from completions, and any kernel whose
constexprs or specialisation follow the sizes, go through
kreward.triton_cases, which compiles every case on its own."""
import json

from .constants import Status
from .errors import KrewardError


def _meta(compiled, key, default=None):
    md = compiled.metadata
    return getattr(md, key, md.get(key, default) if isinstance(md, dict) else default)


def program_from_triton(ctx, compiled):
    cubin = compiled.asm.get("cubin") if hasattr(compiled, "asm") else None
    if not cubin:
        raise KrewardError(Status.EINVAL, "the compiled Triton kernel carries no cubin")
    return ctx.program_from_binary(cubin, name=f"{_meta(compiled, 'name')}.cubin")


def plan_for_triton(ctx, compiled, program, grid, args):
    """grid: 1 to 3 integer expressions over the problem's dims (the number
    of programs); args: the kernel's non-constexpr arguments as plan
    arguments (tensor names, dims, scalars)."""
    name = _meta(compiled, "name")
    grid = [str(g) for g in (grid if isinstance(grid, (list, tuple)) else [grid])]
    params = program.info()["kernels"][0]["params"]
    extra = len(params) - len(args)
    if extra < 0:
        raise KrewardError(Status.EPLAN, f"{len(args)} arguments for a kernel with {len(params)} parameters")
    programs = "*".join(f"({g})" for g in grid)
    scratch, names = [], []
    sizes = [_meta(compiled, "global_scratch_size", 0) or 0, _meta(compiled, "profile_scratch_size", 0) or 0]
    for i in range(extra):
        per = sizes[i] if i < len(sizes) else 0
        names.append(f"__triton_scratch{i}")
        scratch.append({"name": names[-1], "bytes": f"max(1, {per} * {programs})", "init": "zero"})
    plan = {"launches": [{"kernel": name, "grid": grid, "block": [32 * _meta(compiled, "num_warps", 4)],
                          "smem": int(_meta(compiled, "shared", 0) or 0), "args": list(args) + names}],
            "scratch": scratch}
    return ctx.plan_from_json(json.dumps(plan), name=f"{name} (triton)")


def evaluate_triton(ctx, problem, compiled, grid, args, reward=None, preset="fast", seed=0,
                    baseline=None):
    """Program, plan, then verify, benchmark and score: a Report."""
    program = program_from_triton(ctx, compiled)
    plan = plan_for_triton(ctx, compiled, program, grid, args)
    try:
        return ctx.evaluate_program(problem, program, plan, reward, preset, seed, baseline)
    finally:
        plan.close()
        program.close()
