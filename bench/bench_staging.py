#!/usr/bin/env python3
"""What a KernelBench batch's staging costs, and what it could cost.

On a GPU the Runner makes a batch's inputs on the device, masks them, and
copies each call's span into the input region (a memfd shared with the
worker, pageable host memory); the worker then copies the region into its
own device buffer (`stage`). On the H200 (5e44df2) a 4096^2 relu spent
16.5 s of its evaluation in the candidate's timed phase and 16.3 s in the
baseline's: six batches of ~2 GB a side, each crossing host memory twice.

This times one batch of --gb GiB three ways, caller side and worker side
(a second process mapping the same memfd, as the worker does):
  pageable    today's path: device -> region, region -> device;
  registered  the same with the region registered (cudaHostRegister) in
              both processes, so the copies are DMA (registering is timed
              too: a worker registers its region once);
  ipc         no host memory: the caller's masked device buffer exported
              with a CUDA IPC handle, the worker copies device to device;
  shared      what the Runner does since 00f00f2 (cuda_ipc.py): a 32 MiB
              buffer of the worker's own, its descriptor passed at the
              worker's start, each masked piece copied into it and staged
              by the worker on request (a round trip a piece).
--sandbox: the worker side enters the ModelNew worker's "start" sandbox
(kernelbench/confine.py) before CUDA, to show whether registration and
IPC work in it. Needs a GPU and torch (else it says so and exits 0).

    KREWARD_LIBRARY=build/lib/libkreward.so.1 python3 bench/bench_staging.py [--gb 2] [--sandbox]
"""
import argparse
import json
import mmap
import os
import subprocess
import sys
import tempfile
import time

from cuda_or_skip import cuda_torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CHUNK = 64 << 20  # a 4096^2 fp32 call's input
SHARED = 32 << 20  # processes.py SHARED_BYTES

WORKER = r"""
import json, mmap, os, sys, time
fd, size, way, sandbox, root = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
if sandbox:
    import importlib.util
    spec = importlib.util.spec_from_file_location(
        "confine", os.path.join(root, "bindings", "python", "kreward", "kernelbench", "confine.py"))
    confine = importlib.util.module_from_spec(spec); spec.loader.exec_module(confine)
    confine.enter(os.environ["KREWARD_LIBRARY"], confine.spec(sandbox, True, True))
import torch
dev = torch.empty(size, dtype=torch.uint8, device="cuda")
out = {}
if way == "shared":  # fd: the caller's buffer's descriptor (cuda_ipc.py, loaded by path)
    import importlib.util
    spec = importlib.util.spec_from_file_location(
        "cuda_ipc", os.path.join(root, "bindings", "python", "kreward", "kernelbench", "cuda_ipc.py"))
    cuda_ipc = importlib.util.module_from_spec(spec); spec.loader.exec_module(cuda_ipc)
    torch.empty(1, device="cuda")
    shared = cuda_ipc.WorkerMapping(torch, "cuda", fd, int(sys.argv[6]))
    os.close(fd)
else:
    region = mmap.mmap(fd, size)
    host = torch.frombuffer(region, dtype=torch.uint8, count=size)
if way == "registered":
    t = time.perf_counter()
    rc = torch.cuda.cudart().cudaHostRegister(host.data_ptr(), size, 0)
    out["register_s"] = time.perf_counter() - t
    out["register_rc"] = int(rc)
for line in sys.stdin:  # one line a batch: "go" (or an IPC handle)
    msg = json.loads(line)
    torch.cuda.synchronize()
    t = time.perf_counter()
    if way == "ipc":
        h = msg["handle"]
        # _share_cuda_'s tuple: device, handle, size, offset, ref counter
        # handle, its offset, event handle, event sync (the byte strings hex)
        b = lambda x: bytes.fromhex(x) if x is not None else None
        st = torch.UntypedStorage._new_shared_cuda(h[0], b(h[1]), h[2], h[3], b(h[4]), h[5],
                                                  b(h[6]), h[7])
        src = torch.empty(0, dtype=torch.uint8, device="cuda").set_(st)
        dev.copy_(src[:size])
    elif way == "shared":  # one piece: "at", "n"
        dev[msg["at"]:msg["at"] + msg["n"]].copy_(shared.tensor[:msg["n"]])
    else:
        dev.copy_(host)
    torch.cuda.synchronize()
    out.setdefault("copy_s", []).append(time.perf_counter() - t)
    print(json.dumps({"ok": True}), flush=True)
print(json.dumps(out), flush=True)
"""


