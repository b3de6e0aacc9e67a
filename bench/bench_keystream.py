#!/usr/bin/env python3
"""What the KernelBench input region's mask costs (kernelbench/keystream.py).

The worker unmasks each call's inputs inside both clocks, so on a GPU the
mask's time is added to the baseline's and the candidate's alike and
squashes the speedups of memory-bound problems: it must stay close to one
pass over the bytes. On a GPU: every (kernel, programs, warps) variant of
keystream_triton.py (bits checked against torch's steps), torch's steps,
the first mask (XOR with a repeated 32 KB key) and a copy of the same
bytes, for --mb MB. Always: libkreward's kr_keystream_xor on the host, one
thread and all of torch's threads.

    KREWARD_LIBRARY=build/lib/libkreward.so.1 python3 bench/bench_keystream.py [--mb 64]
"""
import argparse
import importlib.util
import pathlib
import sys
import time

import torch

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bindings" / "python"))

from kreward import _lib  # noqa: E402
from kreward.kernelbench import keystream  # noqa: E402

try:  # the GPU's kernels, where Triton imports
    _spec = importlib.util.spec_from_file_location(
        "kt", ROOT / "bindings" / "python" / "kreward" / "kernelbench" / "keystream_triton.py")
    kt = importlib.util.module_from_spec(_spec)
    _spec.loader.exec_module(kt)
except ImportError:
    kt = None


def gpu_us(f, reps=20):
    f()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(reps):
        f()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / reps * 1e3


def host_us(f, reps=3):
    f()
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        f()
        best = min(best, time.perf_counter() - t0)
    return best * 1e6


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mb", type=int, default=64)
    args = ap.parse_args()
    n = args.mb << 20
    keystream.use_library(_lib.path)
    key = keystream.new_key()
    rows = []  # (what, where, us, note)
    host = torch.zeros(n, dtype=torch.uint8)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    rows.append(("kr_keystream_xor, 1 thread", "host", host_us(lambda: keystream.xor_(host, key, 0)), ""))
    torch.set_num_threads(threads)
    rows.append((f"kr_keystream_xor, {threads} threads", "host",
                 host_us(lambda: keystream.xor_(host, key, 0)), ""))
    copy_us = None
    if torch.cuda.is_available() and kt is not None:
        data = torch.randint(0, 255, (n,), dtype=torch.uint8, device="cuda")
        words = data.view(torch.int32)
        dkey = keystream.new_key("cuda")
        copy_us = gpu_us(lambda: torch.empty_like(data).copy_(data))
        rows.append(("copy", "gpu", copy_us, "one read, one write"))
        rep = torch.randint(-2**62, 2**62, (4096,), dtype=torch.int64, device="cuda")
        rows.append(("xor, 32 KB key repeated (the first mask)", "gpu",
                     gpu_us(lambda: data.view(torch.int64).view(-1, 4096).bitwise_xor_(rep)), ""))
        # ragged; across the counter's wrap (Triton's int64 variant) and from
        # a small first block (int32, the variant timed below and run on spans)
        spans = [((1 << 32) - 2000, 4099), (7, 4099)]
        wants = [keystream.keystream_words(dkey.words, f, b, keystream.ROUNDS, "cuda") for f, b in spans]
        chosen = kt.CHOICES
        variants = [(k, b, w) for k in (kt.chacha_xor_tile_kernel, kt.chacha_xor_joined_kernel)
                    for b in (64, 128, 256) for w in (2, 4, 8)]
        variants += [c for c in chosen if c not in variants]
        for kernel, block, warps in variants:
            kt.CHOICES = ((kernel, block, warps),)
            ok = True
            try:
                for (first, blocks), want in zip(spans, wants):
                    check = torch.zeros(blocks * 16, dtype=torch.int32, device="cuda")
                    kt.chacha_xor(check, dkey.on_device, first, keystream.ROUNDS)
                    ok = ok and torch.equal(check, want)
            except Exception as e:  # noqa: BLE001
                rows.append((f"{kernel.__name__} {block}x{warps}", "gpu", float("nan"),
                             f"{type(e).__name__}"))
                continue
            us = gpu_us(lambda: kt.chacha_xor(words, dkey.on_device, 0, keystream.ROUNDS))
            mark = " (CHOICES)" if (kernel, block, warps) in chosen else ""
            rows.append((f"{kernel.__name__} {block} blocks x {warps} warps{mark}", "gpu",
                         us, "same bits" if ok else "WRONG BITS"))
        kt.CHOICES = chosen
        rows.append(("torch steps", "gpu", gpu_us(lambda: keystream._torch_xor(
            words, dkey.words, 0, keystream.ROUNDS), reps=3), ""))
    print(f"the input region's mask over {args.mb} MB (ChaCha{keystream.ROUNDS})")
    print("| mask | where | us | GB/s | x copy | note |")
    print("|---|---|---|---|---|---|")
    for what, where, us, note in rows:
        ratio = f"{us / copy_us:.2f}" if copy_us and where == "gpu" else ""
        print(f"| {what} | {where} | {us:.1f} | {n / us / 1e3:.1f} | {ratio} | {note} |")
    if copy_us is None:
        print("(no GPU: the device rows need one)")


if __name__ == "__main__":
    main()
