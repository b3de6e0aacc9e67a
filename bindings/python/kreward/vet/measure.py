"""What vetting measures by running a KernelBench file's Model, in a
subprocess of its own on one device (python -m kreward.vet.measure, a JSON
request on stdin, one JSON line out): the file is code from a data set, so
it never runs in the vetting process, and a file that hangs, faults or
eats memory costs its subprocess only.

- determinism: the forward twice on the same inputs of the cheapest case
  (bitwise, else within the tolerance: cuDNN's algorithms may differ in the
  last bits; random state drawn in forward does not pass).
- tolerance headroom: the reference in its own precision against itself in
  float64 (on the device, else on the CPU: another algorithm), as the
  smallest tolerance / error over the floating-point outputs' elements; an
  integer output that differs between the two (an argmax on near-ties)
  leaves no headroom.
- fingerprint: the outputs on the cheapest case's inputs at fixed seeds
  (a sample of values and their sums per seed), with a key of the inputs'
  and outputs' shapes, dtypes and distributions: two files with the same
  key and close samples at every seed compute the same function on the
  same inputs. Several seeds, since a strengthened problem's inputs take a
  scale and an offset per draw (kernelbench/inputs.py rescale): one draw
  with a positive offset made ReLU, LeakyReLU and ELU one function.
- time: every case, eager (the Model with its own weights, KernelBench's
  way) and torch.compile on the file's own sizes; on a GPU, CUDA events per
  call, and the same call with its launches queued behind a sleep kernel:
  a call whose GPU time is at least LAUNCH_BOUND times the queued one keeps
  the GPU waiting on Python, so timing it measures launches, not kernels."""
import hashlib
import json
import math
import os
import statistics
import time

from .. import json_process

FINGERPRINT_SEED = 0x5EED
# the draws a fingerprint samples: the first is FINGERPRINT_SEED's (the
# determinism check's inputs); each further one halves the chance that
# functions differing on half a recipe's offsets look alike on all of them
FINGERPRINT_DRAWS = 6
SAMPLE = 64              # output values kept per output for duplicates
LAUNCH_BOUND = 2.0       # GPU time / GPU time with every launch queued ahead, at or above which timing is launch-bound
QUEUED_REPS = 5
MIN_REPS, MAX_REPS, TARGET_S = 5, 200, 0.25
HEADROOM_CAP = 1e9       # "no measurable error" (JSON has no infinity)
# elements of an output compared at a time in float64 (a few temporaries of
# 256 MB): upstream outputs reach 10^9 elements, whose float64 temporaries
# whole would not fit beside the file's tensors
HEADROOM_CHUNK = 1 << 25


def _sync(torch, device):
    if device.startswith("cuda"):
        torch.cuda.synchronize(device)


def _queued_ms(torch, fn, host_ms):
    """The GPU time of a call whose launches were all queued before it
    starts: a sleep kernel holds the stream while the host enqueues the
    call, so the events measure the kernels back to back, without the
    gaps the host's launches leave (median of QUEUED_REPS). A forward
    that synchronises (.item(), nonzero) waits for the sleep and goes on
    in step with the host, as it does unqueued: it is not called
    launch-bound for waiting on itself."""
    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    khz = getattr(props, "clock_rate", 0) or 2_000_000  # cycles per ms
    cycles = int(khz * (2 * host_ms + 0.1))
    out = []
    for _ in range(QUEUED_REPS):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda._sleep(cycles)
        a.record()
        fn()
        b.record()
        b.synchronize()
        out.append(a.elapsed_time(b))
    return statistics.median(out)


