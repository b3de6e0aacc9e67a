"""KernelBench's own evaluation loop, replicated for bench_kernelbench.py.

KernelBench is not on PyPI, so its loop is rewritten here, step for step, from
ScalingIntelligence/KernelBench at commit 423217d9fda91e0c2d67e4a43bf62f96f6d104f1
(2026-03-05). References below are file:line at that commit:

  src/kernelbench/eval.py
    65-68    set_seed: torch.manual_seed and torch.cuda.manual_seed
    83-102   tolerance by precision: fp32 1e-4, fp16/bf16 1e-2 (atol = rtol)
    124-148  load_original_model_and_inputs: exec of the problem source into a dict
    151-181  load_custom_model_with_tempfile: Triton sources are written to a file
             and imported (Triton reads the kernel's source with inspect)
    184-207  load_custom_model: exec of the candidate, TORCH_EXTENSIONS_DIR set to
             the build directory by a line prepended to the source
    370-391  _process_input_tensor: tensors cast to the precision, moved to the device
    394-699  eval_kernel_against_ref: seed, init inputs, Model built under the seed,
             ModelNew loaded (a load error = not compiled), built under the same
             seed, correctness trials, then (measure_performance) ModelNew timed on
             inputs made under the seed, then the reference timed the same way and
             a speedup above 10x flagged `excessive_speedup`
    727-848  run_and_check_correctness: trial seeds drawn from the seed, per trial
             inputs from get_inputs() under the trial seed, the reference's output
             first, then ModelNew's; shape check, then torch.allclose; an exception
             ends the check (runtime_error)
  src/kernelbench/timing.py
    126-142  clear_l2_cache: a 256 MiB int64 tensor filled before every trial
    201-281  time_execution_with_cuda_event: 3 warm-up calls (each synchronised),
             empty_cache, then num_trials + 1 trials (the first discarded), each
             synchronise, L2 flush, event, call, event, synchronise
    602-625  get_timing_stats: mean/std/min/max in ms (3 significant digits)
  scripts/eval_from_generations.py
    120-124  defaults: 5 correctness trials, 100 perf trials, 180 s timeout, cuda_event
    310-327  a build directory per problem and sample
    603-640  one sample per spawned pool worker (mp.Pool per batch), result awaited
             with the timeout

What differs, on purpose: the functions take a `device` that may be the CPU so
the loop's logic can be unit-tested without a GPU (a CPU device synchronises
nothing, times with the host clock in place of CUDA events and skips the L2
flush); metadata holds strings, not exception objects (the result crosses a
process boundary as a dict); KernelBench prints progress, this module does not.
"""
import importlib.util
import multiprocessing as mp
import os
import tempfile
import time
import traceback

import torch

KERNELBENCH_COMMIT = "423217d9fda91e0c2d67e4a43bf62f96f6d104f1"
# scripts/eval_from_generations.py:120-124
NUM_CORRECT_TRIALS, NUM_PERF_TRIALS, TIMEOUT_S = 5, 100, 180
TOLERANCE = {torch.float32: 1e-4, torch.float16: 1e-2, torch.bfloat16: 1e-2}  # eval.py:93-100
EXCESSIVE_SPEEDUP = 10.0  # eval.py:412


def _is_cuda(device):
    return torch.device(device).type == "cuda"


def _sync(device):
    if _is_cuda(device):
        torch.cuda.synchronize(device=device)


def set_seed(seed):
    torch.manual_seed(seed)
    torch.cuda.manual_seed(seed)  # a no-op (lazily queued) without CUDA


def load_original_model_and_inputs(src, context):
    """(Model, get_init_inputs, get_inputs) from the problem's source, or
    None when it does not parse or run."""
    try:
        compile(src, "<string>", "exec")
        exec(src, context)
    except Exception:
        return None
    return context.get("Model"), context.get("get_init_inputs"), context.get("get_inputs")


def load_custom_model(src, context, build_dir=None):
    """ModelNew from a CUDA (load_inline) candidate, executed in `context`;
    None on a syntax error (other exceptions reach the caller)."""
    if build_dir:
        context["BUILD_DIRECTORY"] = build_dir
        src = f"import os\nos.environ['TORCH_EXTENSIONS_DIR'] = {build_dir!r}\n" + src
    try:
        compile(src, "<string>", "exec")
    except SyntaxError:
        return None
    exec(src, context)
    return context.get("ModelNew")


def load_custom_model_with_tempfile(src, entry_point="ModelNew"):
    """ModelNew from a Triton candidate, imported from a file of its own
    (Triton needs the kernel's source on disk); the caller removes the file."""
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
        f.write(src)
        path = f.name
    spec = importlib.util.spec_from_file_location("temp_module", path)
    mod = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(mod)
    except BaseException:
        os.remove(path)
        raise
    return getattr(mod, entry_point), path


