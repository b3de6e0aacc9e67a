"""The importer's probe: runs one KernelBench-format problem file in its own
process (never the caller's: the file is code, and its import may allocate
gigabytes or hang) and prints what the importer needs as one JSON line.

Usage: python probe.py FILE REQUESTS_JSON, a list of requests, each
  {"overrides": {const: value}, "real": bool, "determinism": bool,
   "unless_ok": i (optional: not run, answered ok false, where request i
   of the list succeeded)},
answered by one JSON line each, in order
- overrides replace the file's module-level constants after it ran (its
  get_inputs/get_init_inputs read them when called, so sizes follow);
- real: inputs and parameters made on the CPU, with value statistics (the
  importer picks input distributions from them; an input of more than
  STATS_LIMIT elements drawn by torch.rand/randn/randint made only as far
  as the statistics read it, prefix_inputs.py); otherwise on the meta
  device (shapes only, nothing allocated);
- determinism: the forward runs twice on the same CPU inputs and the
  outputs are compared (dropout and other randomness are refused).

It imports nothing of kreward: only torch, the problem file and, by path,
file_process.py (its answer channel and sandbox) with confine.py, and
prefix_inputs.py."""
import inspect
import json
import math
import sys
import time
import types

import torch

DTYPES = {torch.float32: "f32", torch.float16: "f16", torch.bfloat16: "bf16", torch.float64: "f64",
          torch.int8: "i8", torch.uint8: "u8", torch.int32: "i32", torch.int64: "i64",
          torch.bool: "bool"}
STATS_LIMIT = 1 << 26  # elements per tensor whose statistics are computed exactly


def load(path, overrides):
    mod = types.ModuleType("kernelbench_problem")
    mod.__file__ = path
    with open(path, "rb") as f:  # bytes: Python honours a BOM or a coding line, as importing does
        code = compile(f.read(), path, "exec")
    exec(code, mod.__dict__)
    for k, v in overrides.items():
        if k not in mod.__dict__:
            raise KeyError(f"no module-level constant '{k}'")
        mod.__dict__[k] = v
    return mod


def constants(mod):
    """Module-level integer constants: what sizes may be scaled by."""
    return {k: v for k, v in vars(mod).items()
            if not k.startswith("_") and type(v) is int}


def stats(t):
    """min, max, mean, std (unbiased) and kurtosis of the first STATS_LIMIT
    elements, in float64."""
    flat = t.detach().reshape(-1)
    if flat.numel() > STATS_LIMIT:
        flat = flat[:STATS_LIMIT]
    f = flat.to(torch.float64, copy=True)  # a copy even of float64: z is made in place on it
    s = {"min": f.min().item(), "max": f.max().item(), "mean": f.mean().item(),
         "std": f.std().item() if f.numel() > 1 else 0.0}
    if s["std"] > 0 and f.numel() > 3:
        # z ** 4 as two squares, in place on f (no longer needed): the
        # same mean of z^4; torch's pow with exponent 4 on float64 and the
        # temporaries of 512 MB each took 5.8 s of a probe for a prefix
        # of 2^26 elements on 2 cores, the squares 0.2 s
        z = f.sub_(s["mean"]).div_(s["std"])
        s["kurtosis"] = z.square_().square_().mean().item()
    return s


def structure(t):
    """Structure the problem's get_inputs built into an input, which random
    inputs of the same distribution would lack."""
    if t.dim() < 2 or not t.is_floating_point() or t.numel() > STATS_LIMIT:
        return None
    if t.shape[-1] == t.shape[-2]:
        if torch.equal(t, t.mT):
            return "symmetric"
        if torch.count_nonzero(torch.triu(t, 1)) == 0 and torch.count_nonzero(torch.tril(t)) > 0:
            return "lower_triangular"
        if torch.count_nonzero(torch.tril(t, -1)) == 0 and torch.count_nonzero(torch.triu(t)) > 0:
            return "upper_triangular"
    if t.min() >= 0 and torch.allclose(t.sum(-1), torch.ones(()), atol=1e-4):
        return "softmax_last"
    return None