def _cuda_ipc():
    """kernelbench/cuda_ipc.py, loaded by path as the worker loads it."""
    import importlib.util
    spec = importlib.util.spec_from_file_location(
        "cuda_ipc", os.path.join(ROOT, "bindings", "python", "kreward", "kernelbench", "cuda_ipc.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def one_way(torch, args, way, size, masked):
    """One way's row: (way, caller s/GiB, worker s/GiB, register s, rcs),
    or (way, why it failed). For "shared" the caller's seconds hold the
    worker's copies too (a round trip a piece): its "both" is the caller's."""
    caller, extra, buf, region, host = {}, [], None, None, None
    if way == "shared":
        try:
            buf = _cuda_ipc().CallerBuffer(torch, "cuda", SHARED)
            fd = buf.export()
        except Exception as e:  # noqa: BLE001 - the row says why
            if buf is not None:
                buf.close()
            return (way, f"failed: {type(e).__name__}: {e}")
        extra = [str(buf.nbytes)]
    else:
        fd = os.memfd_create("kreward-bench-staging", os.MFD_CLOEXEC)
        os.ftruncate(fd, size)
        region = mmap.mmap(fd, size)
        host = torch.frombuffer(region, dtype=torch.uint8, count=size)
    if way == "registered":
        t = time.perf_counter()
        caller["register_rc"] = int(torch.cuda.cudart().cudaHostRegister(host.data_ptr(), size, 0))
        caller["register_s"] = time.perf_counter() - t
    try:
        with tempfile.TemporaryDirectory() as write_dir:
            w = subprocess.Popen([sys.executable, "-c", WORKER, str(fd), str(size), way,
                                  write_dir if args.sandbox else "", ROOT, *extra],
                                 pass_fds=(fd,), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True)

            def ask(msg):
                w.stdin.write(json.dumps(msg) + "\n")
                w.stdin.flush()
                if not json.loads(w.stdout.readline()).get("ok"):
                    raise RuntimeError("the worker side failed")

            caller_s = []
            try:
                for _ in range(args.batches):
                    torch.cuda.synchronize()
                    t = time.perf_counter()
                    if way == "shared":  # a piece at a time, as transfer.py put does
                        for a in range(0, size, buf.nbytes):
                            n = min(buf.nbytes, size - a)
                            buf.tensor[:n].copy_(masked[a:a + n])
                            torch.cuda.current_stream().synchronize()
                            ask({"at": a, "n": n})
                        caller_s.append(time.perf_counter() - t)
                        continue
                    if way == "ipc":
                        st = masked.untyped_storage()._share_cuda_()
                        msg = {"handle": [x.hex() if isinstance(x, bytes) else x for x in st]}
                    else:  # the call's spans, one copy each, as write_region does
                        for a in range(0, size, CHUNK):
                            host[a:a + CHUNK].copy_(masked[a:a + CHUNK])
                        msg = {}
                    torch.cuda.synchronize()
                    caller_s.append(time.perf_counter() - t)  # the worker's side is its own
                    ask(msg)
                w.stdin.close()
                worker = json.loads(w.stdout.readline())
                w.wait(timeout=60)
            except (RuntimeError, ValueError, OSError, subprocess.TimeoutExpired) as e:
                w.kill()
                return (way, f"failed: {e}: {w.stderr.read()[-300:]}")
    finally:
        if way == "registered":
            torch.cuda.cudart().cudaHostUnregister(host.data_ptr())
        del host
        if region is not None:
            region.close()
        if buf is not None:
            buf.close()
        os.close(fd)
    gb = size / (1 << 30)
    if way == "shared":  # the worker's copies, a batch's pieces together
        k = sum(worker["copy_s"]) / args.batches / gb
        c = min(caller_s) / gb - k
    else:
        c, k = min(caller_s) / gb, min(worker["copy_s"]) / gb
    reg = (caller.get("register_s", 0.0), worker.get("register_s", 0.0))
    return (way, c, k, reg, (caller.get("register_rc"), worker.get("register_rc")))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--gb", type=float, default=2.0, help="one batch's inputs, GiB")
    p.add_argument("--batches", type=int, default=3)
    p.add_argument("--sandbox", action="store_true", help="the worker side in the start sandbox")
    args = p.parse_args()
    torch = cuda_torch("bench_staging")
    if torch is None:
        return 0
    if args.sandbox and not os.environ.get("KREWARD_LIBRARY"):
        print("bench_staging: --sandbox needs KREWARD_LIBRARY")
        return 2
    size = int(args.gb * (1 << 30)) // CHUNK * CHUNK
    masked = torch.randint(0, 255, (size,), dtype=torch.uint8, device="cuda")  # the caller's
    rows = []
    for way in ("pageable", "registered", "ipc", "shared"):
        row = one_way(torch, args, way, size, masked)
        rows.append(row)
    print(f"one batch of {size / (1 << 30):.2f} GiB, best of {args.batches}; worker side "
          f"{'in the start sandbox' if args.sandbox else 'not sandboxed'}")
    print("| way | caller s/GiB | worker s/GiB | both s/GiB | vs pageable | register s (caller, worker) |")
    print("|---|---|---|---|---|---|")
    base = next((r[1] + r[2] for r in rows if r[0] == "pageable" and len(r) > 2), None)
    for r in rows:
        if len(r) == 2:
            print(f"| {r[0]} | {r[1]} | | | | |")
            continue
        way, c, k, reg, rcs = r
        ratio = f"{base / (c + k):.1f}x" if base else "-"
        regs = f"{reg[0]:.3f}, {reg[1]:.3f} (rc {rcs[0]}, {rcs[1]})" if way == "registered" else ""
        print(f"| {way} | {c:.3f} | {k:.3f} | {c + k:.3f} | {ratio} | {regs} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
