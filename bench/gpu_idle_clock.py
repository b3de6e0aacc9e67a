#!/usr/bin/env python3
"""Does an idle gap before a timed batch slow the batch down, and does a
short spin on the GPU just before it (outside the clock) undo that?

The KernelBench runner times batches of ~10 ms with ~0.5 s of host work
between them (fresh inputs made, masked, staged). On the H200 (b8b392e,
bench/kernelbench_timing_noise.py) multi-kernel models of 150-550 us a call
varied up to 1.9x between batches of the same code in the same worker,
single-kernel problems within 9 %. If the GPU lowers its clocks while idle,
the first milliseconds of a batch run slow: this prints, per way of timing,
the per-call time of each batch (CUDA events) and the SM clock nvidia-smi
reports after the gap.

    python3 bench/gpu_idle_clock.py [--gap-s 0.5] [--batches 8]

Ways: back to back; after the gap; after the gap and a spin of N ms (a
single-thread torch.cuda._sleep, and a matmul burn). Needs a GPU (else it
says so and exits 0).

The H200 at d816279 said no: the SM clock read 1980 MHz after every gap,
and no spin narrowed the spread (back to back 1.14x max/min, after a gap
1.51x, after spins 1.32-1.63x). This model's calls are launch-bound (its
kernels take a fraction of a call), so its batches follow the host CPU;
a spin lets launches queue while the GPU is busy, which made some ways
faster, not steadier. Runner(spin_ms=) was tried in the same run and
removed (6 of 9 identical runs still outside [0.85, 1.15]).
"""
import argparse
import statistics
import subprocess
import time

from cuda_or_skip import cuda_torch


def sm_clock():
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=clocks.sm", "--format=csv,noheader,nounits",
                              "-i", "0"], capture_output=True, text=True, timeout=10).stdout
        return int(out.split()[0])
    except (OSError, ValueError, IndexError, subprocess.TimeoutExpired):
        return None


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--gap-s", type=float, default=0.5)
    p.add_argument("--batches", type=int, default=8)
    p.add_argument("--batch-ms", type=float, default=10.0)
    args = p.parse_args()
    torch = cuda_torch("gpu_idle_clock")
    if torch is None:
        return 0
    dev = "cuda"
    conv = torch.nn.Conv2d(3, 16, 3).to(dev)
    bias = torch.randn(16, 1, 1, device=dev)

    def model(x):  # level2/02's shape: conv, relu, bias add
        return torch.relu(conv(x)) + bias

    x = torch.randn(128, 3, 32, 32, device=dev)
    burn_a = torch.randn(4096, 4096, device=dev)
    with torch.no_grad():
        for _ in range(20):
            model(x)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(50):
            model(x)
        torch.cuda.synchronize()
        per_call = (time.perf_counter() - t0) / 50
        calls = max(2, int(args.batch_ms / 1e3 / per_call))
        # cycles per ms for _sleep: measured, not assumed
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        torch.cuda._sleep(1_000_000)
        e.record()
        torch.cuda.synchronize()
        cycles_per_ms = 1_000_000 / max(s.elapsed_time(e), 1e-3)

        def spin_sleep(ms):
            torch.cuda._sleep(int(ms * cycles_per_ms))

        def spin_burn(ms):
            t = time.perf_counter()
            while (time.perf_counter() - t) * 1e3 < ms:
                burn_a @ burn_a
                torch.cuda.synchronize()

        def batch():
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            for _ in range(calls):
                model(x)
            e.record()
            torch.cuda.synchronize()
            return s.elapsed_time(e) * 1e3 / calls

        ways = [("back to back", None, None), ("after the gap", None, 0)]
        for ms in (2, 10, 30):
            ways.append((f"gap, then _sleep {ms} ms", spin_sleep, ms))
            ways.append((f"gap, then matmul burn {ms} ms", spin_burn, ms))
        print(f"{calls} calls a batch (~{per_call * 1e6:.1f} us a call back to back), gap "
              f"{args.gap_s} s, {args.batches} batches a way; _sleep at {cycles_per_ms:.0f} cycles/ms")
        print("| way | median us | min | max | max/min | SM MHz after the gap |")
        print("|---|---|---|---|---|---|")
        for name, spin, ms in ways:
            times, clocks = [], []
            for _ in range(args.batches):
                if ms is not None:
                    time.sleep(args.gap_s)
                    clocks.append(sm_clock())
                    if spin:
                        spin(ms)
                times.append(batch())
            mhz = [c for c in clocks if c is not None]
            print(f"| {name} | {statistics.median(times):.1f} | {min(times):.1f} | {max(times):.1f} | "
                  f"{max(times) / min(times):.2f} | {statistics.median(mhz) if mhz else '-'} |",
                  flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