def describe(v, real, prefixes=None):
    """prefixes: the Prefixes mode get_inputs ran under, where v may be one
    of its stand-ins (the statistics then of its first elements, the same
    ones stats() reads of a whole tensor)."""
    if isinstance(v, torch.Tensor):
        d = {"kind": "tensor", "shape": list(v.shape), "dtype": DTYPES.get(v.dtype, str(v.dtype))}
        first = prefixes.prefix(v) if prefixes else None
        if real and first is not None:
            d["stats"] = stats(first)
            d["structure"] = None  # more than STATS_LIMIT elements: structure() never looks
        elif real and v.numel():
            d["stats"] = stats(v)
            d["structure"] = structure(v)
        return d
    if v is None or isinstance(v, (bool, int, float, str)):
        if isinstance(v, float) and not math.isfinite(v):
            return {"kind": "unsupported", "type": "non-finite float"}
        return {"kind": "value", "value": v}
    if isinstance(v, (list, tuple)) and all(x is None or isinstance(x, (bool, int, float, str)) for x in v):
        return {"kind": "value", "value": list(v)}
    return {"kind": "unsupported", "type": type(v).__name__}


def outputs_of(result):
    if isinstance(result, torch.Tensor):
        return [result], False
    if isinstance(result, (tuple, list)) and all(isinstance(r, torch.Tensor) for r in result):
        return list(result), True
    raise TypeError(f"forward returned {type(result).__name__}, not a tensor or a tuple of tensors")


def run_forward(model, inputs):
    with torch.no_grad():
        return outputs_of(model(*inputs))


def build(mod, device, by_prefix=False):
    """(init inputs, model, inputs) on device; by_prefix: get_inputs's
    large random tensors as prefix_inputs.py's stand-ins where it can
    follow them (the Prefixes mode returned too, else None)."""
    with torch.device(device):
        init = list(mod.get_init_inputs())
        torch.manual_seed(0)
        model = mod.Model(*init)
        torch.manual_seed(1)
        if by_prefix:
            inputs, prefixes = _inputs_by_prefix(mod)
            return init, model, inputs, prefixes
        inputs = list(mod.get_inputs())
    return init, model, inputs


def _inputs_by_prefix(mod):
    """get_inputs under prefix_inputs.Prefixes: (inputs, the mode), or,
    where it did something the mode does not follow (or raised there),
    get_inputs again from the same seed, whole: (inputs, None)."""
    mode = _sibling("prefix_inputs").Prefixes(STATS_LIMIT)
    try:
        with mode:
            inputs = list(mod.get_inputs())
    except (Exception, _sibling("prefix_inputs").NotPrefix):  # noqa: BLE001 - the whole run decides
        inputs = None
    if inputs is None or mode.failed:
        torch.manual_seed(1)
        return list(mod.get_inputs()), None
    return inputs, mode


def _elements(values):
    return sum(t.numel() for t in values if isinstance(t, torch.Tensor))


def _meta_inputs(mod):
    """get_inputs on the meta device (sizes without values), or [] where it
    does not run there."""
    try:
        with torch.device("meta"):
            return list(mod.get_inputs())
    except Exception:  # noqa: BLE001 - then sized after the CPU has made them
        return []


