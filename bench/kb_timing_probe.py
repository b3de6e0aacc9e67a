#!/usr/bin/env python3
"""Where a KernelBench timed batch's per-call time goes, and why it spreads.

A one-process replica of worker.go (the same modules, loaded by path as the
worker loads them: inputs.py, keystream.py, keystream_triton.py,
commit_triton.py) for three of issue 31's problems (softmax 4096^2,
layernorm 4096x1024, gemm_bias_relu 1024x2048->1024), with per-batch stamps
the real worker does not report:

  host_launch_us   the loop's host time (mask launch + forward per call)
  sync_wait_us     how long the sync after the loop waited (~0: the loop was
                   host-bound; large: the GPU was behind, i.e. GPU-bound)
  commit_host_us   the commitment's host time (launches), commit_wait_us its wait
  gpu_calls_us     CUDA events around the calls (on the current stream)
  thread_cpu_us    the thread's CPU time over the batch (vs wall: preemption)
  nivcsw, nvcsw    involuntary / voluntary context switches during the batch
  runq_wait_us     schedstat: time runnable but not running during the batch
  cpu0, cpu1       the CPU the thread was on at start and end
  sm_mhz0/1, reasons0/1   NVML SM clock and clocks-event reasons before/after
  py_probe_us      a fixed pure-Python loop timed right after the batch (host speed)

Variants per problem:
  before  as worker.go was up to 3d5e1ff: the unmask through Triton's JIT
          launch, torch.func.functional_call for lifted weights, the
          commitment per output column (inputs.sums_of_many)
  now     as worker.go is: the unmask's compiled kernel launched directly
          (keystream.py), the weights put into the model's slots
          (weight_slots.py), the whole batch's commitment in one launch
          over a table of output addresses (inputs.sums_of_table; its bits
          against inputs.sums checked here once)
and gaps between batches: sleep 25 ms (the caller's staging: the worker
blocks), or spin 25 ms (the worker busy-polls), or none.

Also: kernel-only GPU times with the queue pre-filled by torch.cuda._sleep
(host launch cost hidden) and the host cost per launch, for: a 64 MB copy,
the 64 MB unmask (per call) and the 2 GiB one (whole batch), inputs.sums of
64 MB (the 82.5 us of test_attacks_gpu is launch + kernel, not kernel
alone), the batched table commitment, softmax, layernorm, gemm.

    python3 kb_timing_probe.py [--batches 15] [--gap-ms 25] [--only softmax,...]
        [--pin CPU] [--out FILE.json]
    python3 kb_timing_probe.py --cpu-dry-run     # tiny shapes, no GPU: checks the script runs

Standalone: nothing of the caller, no IPC, no sandbox. If this process shows
the same two levels as the kbbatch reports, the spread is the host's or the
GPU's and not the harness's IPC; if `now` is flat where `before` spreads, the
harness's per-call host work is what exposes the loop to host speed."""
import argparse
import ctypes
import gc
import importlib.util
import json
import os
import resource
import statistics
import threading
import time

def _root():
    """The repository: KREWARD_ROOT, else the folder above this file's (bench/),
    else the current directory, else /work/main."""
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    for r in (os.environ.get("KREWARD_ROOT"), here, os.getcwd(), "/work/main"):
        if r and os.path.isdir(os.path.join(r, "bindings", "python", "kreward", "kernelbench")):
            return r
    raise SystemExit("no kreward checkout found (set KREWARD_ROOT)")


ROOT = _root()
KB = os.path.join(ROOT, "bindings", "python", "kreward", "kernelbench")