def process_input(x, device, precision):
    if not isinstance(x, torch.Tensor):
        return x
    return x.to(dtype=precision).to(device=device)


class _HostEvent:
    """A CUDA event's interface on the host clock (the CPU stand-in)."""

    def record(self):
        self.t = time.perf_counter()

    def elapsed_time(self, end):
        return (end.t - self.t) * 1e3


def _event(device):
    return torch.cuda.Event(enable_timing=True) if _is_cuda(device) else _HostEvent()


def clear_l2_cache(device):
    if _is_cuda(device):
        dummy = torch.empty((32, 1024, 1024), dtype=torch.int64, device=device)
        dummy.fill_(42)
        del dummy


def time_execution_with_cuda_event(fn, args, num_warmup=3, num_trials=10, discard_first=1, device=None):
    """Per-trial times in ms (timing.py:201-281)."""
    for _ in range(num_warmup):
        fn(*args)
        _sync(device)
    if _is_cuda(device):
        torch.cuda.empty_cache()
    times = []
    for trial in range(num_trials + discard_first):
        _sync(device)
        start, end = _event(device), _event(device)
        clear_l2_cache(device)
        start.record()
        fn(*args)
        end.record()
        _sync(device)
        if trial >= discard_first:
            times.append(start.elapsed_time(end))
    return times


def get_timing_stats(times):
    """timing.py:602-625: three significant digits, in ms."""
    import numpy as np
    return {"mean": float(f"{np.mean(times):.3g}"), "std": float(f"{np.std(times):.3g}"),
            "min": float(f"{np.min(times):.3g}"), "max": float(f"{np.max(times):.3g}"),
            "num_trials": len(times)}


def _result(compiled=False, correctness=False, metadata=None):
    return {"compiled": compiled, "correctness": correctness, "metadata": metadata or {},
            "runtime": -1.0, "runtime_stats": {}, "ref_runtime": -1.0, "ref_runtime_stats": {}}


def _err(e):
    return f"{type(e).__module__}.{type(e).__name__}"


def run_and_check_correctness(model, model_new, get_inputs, metadata, num_correct_trials, seed,
                              device, precision):
    """eval.py:727-848."""
    torch.manual_seed(seed)
    trial_seeds = [torch.randint(0, 2**32 - 1, (1,)).item() for _ in range(num_correct_trials)]
    tol = TOLERANCE[precision]
    passed = 0
    with torch.no_grad():
        for trial_seed in trial_seeds:
            set_seed(trial_seed)
            inputs = [process_input(x, device, precision) for x in get_inputs()]
            set_seed(trial_seed)
            model = model.to(device=device, dtype=precision)
            set_seed(trial_seed)
            model_new = model_new.to(device=device, dtype=precision)
            output = model(*inputs)
            _sync(device)
            try:
                output_new = model_new(*inputs)
                _sync(device)
                if output.shape != output_new.shape:
                    metadata["correctness_issue"] = (f"Output shape mismatch: Expected {output.shape}, "
                                                     f"got {output_new.shape}")
                    metadata["correctness_issue_name"] = "correctness_issue"
                    return _result(True, False, metadata)
                if not torch.allclose(output, output_new, atol=tol, rtol=tol):
                    diff = torch.abs(output - output_new)
                    metadata.setdefault("max_difference", []).append(f"{diff.max().item():.6f}")
                    metadata.setdefault("avg_difference", []).append(f"{diff.mean().item():.6f}")
                    metadata["correctness_issue"] = "Output mismatch"
                else:
                    passed += 1
            except Exception as e:
                metadata["runtime_error"] = str(e)[:197] + "..." if len(str(e)) > 200 else str(e)
                metadata["runtime_error_name"] = _err(e)
                metadata["runtime_error_traceback"] = traceback.format_exc()
                return _result(True, False, metadata)
    metadata["correctness_trials"] = f"({passed} / {num_correct_trials})"
    return _result(True, passed == num_correct_trials, metadata)


