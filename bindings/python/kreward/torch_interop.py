"""PyTorch interop: golden outputs computed with torch on the library's own
inputs, and torch functions (eager or torch.compile) as timed baselines.

Both run in this process, on the same CUDA primary context as libkreward,
so device pointers are shared without copies."""
import ctypes

import torch

from .context import Baseline

TORCH_DTYPES = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16,
                "f64": torch.float64, "i8": torch.int8, "u8": torch.uint8, "i32": torch.int32,
                "i64": torch.int64, "bool": torch.bool, "fp8_e4m3": torch.float8_e4m3fn,
                "fp8_e5m2": torch.float8_e5m2}
# __cuda_array_interface__ has no bf16/fp8: those go through an integer view
_TYPESTR = {"f32": "<f4", "f16": "<f2", "bf16": "<i2", "f64": "<f8", "i8": "|i1", "u8": "|u1",
            "i32": "<i4", "i64": "<i8", "bool": "|b1", "fp8_e4m3": "|u1", "fp8_e5m2": "|u1"}


def _as_outputs(result, names):
    if isinstance(result, dict):
        return [result[n] for n in names]
    if isinstance(result, (tuple, list)):
        return list(result)
    return [result]


def golden_from_torch(problem, fn, device="cuda"):
    """Makes fn the problem's golden reference: fn(**inputs) returns the
    output tensor (or a tuple / {name: tensor} for several outputs, in-out
    tensors included). Inputs arrive as torch tensors on `device` holding
    exactly the bits the GPU generator produced."""
    tensors = problem.tensors()
    out_names = [n for n, _, role in tensors if role != "in"]

    def callback(req):
        inputs = {}
        for t, (name, dtype, role) in enumerate(tensors):
            if role == "out":
                continue
            shape = problem.shape(t, req.case)
            raw = torch.frombuffer(bytearray(req.inputs[name]), dtype=torch.uint8)
            inputs[name] = raw.view(TORCH_DTYPES[dtype]).reshape(shape).to(device)
        with torch.no_grad():
            outs = _as_outputs(fn(**inputs), out_names)
        if len(outs) != len(out_names):
            raise ValueError(f"fn returned {len(outs)} outputs, the problem has {len(out_names)}")
        for name, value in zip(out_names, outs):
            t = [n for n, _, _ in tensors].index(name)
            want = TORCH_DTYPES[tensors[t][1]]
            host = value.detach().to("cpu", want).contiguous()
            nbytes = host.numel() * host.element_size()
            dst = req.outputs[name]
            if nbytes != len(dst):
                raise ValueError(f"output '{name}' has {nbytes} bytes, the problem wants {len(dst)}")
            ctypes.memmove((ctypes.c_char * len(dst)).from_buffer(dst), host.data_ptr(), nbytes)

    problem.set_golden(callback)


class _Device:
    """A device buffer torch can wrap without a copy."""

    def __init__(self, ptr, shape, typestr):
        self.__cuda_array_interface__ = {"shape": tuple(shape), "typestr": typestr,
                                         "data": (ptr, False), "version": 3, "strides": None}


def tensor_at(ptr, shape, dtype):
    t = torch.as_tensor(_Device(ptr, shape, _TYPESTR[dtype]), device="cuda")
    return t.view(TORCH_DTYPES[dtype]) if dtype in ("bf16", "fp8_e4m3", "fp8_e5m2") else t


def torch_baseline(problem, fn, name=None, compile=False, case=None):
    """A baseline that runs fn(**inputs) with torch on the benchmark's own
    buffers and stream (torch.compile'd when compile=True), for the timing
    case unless another case is given. Warmed up here, so compilation never
    lands in a timed sample."""
    case = problem.timing_case if case is None else case
    tensors = problem.tensors()
    shapes = [problem.shape(t, case) for t in range(len(tensors))]
    out_names = [n for n, _, role in tensors if role != "in"]
    f = torch.compile(fn) if compile else fn

    def run(ptrs_or_tensors, from_ptrs):
        args = {}
        for t, (n, dtype, role) in enumerate(tensors):
            if role != "out":
                args[n] = (tensor_at(ptrs_or_tensors[t], shapes[t], dtype) if from_ptrs
                           else ptrs_or_tensors[t])
        outs = _as_outputs(f(**args), out_names)
        for n, value in zip(out_names, outs):
            t = [x for x, _, _ in tensors].index(n)
            dst = tensor_at(ptrs_or_tensors[t], shapes[t], tensors[t][1]) if from_ptrs else ptrs_or_tensors[t]
            dst.copy_(value.reshape(dst.shape))

    with torch.no_grad():  # warm-up: torch.compile compiles here
        dummy = [torch.randn(s, device="cuda").to(TORCH_DTYPES[d]) for s, (_, d, _) in zip(shapes, tensors)]
        run(dummy, False)
        torch.cuda.synchronize()

    def enqueue(stream, ptrs):
        with torch.no_grad(), torch.cuda.stream(torch.cuda.ExternalStream(stream)):
            run(ptrs, True)

    return Baseline(fn=enqueue, name=name or ("torch.compile" if compile else "torch eager"))