def load(name):
    spec = importlib.util.spec_from_file_location("probe_" + name, os.path.join(KB, name + ".py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


import torch  # noqa: E402

inputs = load("inputs")
keystream = inputs._keystream

_libc = ctypes.CDLL(None, use_errno=True)


def sched_getcpu():
    try:
        return _libc.sched_getcpu()
    except Exception:  # noqa: BLE001
        return -1


def schedstat():
    try:
        with open(f"/proc/self/task/{threading.get_native_id()}/schedstat") as f:
            run, wait, _ = f.read().split()
        return int(run), int(wait)
    except Exception:  # noqa: BLE001
        return 0, 0


def steal_ticks():
    """{cpu: (busy, steal, total)} ticks from /proc/stat."""
    out = {}
    with open("/proc/stat") as f:
        for line in f:
            if line.startswith("cpu") and line[3].isdigit():
                p = line.split()
                v = [int(x) for x in p[1:]]
                busy = v[0] + v[1] + v[2] + v[5] + v[6]
                out[int(p[0][3:])] = (busy, v[7] if len(v) > 7 else 0, sum(v[:8]))
    return out


VMSTAT_KEYS = ("numa_hint_faults", "numa_hint_faults_local", "numa_pages_migrated", "thp_fault_alloc",
               "thp_collapse_alloc", "pgmigrate_success", "compact_stall")


def vmstat():
    """System-wide counters that add page faults or migrations to a running
    process (NUMA balancing's hinting faults, THP collapses, compaction)."""
    out = {}
    try:
        with open("/proc/vmstat") as f:
            for line in f:
                k, v = line.split()
                if k in VMSTAT_KEYS:
                    out[k] = int(v)
    except OSError:
        pass
    return out


class NVML:
    """SM clock and clocks-event reasons through libnvidia-ml (ctypes)."""

    def __init__(self):
        self.h = None
        try:
            lib = ctypes.CDLL("libnvidia-ml.so.1")
            if lib.nvmlInit_v2() != 0:
                return
            h = ctypes.c_void_p()
            bus = None
            try:
                bus = torch.cuda.get_device_properties(0).pci_bus_id  # torch >= 2.5
            except Exception:  # noqa: BLE001
                pass
            rc = 1
            if bus:
                rc = lib.nvmlDeviceGetHandleByPciBusId_v2(str(bus).encode(), ctypes.byref(h))
            if rc != 0:
                rc = lib.nvmlDeviceGetHandleByIndex_v2(0, ctypes.byref(h))
            if rc == 0:
                self.lib, self.h = lib, h
                fn = getattr(lib, "nvmlDeviceGetCurrentClocksEventReasons", None) or \
                    getattr(lib, "nvmlDeviceGetCurrentClocksThrottleReasons")
                self.reasons_fn = fn
        except Exception:  # noqa: BLE001
            self.h = None

    def read(self):
        if self.h is None:
            return None, None
        mhz, r = ctypes.c_uint(), ctypes.c_ulonglong()
        self.lib.nvmlDeviceGetClockInfo(self.h, 1, ctypes.byref(mhz))  # NVML_CLOCK_SM
        self.reasons_fn(self.h, ctypes.byref(r))
        return mhz.value, hex(r.value)


def expand_cpulist(text):
    cpus = []
    for part in text.strip().split(","):
        if "-" in part:
            a, b = part.split("-")
            cpus += range(int(a), int(b) + 1)
        elif part:
            cpus.append(int(part))
    return cpus


def gpu_local_cpu():
    """A CPU on the GPU's NUMA node (the second of its local list, leaving
    the first to the system), as a string for --pin; '' if unknown."""
    import subprocess
    try:
        bus = subprocess.run(["nvidia-smi", "--query-gpu=pci.bus_id", "--format=csv,noheader", "-i", "0"],
                             capture_output=True, text=True, timeout=20).stdout.strip().lower()
        bus = bus[-12:]  # 00000000:19:00.0 -> 0000:19:00.0
        with open(f"/sys/bus/pci/devices/{bus}/local_cpulist") as f:
            cpus = [c for c in expand_cpulist(f.read()) if c in os.sched_getaffinity(0)]
        return str(cpus[1] if len(cpus) > 1 else cpus[0]) if cpus else ""
    except Exception:  # noqa: BLE001
        return ""


def py_probe():
    t = time.perf_counter()
    s = 0
    for i in range(20000):
        s += i & 7
    return (time.perf_counter() - t) * 1e6


# ------------------------------------------------------------------ problems
def problems(dry):
    if dry:
        return {"softmax": ((64, 64), None), "layernorm": ((64, 32), 32), "gemm": ((16, 32), (32, 16))}
    return {"softmax": ((4096, 4096), None), "layernorm": ((4096, 1024), 1024),
            "gemm": ((1024, 2048), (2048, 1024))}


class SM(torch.nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=1)


class LN(torch.nn.Module):
    def __init__(self, f):
        super().__init__()
        self.ln = torch.nn.LayerNorm(f)

    def forward(self, x):
        return self.ln(x)


class GEMM(torch.nn.Module):
    def __init__(self, i, o):
        super().__init__()
        self.linear = torch.nn.Linear(i, o)

    def forward(self, x):
        return torch.relu(self.linear(x))


def build(name, spec, dev):
    shape, extra = spec
    if name == "softmax":
        m = SM()
    elif name == "layernorm":
        m = LN(extra)
    else:
        m = GEMM(shape[1], extra[1])
    m = m.to(dev)
    # the layout as the importer makes it: the input, then every lifted weight
    layout = [("x", tuple(shape))] + [(n, tuple(p.shape)) for n, p in m.named_parameters()]
    return m, layout


ALIGN = inputs.REGION_ALIGN


def lay_out(layout, calls):
    at, where, spans = 0, [], []
    for _ in range(calls):
        start, call = at, {}
        for n, shape in layout:
            nb = 4
            for d in shape:
                nb *= d
            call[n] = (at, nb, shape)
            at += -(-nb // ALIGN) * ALIGN
        where.append(call)
        spans.append((start, at))
    return where, spans, at


# ------------------------------------------------------------------ variants
class Unmask:
    """The unmask as worker.go runs it (now: inputs.mask, the compiled kernel
    launched directly where keystream chose that) or as it ran before
    (before: the same kernel through Triton's JIT launch)."""

    def __init__(self, dev, now):
        self.dev, self.jit, self.why = dev, None, None
        if dev == "cpu" or now:
            return
        inputs.warm(dev)
        path = keystream.gpu_path()["path"] or ""
        if "choice 0" in path:
            self.jit = load("keystream_triton")  # the same source: the same bits
        else:
            self.why = f"this device masks with {path!r}, not the tile kernel"

    def __call__(self, span, key, start):
        if self.dev == "cpu":
            keystream._torch_xor(span.view(torch.int32), key.words, start // keystream.BLOCK_BYTES, 8)
        elif self.jit is not None:
            self.jit.chacha_xor(span.view(torch.int32), key.on_device, start // keystream.BLOCK_BYTES,
                                keystream.ROUNDS)
        else:
            inputs.mask(span, key, start)


WeightSlots = load("weight_slots").WeightSlots


# ------------------------------------------------------------------ batches
def one_problem(name, spec, dev, args, nvml, dry):
    model, layout = build(name, spec, dev)
    lifted = [n for n, _ in layout[1:]]
    shape, extra = spec
    out_elems = shape[0] * (extra[1] if name == "gemm" else shape[1])
    call_bytes = 4 * (sum(int(torch.tensor(s).prod()) for _, s in layout) + out_elems)
    calls = max(2, min(32 if not dry else 4, (args.batch_gib << 30) // call_bytes))
    where, spans, total = lay_out(layout, calls)
    staged = torch.empty(total, dtype=torch.uint8, device=dev)
    sync = torch.cuda.synchronize if dev != "cpu" else (lambda: None)
    commit_stream = torch.cuda.Stream() if dev != "cpu" else None
    fc = torch.func.functional_call
    out = []
    for variant in args.variants:
        now = variant == "now"
        unmask = Unmask(dev, now)
        slots = WeightSlots(model, lifted) if lifted else None
        for gap in args.gaps:
            rows = []
            vm0 = vmstat()
            for b in range(args.batches + 1):  # the first is the warmup
                # fresh inputs, masked, as the caller would stage them (untimed)
                key = inputs.new_key(dev)
                views = []
                for i in range(calls):
                    vs = {}
                    for n, (off, nb, shape) in where[i].items():
                        t = staged[off:off + nb].view(torch.float32).view(shape)
                        t.normal_()
                        vs[n] = t
                    views.append(vs)
                for i, (s, e) in enumerate(spans):
                    unmask(staged[s:e], key, s)  # mask = XOR: the same op
                sync()
                if gap == "sleep":
                    time.sleep(args.gap_ms / 1e3)
                elif gap == "spin":
                    t = time.perf_counter()
                    while time.perf_counter() - t < args.gap_ms / 1e3:
                        pass
                n0 = nvml.read()
                ru0 = resource.getrusage(resource.RUSAGE_THREAD)
                ss0, tc0, cpu0 = schedstat(), time.thread_time_ns(), sched_getcpu()
                outs = []
                ev = [torch.cuda.Event(enable_timing=True) for _ in range(3)] if dev != "cpu" else None
                gc.disable()
                t0 = time.perf_counter()
                if ev:
                    ev[0].record()
                with torch.no_grad():
                    for i in range(calls):
                        s, e = spans[i]
                        unmask(staged[s:e], key, s)
                        x = views[i]["x"]
                        if lifted and now:
                            slots.put([views[i][n] for n in slots.names])
                            outs.append(model(x))
                        elif lifted:
                            outs.append(fc(model, {n: views[i][n] for n in lifted}, (x,)))
                        else:
                            outs.append(model(x))
                    t_launched = time.perf_counter()
                    if ev:
                        ev[1].record()
                    sync()
                    t_synced = time.perf_counter()
                    ctx = torch.cuda.stream(commit_stream) if commit_stream else _null()
                    with ctx:
                        table = inputs.sums_of_table(outs) if now else None
                        sums = torch.stack(table) if table is not None else None
                        if sums is None:
                            sums_list = inputs.sums_of_many(outs) if dev != "cpu" else [inputs.sums(o) for o in outs]
                            sums = torch.stack(sums_list)
                        t_commit = time.perf_counter()
                        if ev:
                            ev[2].record(commit_stream)
                    vals = sums.tolist()
                    sync()
                t_end = time.perf_counter()
                gc.enable()
                if lifted and now:
                    slots.restore()
                ru1 = resource.getrusage(resource.RUSAGE_THREAD)
                ss1, tc1, cpu1 = schedstat(), time.thread_time_ns(), sched_getcpu()
                n1 = nvml.read()
                row = {"wall_us": (t_end - t0) * 1e6 / calls,
                       "host_launch_us": (t_launched - t0) * 1e6 / calls,
                       "sync_wait_us": (t_synced - t_launched) * 1e6 / calls,
                       "commit_host_us": (t_commit - t_synced) * 1e6 / calls,
                       "commit_wait_us": (t_end - t_commit) * 1e6 / calls,
                       "thread_cpu_us": (tc1 - tc0) / 1e3 / calls,
                       "runq_wait_us": (ss1[1] - ss0[1]) / 1e3 / calls,
                       "nivcsw": ru1.ru_nivcsw - ru0.ru_nivcsw, "nvcsw": ru1.ru_nvcsw - ru0.ru_nvcsw,
                       "minflt": ru1.ru_minflt - ru0.ru_minflt, "majflt": ru1.ru_majflt - ru0.ru_majflt,
                       "cpu0": cpu0, "cpu1": cpu1, "sm_mhz0": n0[0], "sm_mhz1": n1[0],
                       "reasons0": n0[1], "reasons1": n1[1], "py_probe_us": py_probe()}
                if ev:
                    row["gpu_calls_us"] = ev[0].elapsed_time(ev[1]) * 1e3 / calls
                if now and b == 1:  # the table's bits against inputs.sums, once
                    ref = [inputs.sums(o).tolist() for o in outs]
                    row["table_bits_equal"] = ref == vals
                if b:
                    rows.append({k: (round(v, 2) if isinstance(v, float) else v) for k, v in row.items()})
                del outs, sums, views
            walls = [r["wall_us"] for r in rows]
            summary = {"problem": name, "variant": variant, "gap": gap, "calls": calls,
                       "median_us": statistics.median(walls), "min_us": min(walls), "max_us": max(walls),
                       "max_over_min": round(max(walls) / min(walls), 3),
                       "unmask": keystream.gpu_path()["path"] if now else "Triton's JIT launch",
                       "unmask_why": unmask.why,
                       "medians": {k: statistics.median([r[k] for r in rows]) for k in rows[0]
                                   if isinstance(rows[0][k], (int, float)) and not isinstance(rows[0][k], bool)},
                       "cpus": sorted({r["cpu0"] for r in rows} | {r["cpu1"] for r in rows}),
                       "vmstat_delta": {k: v - vm0.get(k, 0) for k, v in vmstat().items() if v - vm0.get(k, 0)},
                       "rows": rows}
            out.append(summary)
            print(json.dumps({k: v for k, v in summary.items() if k != "rows"}), flush=True)
            print("   walls", [round(w, 1) for w in walls], flush=True)
    del staged
    if dev != "cpu":
        torch.cuda.empty_cache()
    return out


class _null:
    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False


# ------------------------------------------------------------------ kernels alone
def kernel_only(dev, dry):
    """GPU time of each op with the queue pre-filled (host hidden), and the
    host's enqueue cost per op, in us."""
    if dev == "cpu":
        return []
    res = []
    n_iter = 20
    # cycles per ms for _sleep, measured
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    torch.cuda._sleep(2_000_000)
    e.record()
    torch.cuda.synchronize()
    cyc_ms = 2_000_000 / s.elapsed_time(e)
    mb64 = torch.empty(64 << 20, dtype=torch.uint8, device=dev)
    dst = torch.empty_like(mb64)
    big = torch.empty(2 << 30, dtype=torch.uint8, device=dev)
    key = inputs.new_key(dev)
    x_sm = torch.randn(4096, 4096, device=dev)
    y_sm = torch.softmax(x_sm, 1)
    ln = torch.nn.LayerNorm(1024).to(dev)
    x_ln = torch.randn(4096, 1024, device=dev)
    lin = torch.nn.Linear(2048, 1024).to(dev)
    x_g = torch.randn(1024, 2048, device=dev)
    outs = [torch.randn(4096, 4096, device=dev) for _ in range(8)]
    cases = [
        ("copy 64 MB", lambda: dst.copy_(mb64), 1),
        ("unmask 64 MB (keystream.xor_)", lambda: inputs.mask(mb64, key, 0), 1),
        ("unmask 2 GiB in one launch (per 64 MB)", lambda: inputs.mask(big, key, 0), 32),
        ("inputs.sums 64 MB (commit_triton + torch ops)", lambda: inputs.sums(y_sm), 1),
        ("table commitment, 8 x 64 MB in one launch (per 64 MB)", lambda: inputs.sums_of_table(outs), 8),
        ("softmax 4096^2", lambda: torch.softmax(x_sm, 1), 1),
        ("layernorm 4096x1024", lambda: ln(x_ln), 1),
        ("linear+relu 1024x2048->1024", lambda: torch.relu(lin(x_g)), 1),
    ]
    with torch.no_grad():
        for name, f, per in cases:
            try:
                f()
                torch.cuda.synchronize()
                # host: enqueue cost per op while the GPU is busy
                torch.cuda._sleep(int(50 * cyc_ms))
                t = time.perf_counter()
                for _ in range(n_iter):
                    f()
                host = (time.perf_counter() - t) * 1e6 / n_iter
                torch.cuda.synchronize()
                # GPU: events around n_iter ops enqueued behind a sleep longer than their enqueueing
                a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                torch.cuda._sleep(int((host * n_iter / 1e3 * 2 + 2) * cyc_ms))
                a.record()
                for _ in range(n_iter):
                    f()
                b.record()
                torch.cuda.synchronize()
                gpu = a.elapsed_time(b) * 1e3 / n_iter
                row = {"op": name, "gpu_us": round(gpu / per, 2), "host_us_per_launch_set": round(host, 2),
                       "per": per}
            except Exception as ex:  # noqa: BLE001
                row = {"op": name, "error": f"{type(ex).__name__}: {ex}"[:200]}
            res.append(row)
            print(json.dumps(row), flush=True)
    cases = None  # (the buffers go with this frame)
    return res


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--batches", type=int, default=15)
    p.add_argument("--gap-ms", type=float, default=25.0)
    p.add_argument("--gaps", default="sleep,spin,none")
    p.add_argument("--variants", default="before,now")
    p.add_argument("--only", default="")
    p.add_argument("--batch-gib", type=int, default=4)
    p.add_argument("--pin", default="", help="CPU list to pin this process to (e.g. 3 or 2,3), "
                   "or 'local': a CPU on the GPU's NUMA node")
    p.add_argument("--no-kernels", action="store_true")
    p.add_argument("--cpu-dry-run", action="store_true")
    p.add_argument("--out", default=os.path.join(os.environ.get("OUT", "."), "kb_timing_probe.json"))
    args = p.parse_args()
    args.gaps = args.gaps.split(",")
    args.variants = args.variants.split(",")
    if args.pin == "local":
        args.pin = gpu_local_cpu()
    if args.pin:
        os.sched_setaffinity(0, {int(c) for c in args.pin.split(",")})
        print(json.dumps({"pinned_to": sorted(os.sched_getaffinity(0))}), flush=True)
    dry = args.cpu_dry_run
    dev = "cpu" if dry else "cuda"
    if not dry and not torch.cuda.is_available():
        print("no CUDA: nothing to measure (use --cpu-dry-run to check the script)")
        return 0
    if dry:
        args.batches = min(args.batches, 3)
        args.gap_ms = 2
    if not dry:
        inputs.warm(dev)
        print(json.dumps({"gpu": torch.cuda.get_device_name(0), "paths": inputs.gpu_paths(),
                          "torch": torch.__version__, "affinity": sorted(os.sched_getaffinity(0)),
                          "cpus": os.cpu_count()}), flush=True)
    nvml = NVML() if not dry else type("N", (), {"read": lambda self: (None, None)})()
    st0 = steal_ticks()
    result = {"kernels": [] if (dry or args.no_kernels) else kernel_only(dev, dry), "batches": []}
    if not dry:
        torch.cuda.empty_cache()
    only = set(filter(None, args.only.split(",")))
    for name, spec in problems(dry).items():
        if only and name not in only:
            continue
        result["batches"] += one_problem(name, spec, dev, args, nvml, dry)
    st1 = steal_ticks()
    busy = {c: (st1[c][0] - st0[c][0], st1[c][1] - st0[c][1], st1[c][2] - st0[c][2]) for c in st1 if c in st0}
    result["per_cpu_busy_steal_total_ticks"] = busy
    print(json.dumps({"steal_ticks_all_cpus": sum(v[1] for v in busy.values()),
                      "busy_ticks_all_cpus": sum(v[0] for v in busy.values())}), flush=True)
    with open(args.out, "w") as f:
        json.dump(result, f)
    print("written", args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