def _time_calls(torch, fn, device):
    """(median ms per call, median host ms per call or None) after warm-up."""
    for _ in range(3):
        fn()
    _sync(torch, device)
    gpu, host, spent = [], [], 0.0
    start_all = time.perf_counter()
    while len(gpu) < MAX_REPS and (len(gpu) < MIN_REPS or spent < TARGET_S):
        if device.startswith("cuda"):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            t0 = time.perf_counter()
            fn()
            host.append((time.perf_counter() - t0) * 1e3)
            b.record()
            b.synchronize()
            gpu.append(a.elapsed_time(b))
        else:
            t0 = time.perf_counter()
            fn()
            gpu.append((time.perf_counter() - t0) * 1e3)
        spent = time.perf_counter() - start_all
    return statistics.median(gpu), (statistics.median(host) if host else None)


def _float_outputs(torch, outs):
    return [o for o in outs if o.is_floating_point()]


def _deterministic(torch, ref, case, tensors, imp):
    a = ref(case, tensors)
    b = ref(case, tensors)
    bitwise = all(torch.equal(x, y) for x, y in zip(a, b))
    close = bitwise or all(
        x.shape == y.shape and (torch.allclose(x.float(), y.float(), atol=imp.atol, rtol=imp.rtol,
                                               equal_nan=True)
                                if x.is_floating_point() else torch.equal(x, y))
        for x, y in zip(a, b))
    return {"deterministic": bool(close), "bitwise": bool(bitwise)}, a


def _headroom(torch, imp, case, tensors, own, device):
    from ..kernelbench.reference import Reference
    notes = []
    for where in ([device, "cpu"] if device != "cpu" else ["cpu"]):
        try:
            ref64 = Reference(imp, where, dtype=torch.float64)
            t64 = {k: (v.to(where, torch.float64) if v.is_floating_point() else v.to(where))
                   for k, v in tensors.items()}
            wide = ref64(case, t64)
            del t64  # the comparison's room on the device
            break
        except Exception as e:  # noqa: BLE001 - a module without a float64 form on this device
            notes.append(f"float64 on {where}: {type(e).__name__}: {str(e).splitlines()[0][:160]}"
                         if str(e) else f"float64 on {where}: {type(e).__name__}")
    else:
        return None, notes
    worst = HEADROOM_CAP
    for mine, exact in zip(own, wide):
        if mine.shape != exact.shape:
            return 0.0, notes + ["an output's shape differs in float64"]
        # compared where the float64 outputs are (the GPU unless it had no
        # float64 form there): on the CPU, one thread of a parallel run took
        # 80 s over an upstream matmul's 10^9 elements, the GPU a fraction
        mine = mine.to(exact.device)
        if not mine.is_floating_point():
            if not torch.equal(mine, exact.to(mine.dtype)):
                notes.append("an integer output differs between its own precision and float64")
                worst = 0.0
            continue
        try:
            ratio = smallest_ratio(torch, mine.reshape(-1), exact.reshape(-1), imp.atol, imp.rtol)
        except torch.OutOfMemoryError:
            # the file's own tensors beside ours: compared on the CPU instead
            torch.cuda.empty_cache()
            ratio = smallest_ratio(torch, mine.reshape(-1).cpu(), exact.reshape(-1).cpu(), imp.atol,
                                   imp.rtol)
            notes.append("tolerance headroom compared on the CPU: the device had no room")
        if ratio is None:
            return 0.0, notes + ["a non-finite output in one precision only"]
        worst = min(worst, ratio)
    return worst, notes


def smallest_ratio(torch, mine, exact, atol, rtol, chunk=HEADROOM_CHUNK):
    """The smallest tolerance / error over the elements of two flat outputs
    (infinity where no element differs), HEADROOM_CHUNK elements at a time
    in float64; None where a non-finite value is in one of them only (the
    same non-finite value in both is no error)."""
    worst = math.inf
    for start in range(0, mine.numel(), chunk):
        a = mine[start:start + chunk].double()
        b = exact[start:start + chunk].double()
        err = (a - b).abs()
        bad = ~torch.isfinite(err)
        if bool(bad.any()):
            same = (a == b) | (a.isnan() & b.isnan())
            if bool((bad & ~same).any()):
                return None
            err = torch.where(bad, torch.zeros_like(err), err)
        nonzero = err > 0
        if bool(nonzero.any()):
            tol = atol + rtol * b.abs()
            worst = min(worst, float((tol[nonzero] / err[nonzero]).min()))
    return worst


