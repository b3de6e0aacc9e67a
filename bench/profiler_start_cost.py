#!/usr/bin/env python3
"""What attributing a ModelNew call's kernels costs, part by part.

The ModelNew evaluation's `attribute` phase (3.5-5.8 s a candidate on the
H200 at c95ccb7) profiles one call with torch.profiler in the candidate's
fresh worker. This splits that into its parts, in a fresh process each
(as a candidate's worker is): torch.profiler's first session (enter, the
call, exit, events()), a second session, and, in another fresh process,
CUPTI alone through its C API (load libcupti, enable kernel activity, the
call, flush): what the library's own trace would pay instead.

    python3 bench/profiler_start_cost.py [--size 4096]

Needs a GPU and torch (else it says so and exits 0)."""
import argparse
import json
import subprocess
import sys

from cuda_or_skip import cuda_torch

TORCH_CHILD = r"""
import json, sys, time
import torch
from torch.profiler import ProfilerActivity, profile
n = int(sys.argv[1])
x = torch.randn(n, n, device="cuda")
torch.relu(x); torch.cuda.synchronize()
out = {}
for k in (1, 2):
    t0 = time.perf_counter()
    p = profile(activities=[ProfilerActivity.CUDA])
    p.__enter__()
    t1 = time.perf_counter()
    torch.relu(x); torch.cuda.synchronize()
    t2 = time.perf_counter()
    p.__exit__(None, None, None)
    t3 = time.perf_counter()
    names = {e.name for e in p.events() if e.device_type == torch.autograd.DeviceType.CUDA}
    t4 = time.perf_counter()
    out[f"session{k}"] = {"enter_s": t1 - t0, "call_s": t2 - t1, "exit_s": t3 - t2,
                          "events_s": t4 - t3, "kernels": sorted(names)[:3]}
small = torch.randn(256, device="cuda")
torch.relu(small); torch.cuda.synchronize()
t = time.perf_counter()
for _ in range(3000):
    torch.relu(small)
torch.cuda.synchronize()
out["launch_us_after_sessions"] = (time.perf_counter() - t) / 3000 * 1e6
print(json.dumps(out))
"""

CUPTI_CHILD = r"""
import ctypes, ctypes.util, glob, json, os, sys, time
import torch
n = int(sys.argv[1])
x = torch.randn(n, n, device="cuda")
small = torch.randn(256, device="cuda")
torch.relu(x); torch.cuda.synchronize()

def launch_us(k=3000):
    # a launch-bound loop: what a lasting CUPTI costs every later launch
    torch.relu(small); torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(k):
        torch.relu(small)
    torch.cuda.synchronize()
    return (time.perf_counter() - t) / k * 1e6

before_us = launch_us()
t0 = time.perf_counter()
cands = []
with open("/proc/self/maps") as maps:  # torch's own libcupti when it has loaded one
    cands += sorted({l.split()[-1] for l in maps if "libcupti.so" in l})
for base in (os.environ.get("CUDA_HOME", "/usr/local/cuda"), "/usr/local/cuda"):
    cands += glob.glob(os.path.join(base, "extras/CUPTI/lib64/libcupti.so*"))
    cands += glob.glob(os.path.join(base, "lib64/libcupti.so*"))
import site
for sp in site.getsitepackages():
    cands += glob.glob(os.path.join(sp, "nvidia/*/lib/libcupti.so*"))
cupti = None
for c in cands + ["libcupti.so"]:
    try:
        cupti = ctypes.CDLL(c); break
    except OSError:
        pass
if cupti is None:
    print(json.dumps({"error": "no libcupti"})); sys.exit(0)
t1 = time.perf_counter()
BUF = 1 << 20
bufs = []
REQ = ctypes.CFUNCTYPE(None, ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_size_t),
                       ctypes.POINTER(ctypes.c_size_t))
DONE = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_uint32, ctypes.c_void_p, ctypes.c_size_t,
                        ctypes.c_size_t)
records = [0]
def req(buf, size, maxr):
    b = ctypes.create_string_buffer(BUF + 8); bufs.append(b)
    addr = (ctypes.addressof(b) + 7) & ~7
    buf[0] = addr; size[0] = BUF; maxr[0] = 0
def done(ctx, stream, buf, size, valid):
    records[0] += valid
rq, dn = REQ(req), DONE(done)
rc1 = cupti.cuptiActivityRegisterCallbacks(rq, dn)
rc2 = cupti.cuptiActivityEnable(10)  # CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL
t2 = time.perf_counter()
torch.relu(x); torch.cuda.synchronize()
t3 = time.perf_counter()
rc3 = cupti.cuptiActivityFlushAll(1)
t4 = time.perf_counter()
during_us = launch_us()
cupti.cuptiActivityDisable(10)
cupti.cuptiActivityFlushAll(1)
after_us = launch_us()  # enabled once, now off: does CUPTI still cost a launch?
t5 = time.perf_counter()
cupti.cuptiActivityEnable(10)
t6 = time.perf_counter()
torch.relu(x); torch.cuda.synchronize()
cupti.cuptiActivityFlushAll(1)
t7 = time.perf_counter()
cupti.cuptiActivityDisable(10)
rc4 = cupti.cuptiFinalize()
t8 = time.perf_counter()
final_us = launch_us()
print(json.dumps({"lib": c, "load_s": t1 - t0, "enable_s": t2 - t1, "call_s": t3 - t2,
                  "flush_s": t4 - t3, "enable2_s": t6 - t5, "call_flush2_s": t7 - t6,
                  "finalize_s": t8 - t7, "launch_us_before": before_us,
                  "launch_us_traced": during_us, "launch_us_after_disable": after_us,
                  "launch_us_after_finalize": final_us,
                  "rc": [rc1, rc2, rc3, rc4], "valid_bytes": records[0]}))
"""


def child(code, size):
    r = subprocess.run([sys.executable, "-c", code, str(size)], capture_output=True, text=True,
                       timeout=300)
    if r.returncode != 0:
        return {"error": r.stderr[-800:]}
    return json.loads(r.stdout.strip().splitlines()[-1])


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--size", type=int, default=4096)
    p.add_argument("--repeat", type=int, default=2)
    a = p.parse_args()
    if cuda_torch("profiler_start_cost") is None:
        return 0
    print(f"{'process':<10} {'what':<24} {'s':>8}")
    for r in range(a.repeat):
        t = child(TORCH_CHILD, a.size)
        if "error" in t:
            print(f"torch child failed: {t['error']}")
        else:
            print(f"torch#{r:<4} {'launch_us_after_sessions':<24} {t.pop('launch_us_after_sessions'):8.2f}")
            for k, v in t.items():
                for part in ("enter_s", "call_s", "exit_s", "events_s"):
                    print(f"torch#{r:<4} {k + ' ' + part:<24} {v[part]:8.3f}")
        c = child(CUPTI_CHILD, a.size)
        if "error" in c:
            print(f"cupti child: {c['error']}")
        else:
            for part in ("load_s", "enable_s", "call_s", "flush_s", "enable2_s", "call_flush2_s",
                         "finalize_s"):
                print(f"cupti#{r:<4} {part:<24} {c[part]:8.3f}")
            for part in ("launch_us_before", "launch_us_traced", "launch_us_after_disable",
                         "launch_us_after_finalize"):
                print(f"cupti#{r:<4} {part:<24} {c[part]:8.2f}")
            print(f"cupti#{r:<4} {c['lib']} rc {c['rc']} valid bytes {c['valid_bytes']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