def eval_kernel_against_ref(original_src, custom_src, seed_num=42, num_correct_trials=1,
                            num_perf_trials=10, measure_performance=False, build_dir=None,
                            device="cuda", backend="cuda", precision=torch.float32,
                            check_for_excessive_speedup=True,
                            excessive_speedup_threshold=EXCESSIVE_SPEEDUP):
    """eval.py:394-699; a dict with KernelExecResult's fields (runtimes in ms),
    or None where KernelBench returns None (a lock-file error: retry)."""
    if _is_cuda(device):
        torch.cuda.set_device(device)
    metadata = {"device": str(device)}
    if _is_cuda(device):
        metadata["hardware"] = torch.cuda.get_device_name(device=device)
    context = {}
    loaded = load_original_model_and_inputs(original_src, context)
    if loaded is None:
        raise ValueError("the reference source does not load")  # KernelBench fails to unpack None
    Model, get_init_inputs, get_inputs = loaded
    set_seed(seed_num)
    init_inputs = [process_input(x, device, precision) for x in get_init_inputs()]
    with torch.no_grad():
        set_seed(seed_num)
        original_model = Model(*init_inputs)
    tmp = None
    try:
        if backend.lower() in ("triton", "tilelang", "cute"):
            ModelNew, tmp = load_custom_model_with_tempfile(custom_src, "ModelNew")
        else:
            ModelNew = load_custom_model(custom_src, context, build_dir)
        _sync(device)
    except Exception as e:
        if "lock" in str(e) or "No such file or directory" in str(e):
            return None
        metadata["compilation_error_name"] = _err(e)
        metadata["compilation_error"] = str(e)
        return _result(False, False, metadata)
    try:
        if ModelNew is None:
            metadata["compilation_error_name"] = "SyntaxError"
            metadata["compilation_error"] = "Syntax error in custom generated code or ModelNew not found"
            return _result(False, False, metadata)
        try:
            with torch.no_grad():
                set_seed(seed_num)
                custom_model = ModelNew(*init_inputs)
                original_model = original_model.to(device=device, dtype=precision)
                custom_model = custom_model.to(device=device, dtype=precision)
                _sync(device)
        except RuntimeError as e:
            metadata["runtime_error"] = str(e)
            metadata["runtime_error_name"] = _err(e)
            return _result(True, False, metadata)
        try:
            result = run_and_check_correctness(original_model, custom_model, get_inputs, metadata,
                                               num_correct_trials, seed_num, device, precision)
        except Exception as e:
            metadata["runtime_error"] = str(e)
            metadata["runtime_error_name"] = _err(e)
            result = _result(True, False, metadata)
        if measure_performance and result["correctness"]:
            try:
                _sync(device)
                set_seed(seed_num)
                inputs = [process_input(x, device, precision) for x in get_inputs()]
                custom_model = custom_model.to(device=device, dtype=precision)
                _sync(device)
                times = time_execution_with_cuda_event(custom_model, inputs, num_trials=num_perf_trials,
                                                       device=device)
                result["runtime_stats"] = get_timing_stats(times)
                result["runtime"] = result["runtime_stats"]["mean"]
            except Exception as e:
                result["metadata"]["error_during_performance"] = str(e)
        # eval.py:654: this part runs whenever performance is measured; on a
        # candidate that failed, result["runtime"] is -1 and the division below
        # gives a negative speedup (KernelBench's behaviour, kept)
        if measure_performance and check_for_excessive_speedup:
            _sync(device)
            set_seed(seed_num)
            inputs = [process_input(x, device, precision) for x in get_inputs()]
            _sync(device)
            times = time_execution_with_cuda_event(original_model, inputs, num_trials=num_perf_trials,
                                                   device=device)
            result["ref_runtime_stats"] = get_timing_stats(times)
            result["ref_runtime"] = result["ref_runtime_stats"]["mean"]
            speedup = result["ref_runtime"] / result["runtime"]
            if speedup > excessive_speedup_threshold:
                result["metadata"]["excessive_speedup"] = True
        return result
    finally:
        if _is_cuda(device):
            with torch.cuda.device(device):
                torch.cuda.empty_cache()
                torch.cuda.reset_peak_memory_stats(device=device)
                torch.cuda.synchronize(device=device)
        if tmp:
            os.remove(tmp)


def _child(original_src, custom_src, kw, env):
    os.environ.update(env)
    return eval_kernel_against_ref(original_src, custom_src, **kw)


def evaluate_in_fresh_process(original_src, custom_src, timeout_s=TIMEOUT_S, env=None, **kw):
    """One sample the way scripts/eval_from_generations.py:603-640 runs it: a
    spawned pool of one worker, the result awaited with a timeout. Returns
    (result or None, error text or None)."""
    ctx = mp.get_context("spawn")
    with ctx.Pool(1) as pool:
        job = pool.apply_async(_child, (original_src, custom_src, kw, env or {}))
        try:
            return job.get(timeout=timeout_s), None
        except mp.TimeoutError:
            return None, f"timeout after {timeout_s} s"
        except Exception as e:  # a crash of the worker, as eval_from_generations' outer catch
            return None, f"{_err(e)}: {e}"