def probe(path, req):
    mod = load(path, req.get("overrides", {}))
    for name in ("Model", "get_inputs", "get_init_inputs"):
        if not hasattr(mod, name):
            raise LookupError(f"the file defines no {name}")
    real = req.get("real", False)
    device = "cpu" if real else "meta"
    meta_error = None
    prefixes = None
    try:
        if real:
            init, model, inputs, prefixes = build(mod, device, by_prefix=True)
        else:
            init, model, inputs = build(mod, device)
    except (NotImplementedError, RuntimeError) as e:
        if real:
            raise
        # a module whose __init__ reads values (Swin's drop-path rates:
        # torch.linspace(...).item()) cannot be built on meta: on the CPU,
        # with its forward there too, when the inputs are small enough
        # (the inputs' sizes first, from meta, so a large problem is refused
        # before its inputs exist; the model itself the value probe builds
        # on the CPU anyway)
        meta_error = f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"
        too_large = RuntimeError(f"the module cannot be built on meta ({meta_error}) and the "
                                 "inputs are too large for a CPU run")
        if _elements(_meta_inputs(mod)) > STATS_LIMIT:
            raise too_large from e
        device = "cpu"
        init, model, inputs = build(mod, device)
        if _elements(inputs) > STATS_LIMIT:
            raise too_large from e
    out = {"constants": constants(mod), "device": device,
           "init_inputs": [describe(v, False) for v in init],
           "inputs": [describe(v, real, prefixes) for v in inputs],
           "params": [dict(name=n, **describe(p, real)) for n, p in model.named_parameters()],
           "buffers": [dict(name=n, **describe(b, real)) for n, b in model.named_buffers()],
           "arg_names": arg_names(mod.Model, len(inputs)),
           "modules": sorted({type(m).__name__ for m in model.modules()})}
    for i, d in enumerate(out["inputs"]):
        if d["kind"] == "unsupported":
            raise TypeError(f"get_inputs()[{i}] is a {d['type']}: only tensors and plain values "
                            "can be passed")
    if real:  # values only: the meta probe gives the output shapes without the CPU's time
        return out
    if meta_error:
        out["meta_error"] = meta_error
    try:
        outs, is_tuple = run_forward(model, inputs)
    except (NotImplementedError, RuntimeError) as e:
        if device != "meta":
            raise
        # an op without a meta kernel: shapes from a CPU run when small enough
        out["meta_error"] = f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"
        if _elements(inputs) > STATS_LIMIT:
            raise RuntimeError(f"the forward has no meta kernel ({out['meta_error']}) "
                               f"and the inputs are too large for a CPU run") from e
        init, model, inputs = build(mod, "cpu")
        outs, is_tuple = run_forward(model, inputs)
    out["outputs"] = [describe(t, False) for t in outs]
    out["tuple_output"] = is_tuple
    if req.get("determinism"):
        out["deterministic"] = deterministic(mod)
    return out


def deterministic(mod):
    init, model, inputs = build(mod, "cpu")
    copies = [x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]
    torch.manual_seed(2)
    a, _ = run_forward(model, inputs)
    torch.manual_seed(3)
    b, _ = run_forward(model, copies)
    return all(torch.equal(x, y) for x, y in zip(a, b))


def arg_names(cls, n):
    try:
        params = list(inspect.signature(cls.forward).parameters.values())[1:]
    except (TypeError, ValueError):
        params = []
    names = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return [names[i] if i < len(names) else f"x{i}" for i in range(n)]


_SIBLINGS = {}


def _sibling(name):
    """A file of this folder, loaded by path (once): this process runs
    without the kreward package."""
    if name not in _SIBLINGS:
        import importlib.util
        import os
        spec = importlib.util.spec_from_file_location(
            "kr_kb_" + name, os.path.join(os.path.dirname(os.path.abspath(__file__)), name + ".py"))
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        _SIBLINGS[name] = mod
    return _SIBLINGS[name]


def answer_all(path, reqs, out):
    """Each request's answer, in order, as one JSON line on `out` (a
    request with unless_ok is answered "not run" where that one succeeded)."""
    results = []
    for req in reqs:
        t = time.perf_counter()
        try:
            if results[req["unless_ok"]]["ok"] if "unless_ok" in req else False:
                result = {"ok": False, "skipped": True,
                          "error": f"not run: request {req['unless_ok']} succeeded"}
            else:
                result = {"ok": True, **probe(path, req)}
        except Exception as e:  # the importer turns this into a refusal with the reason
            result = {"ok": False, "error": f"{type(e).__name__}: {e}"}
        result["seconds"] = round(time.perf_counter() - t, 3)  # bench/bench_import.py prints it
        results.append(result)
        out.write("\n" + json.dumps(result) + "\n")
        out.flush()


def main():
    path, reqs = sys.argv[1], json.loads(sys.argv[2])
    # the answers on a channel of their own, the file sandboxed (file_process.py)
    fp = _sibling("file_process")
    out = fp.answer_channel()
    fp.confine(path, gpu=False)
    answer_all(path, reqs, out)  # one process for all of a file's probes: torch is imported once


if __name__ == "__main__":
    main()
