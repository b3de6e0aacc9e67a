#!/usr/bin/env python3
"""Is a launch-bound call's speed a property of the process (where it
runs), and does pinning the processes to the same cores remove it?

On the H200 at 58014c7 identical fresh processes timing the same chain of
small ops gave 563-871 us a call (bench/profiler_after_cost.py's "before"
column): the ModelNew runner times each candidate in a fresh process and
the baseline in a long-lived one, so a process's luck would be the
speedup's noise (docs/kernelbench.md, "timing noise"). This starts
--procs fresh processes per way, each timing the chain (median of 7
rounds), and prints the spread across processes:
  free       the scheduler places them (today's workers);
  local1     pinned to one CPU of the GPU's NUMA node (its local_cpulist);
  local4     pinned to four of them;
  far1       pinned to one CPU outside it (when the machine has one);
  fixed      free, with the address space's layout not randomised
             (personality ADDR_NO_RANDOMIZE, as setarch -R): is the luck
             where the process's memory lies?

On the H200 (16 CPUs, all local to the GPU), at 277cab9: free 640-942 us
(1.47x max/min), local1 715-1027 (1.44x), local4 636-987 (1.55x); at
91af0ed: free 653-941 (1.44x), fixed 613-881 (1.44x). Neither pinning nor
a fixed layout removes it.

    python3 bench/process_placement.py [--procs 6] [--ops 40]

Needs a GPU and torch (else it says so and exits 0)."""
import argparse
import json
import os
import statistics
import subprocess
import sys

from cuda_or_skip import cuda_torch

CHILD = r"""
import json, os, statistics, sys, time
cpus = sys.argv[3]
if cpus:
    os.sched_setaffinity(0, {int(c) for c in cpus.split(",")})
import torch
calls, ops = int(sys.argv[1]), int(sys.argv[2])
x = torch.randn(256, 256, device="cuda")

def per_call_us():
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(calls):
        y = x
        for _ in range(ops):
            y = y * 1.0001 + 0.0001
    torch.cuda.synchronize()
    return (time.perf_counter() - t) * 1e6 / calls

for _ in range(3):
    per_call_us()
print(json.dumps({"us": statistics.median(per_call_us() for _ in range(7)),
                  "cpus": sorted(os.sched_getaffinity(0))[:8]}))
"""


ADDR_NO_RANDOMIZE = 0x0040000


def fixed_layout():
    """In the child before exec: no address space randomisation."""
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    libc.personality(ADDR_NO_RANDOMIZE)


def parse_cpulist(text):
    cpus = set()
    for part in text.strip().split(","):
        if "-" in part:
            lo, hi = part.split("-")
            cpus.update(range(int(lo), int(hi) + 1))
        elif part:
            cpus.add(int(part))
    return cpus


def gpu_local_cpus(torch):
    """The CPUs of the GPU's NUMA node (sysfs), within this process's own
    affinity; all of them when sysfs does not say."""
    allowed = os.sched_getaffinity(0)
    p = torch.cuda.get_device_properties(0)
    bus = getattr(p, "pci_bus_id", None)
    if bus is not None:
        bdf = f"{getattr(p, 'pci_domain_id', 0):04x}:{bus:02x}:{getattr(p, 'pci_device_id', 0):02x}.0"
        try:
            with open(f"/sys/bus/pci/devices/{bdf}/local_cpulist") as f:
                local = parse_cpulist(f.read()) & allowed
            if local:
                return sorted(local), bdf
        except OSError:
            pass
    return sorted(allowed), None


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--procs", type=int, default=6)
    ap.add_argument("--calls", type=int, default=300)
    ap.add_argument("--ops", type=int, default=40)
    ap.add_argument("--ways", nargs="*", help="the ways to run (default: all)")
    args = ap.parse_args(argv)
    torch = cuda_torch("process_placement")
    if torch is None:
        return 0
    local, bdf = gpu_local_cpus(torch)
    allowed = sorted(os.sched_getaffinity(0))
    far = [c for c in allowed if c not in local]
    print(f"GPU {bdf or '(bus unknown)'}: local CPUs {local[:32]}, {len(allowed)} allowed here")
    # the last local CPUs: the first ones take more of the machine's interrupts
    ways = [("free", ""), ("local1", str(local[-1])),
            ("local4", ",".join(map(str, local[-4:])))]
    if far:
        ways.append(("far1", str(far[-1])))
    ways.append(("fixed", ""))
    if args.ways:
        ways = [w for w in ways if w[0] in args.ways]
    print("| way | procs | median us/call | min | max | max/min |")
    print("|---|---|---|---|---|---|")
    for name, cpus in ways:
        got = []
        for _ in range(args.procs):
            out = subprocess.run([sys.executable, "-c", CHILD, str(args.calls), str(args.ops), cpus],
                                 capture_output=True, text=True, timeout=300,
                                 preexec_fn=fixed_layout if name == "fixed" else None)
            if out.returncode == 0:
                got.append(json.loads(out.stdout.strip().splitlines()[-1])["us"])
        if got:
            print(f"| {name} | {len(got)} | {statistics.median(got):.1f} | {min(got):.1f} | "
                  f"{max(got):.1f} | {max(got) / min(got):.3f}x |", flush=True)
        else:
            print(f"| {name} | 0 | failed: {out.stderr.strip()[-200:]} | | | |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
