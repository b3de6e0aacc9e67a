#!/usr/bin/env python3
"""bench/timing vs triton.testing.do_bench, side by side in one run (GPU).

The same torch operations timed three ways: libkreward's benchmark (the
operation as a callback baseline: cold L2, launch latency hidden, CUPTI
time), triton.testing.do_bench's default (the mean, warm-up 25 ms, rep
100 ms, L2 flushed outside the timed events), and do_bench's median.
CUPTI's duration of the same kernels under kr's conditions is kr's number;
do_bench adds launch latency on short kernels."""
import os
import sys

import torch
import triton

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "bindings", "python"))
import kreward  # noqa: E402
from kreward.torch_interop import golden_from_torch, torch_baseline  # noqa: E402

PROBLEM = {"name": "op", "dims": ["N"], "cases": [{"name": "c", "N": 0, "timing": True}],
           "tensors": [{"name": "x", "dtype": "f32", "shape": ["N"], "role": "in"},
                       {"name": "y", "dtype": "f32", "shape": ["N"], "role": "out"}],
           "reference": {"golden": True}}
COPY = ('// kreward: launch k grid=(cdiv(N,256)) block=(256) args=(x, y, N)\n'
        'extern "C" __global__ void k(const float* x, float* y, long long n) {'
        ' long long i = blockIdx.x * 256ll + threadIdx.x; if (i < n) y[i] = x[i]; }\n')

ROWS = [("x * 2, 1K floats", 1024, lambda x: x * 2),
        ("x * 2, 1M floats", 1 << 20, lambda x: x * 2),
        ("x * 2, 64M floats", 1 << 26, lambda x: x * 2),
        ("cumsum, 16M floats", 1 << 24, lambda x: torch.cumsum(x, 0)),
        ("matmul 2048 (as 4M floats)", 2048 * 2048, lambda x: (x.view(2048, 2048) @ x.view(2048, 2048)).view(-1))]

print("| op | kr (CUPTI, cold) us | do_bench mean us | do_bench median us | mean - kr us |")
print("|---|---|---|---|---|")
with kreward.Context() as ctx:
    prog = ctx.compile(COPY)
    plan = ctx.plan_from_source(COPY)
    for label, n, f in ROWS:
        spec = dict(PROBLEM, cases=[{"name": "c", "N": n, "timing": True}])
        problem = ctx.parse_problem(spec)
        # the benchmark checks sampled timed outputs of the candidate (a copy)
        # against the problem's reference: here the identity, from torch
        golden_from_torch(problem, lambda x: x.clone())
        base = torch_baseline(problem, f, name=label)
        r = ctx.benchmark(problem, prog, plan, preset="precise", baseline=base, max_time_s=3.0)
        x = torch.randn(n, device="cuda")
        mean = triton.testing.do_bench(lambda: f(x)) * 1e3
        med = triton.testing.do_bench(lambda: f(x), return_mode="median") * 1e3
        print(f"| {label} | {r['baseline_us']:.2f} | {mean:.2f} | {med:.2f} | {mean - r['baseline_us']:+.2f} |")
        r.close()
        problem.close()
