"""Compiles one Triton kernel for each case of a problem, in a process of its
own (triton_cases.compile_cases starts it): the kernel's module comes from a
policy's completion, so its decorators and heuristics never run in the
caller.

    python3 triton_compile_worker.py REQUEST.json RESULT.json

The request: {"module": stripped source, "kernel": name, "arch": null (the
GPU here) or an sm number (compile for it without a GPU), "cases": the
per-case specs of triton_cases.case_specs}. Each case is compiled the way
Triton specialises a launch: its own integer values (divisibility by 16,
the value 1), pointer alignment, its constexprs; an autotuned kernel gets
the autotuner's choice for the case (on the GPU: the autotuner runs on
tensors of the case's shapes; without one: the config index the case
names). The result: per case the CUBIN (base64) and what the plan needs.

Imports triton and torch, and triton_expr.py by path: nothing of kreward."""
import base64
import importlib.util
import json
import os
import sys
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))


def _load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


expr = _load(os.path.join(HERE, "triton_expr.py"), "kr_triton_expr")

TORCH_DTYPES = {"f32": "float32", "f16": "float16", "bf16": "bfloat16", "f64": "float64", "i8": "int8",
                "u8": "uint8", "i16": "int16", "i32": "int32", "i64": "int64", "bool": "bool"}


class Pointer:
    """A tensor as Triton's specialisation sees it (a data_ptr and a dtype),
    for compiling without a GPU: the library's buffers are 64 KiB aligned."""

    def __init__(self, dtype):
        self.dtype = dtype

    def data_ptr(self):
        return 1 << 16


def peel(kernel):
    """(JITFunction, autotuner or None, [heuristics value dicts])."""
    from triton.runtime.autotuner import Autotuner, Heuristics
    tuner, heur = None, []
    while True:
        if isinstance(kernel, Autotuner):
            tuner, kernel = kernel, kernel.fn
        elif isinstance(kernel, Heuristics):
            heur.append(kernel.values)
            kernel = kernel.fn
        else:
            return kernel, tuner, heur


def tensor_for(arg, gpu, full):
    import torch
    dtype = getattr(torch, TORCH_DTYPES[arg["dtype"]])
    if not gpu:
        return Pointer(dtype)
    if not full:  # specialisation reads only the address and the dtype
        return torch.empty(1, dtype=dtype, device="cuda")
    if dtype.is_floating_point:
        return torch.randn(arg["shape"], device="cuda").to(dtype)
    return torch.zeros(arg["shape"], dtype=dtype, device="cuda")


def compile_offline(jit, named, arch):
    """Triton's own specialisation and compile, for an explicit target."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource, make_backend
    from triton.runtime.jit import create_function_from_signature
    target = GPUTarget("cuda", int(arch), 32)
    backend = make_backend(target)
    binder = create_function_from_signature(jit.signature, jit.params, backend)
    bound, spec, opts = binder(**named)
    options, sig, constexprs, attrs = jit._pack_args(backend, opts, bound, spec, None)
    return triton.compile(ASTSource(jit, sig, constexprs, attrs), target=target, options=options.__dict__)


def compile_case(kernel, case, gpu, arch):
    jit, tuner, heur = peel(kernel)
    params = [p.name for p in jit.params]
    named = {}
    for a in case["args"]:
        if a["kind"] == "tensor":
            named[a["param"]] = tensor_for(a, gpu, tuner is not None)
        elif a["kind"] == "float":
            named[a["param"]] = float(a["value"])
        else:
            named[a["param"]] = int(a["value"])
    meta, options = dict(case["constexprs"]), dict(case["options"])
    config = None
    if tuner is not None:
        if gpu:
            def grid(m):
                return tuple(expr.evaluate(g, {**case["dims"], **_ints(m)}) for g in case["grid"])
            tuner[grid](**named, **meta, **options)
            config = tuner.best_config
        elif case.get("config") is not None:
            config = tuner.configs[case["config"]]
        else:
            raise RuntimeError("the kernel is autotuned: the autotuner times its configs on the GPU "
                               "(without one, name the config for each case)")
        for k, v in config.all_kwargs().items():
            (meta if k in params else options)[k] = v
    for values in heur:
        for k, f in values.items():
            meta[k] = f({**named, **meta})
    grid = [expr.evaluate(g, {**case["dims"], **_ints(meta)}) for g in case["grid"]]
    if gpu:
        compiled = jit.warmup(**named, **meta, **options, grid=tuple(grid))
    else:
        compiled = compile_offline(jit, {**named, **meta, **options}, arch)
    return describe(compiled, jit, named, grid, meta, options, config)


def _ints(d):
    return {k: v for k, v in d.items() if type(v) is int}


def describe(compiled, jit, named, grid, meta, options, config):
    md = compiled.metadata
    get = (lambda k, d=None: getattr(md, k, d)) if not isinstance(md, dict) else md.get
    src = getattr(compiled, "src", None)
    sig = getattr(src, "signature", None)
    if isinstance(sig, dict):
        specialised = [p for p in named if sig.get(p) == "constexpr"]
    else:  # an older Triton: its one value specialisation is an integer equal to 1
        specialised = [p for p, v in named.items() if type(v) is int and v == 1]
    cubin = compiled.asm.get("cubin")
    if not cubin:
        raise RuntimeError("the compiled kernel carries no cubin")
    unsupported = [k for k in ("launch_cooperative_grid", "launch_pdl") if get(k)]
    if (get("num_ctas", 1) or 1) > 1:
        unsupported.append(f"num_ctas={get('num_ctas')}")
    if unsupported:
        raise RuntimeError(f"the compiled kernel needs a launch a plan cannot express: {', '.join(unsupported)}")
    return {"cubin": base64.b64encode(cubin).decode(), "name": get("name"), "num_warps": get("num_warps"),
            "shared": int(get("shared", 0) or 0), "global_scratch_size": int(get("global_scratch_size", 0) or 0),
            "profile_scratch_size": int(get("profile_scratch_size", 0) or 0), "grid": grid,
            "specialised": specialised, "constexprs": {k: v for k, v in meta.items() if _plain(v)},
            "options": {k: v for k, v in options.items() if _plain(v)},
            "config": {k: v for k, v in config.all_kwargs().items() if _plain(v)} if config else None}


def _plain(v):
    return type(v) in (int, float, bool, str) or v is None


def main():
    with open(sys.argv[1]) as f:
        req = json.load(f)
    os.dup2(2, 1)  # the module's prints go to stderr
    mod = _load(req["module_path"], "kr_triton_candidate")
    kernel = getattr(mod, req["kernel"], None)
    out = []
    gpu = req.get("arch") is None
    if kernel is None:
        out = [{"error": f"the module defines no kernel '{req['kernel']}'"}] * len(req["cases"])
    for case in req["cases"] if kernel is not None else []:
        try:
            out.append(compile_case(kernel, case, gpu, req.get("arch")))
        except Exception as e:
            out.append({"error": f"{type(e).__name__}: {e}", "trace": traceback.format_exc()[-1500:]})
    with open(sys.argv[2], "w") as f:
        json.dump(out, f)


if __name__ == "__main__":
    main()