def _sample(torch, x):
    flat = x.detach().to("cpu").reshape(-1)
    n = flat.numel()
    k = min(SAMPLE, n)
    # evenly spaced positions, in integers: a float32 linspace rounds the
    # last one past the end of a 100M-element output
    idx = (torch.arange(k, dtype=torch.int64) * (n - 1)) // max(k - 1, 1) if n else None
    vals = flat[idx].double().tolist() if n else []
    xf = flat.double()
    return {"values": [v if math.isfinite(v) else str(v) for v in vals],
            "sum": _finite_or_str(float(xf.sum())) if n else 0.0,
            "abs_sum": _finite_or_str(float(xf.abs().sum())) if n else 0.0}


def _finite_or_str(v):
    return v if math.isfinite(v) else str(v)


def _fingerprint(torch, imp, ref, case, layout, outs, device):
    """The first draw's samples from outs (already computed on
    FINGERPRINT_SEED's inputs), the others' from the reference run on
    FINGERPRINT_SEED + 1, + 2, ... (in `draws`)."""
    from ..kernelbench import inputs as inputs_mod
    draws = []
    for d in range(1, FINGERPRINT_DRAWS):
        tensors = inputs_mod.make_inputs(layout, FINGERPRINT_SEED + d, device)
        draws.append([_sample(torch, o) for o in ref(case, tensors)])
        del tensors
    shapes = imp.shapes(imp.cases[case][2])
    key = {"inputs": [[t["dtype"], list(t["shape"]), t["init"], t.get("transform")] for t in layout],
           "values": sorted((str(k), repr(v)) for k, v in imp.case_values(case).items()),
           "outputs": [[t["dtype"], list(s)] for t, s in zip(imp.tensors, shapes)
                       if t["role"] == "out"]}
    digest = hashlib.sha256(json.dumps(key, sort_keys=True, default=str).encode()).hexdigest()
    return {"key": digest[:32], "samples": [_sample(torch, o) for o in outs], "draws": draws}


def _timing(torch, imp, device, compile_too):
    """{case name: {eager_ms, host_ms, launch_bound}} and the compiled time
    of the file's own case; the Model with its own weights on the file's
    inputs of each case's sizes (seeded)."""
    from ..kernelbench import inputs as inputs_mod
    from ..kernelbench.reference import Reference
    from ..kernelbench.soundness import input_layout
    ref = Reference(imp, device)
    cases, compiled, notes = {}, None, []
    for c, (name, _, _) in enumerate(imp.cases):
        tensors = inputs_mod.make_inputs(input_layout(imp, c), 1, device)
        model = ref.model(c)
        args = {t["index"]: tensors[t["name"]] for t in imp.tensors
                if t["role"] == "in" and t["source"] == "input"}
        args.update(imp.case_values(c))
        call_args = tuple(args[i] for i in sorted(args))

        def eager(model=model, call_args=call_args):
            with torch.no_grad():
                model(*call_args)
        ms, host = _time_calls(torch, eager, device)
        entry = {"eager_ms": round(ms, 5)}
        if host is not None:
            queued = _queued_ms(torch, eager, host)
            entry.update(host_ms=round(host, 5), queued_ms=round(queued, 5),
                         launch_bound=bool(ms >= LAUNCH_BOUND * max(queued, 1e-6)))
        cases[name] = entry
        if c == 0 and compile_too:
            if device.startswith("cuda"):
                # Inductor's Triton would ask /sbin/ldconfig, which the sandbox refuses
                from ..kernelbench.libcuda_path import point_triton_at_loaded_libcuda
                point_triton_at_loaded_libcuda()
            t0 = time.perf_counter()
            try:
                fast = torch.compile(model)

                def compiled_call(fast=fast, call_args=call_args):
                    with torch.no_grad():
                        fast(*call_args)
                compiled_call()
                compile_s = time.perf_counter() - t0
                cms, _ = _time_calls(torch, compiled_call, device)
                compiled = {"ms": round(cms, 5), "compile_s": round(compile_s, 2)}
            except Exception as e:  # noqa: BLE001 - a module torch.compile cannot take
                notes.append(f"torch.compile failed: {type(e).__name__}: "
                             f"{(str(e).splitlines() or [''])[0][:200]}")
        del tensors
    return cases, compiled, notes


def _warm():
    """Before the request (the process is started ahead, json_process.start):
    torch's import, which picks no device."""
    import torch  # noqa: F401


def run(req):
    if "visible_devices" in req:
        # read by CUDA when torch first uses it, which nothing has yet
        # (_warm); were it started, it saw no GPU (the parent's "")
        import torch
        if torch.cuda.is_initialized():
            raise RuntimeError("CUDA started before the measuring process was told its device")
        os.environ["CUDA_VISIBLE_DEVICES"] = req["visible_devices"]
    t0 = time.perf_counter()
    steps = {}

    def step(name):  # the seconds since the last step, under this name
        nonlocal t0
        now = time.perf_counter()
        steps[name] = round(now - t0, 3)
        t0 = now
    import torch

    from ..kernelbench import inputs as inputs_mod
    from ..kernelbench.importer import ImportedProblem
    from ..kernelbench.reference import Reference
    from ..kernelbench.soundness import cases_checked, cheapest_case, input_layout
    from ..kernelbench.file_process import confine
    torch.set_grad_enabled(False)
    device = req["device"]
    sandbox = confine(req["path"], gpu=device != "cpu")  # before the file runs
    imp = ImportedProblem(req["path"], req["base"], [tuple(c) for c in req["cases"]],
                          req["atol"], req["rtol"])
    out = {"device": device if device == "cpu" else
           f"{device} ({torch.cuda.get_device_name(torch.device(device))})", "notes": []}
    if not sandbox["applied"]:
        out["notes"].append(f"measured without a sandbox: {sandbox['why']}")
    ref = Reference(imp, device)
    step("setup_s")  # the sandbox, the device's first use, the file's import
    case = cheapest_case(imp)
    layout = input_layout(imp, case)
    tensors = inputs_mod.make_inputs(layout, FINGERPRINT_SEED, device)
    det, outs = _deterministic(torch, ref, case, tensors, imp)
    out.update(det)
    out["fingerprint"] = _fingerprint(torch, imp, ref, case, layout, outs, device)
    del tensors, outs
    step("determinism_s")
    # the reference's own error grows with what it reduces: the file's own
    # sizes too where they fit (soundness.cases_checked)
    headroom, notes = None, []
    for c in cases_checked(imp):
        t = inputs_mod.make_inputs(input_layout(imp, c), FINGERPRINT_SEED, device)
        h, n = _headroom(torch, imp, c, t, ref(c, t), device)
        notes += n
        if h is not None:
            headroom = h if headroom is None else min(headroom, h)
        del t
    out["tolerance_headroom"] = None if headroom is None else round(headroom, 3)
    out["notes"] += notes
    step("headroom_s")
    if req.get("time", True):
        cases, compiled, notes = _timing(torch, imp, device, req.get("compile", True))
        out["cases_ms"] = cases
        own = cases.get(imp.cases[0][0], {})
        out["reference_ms"] = {"eager": own.get("eager_ms"),
                               "compile": compiled["ms"] if compiled else None}
        if compiled:
            out["compile_s"] = compiled["compile_s"]
        out["launch_bound"] = own.get("launch_bound")
        out["launch_bound_cases"] = sorted(n for n, e in cases.items() if e.get("launch_bound"))
        out["notes"] += notes
        step("timing_s")
    out["steps_s"] = steps  # where a measurement's seconds go (vetting at scale)
    return out


if __name__ == "__main__":
    json_process.serve(run, warm=_warm)
