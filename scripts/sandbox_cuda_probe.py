#!/usr/bin/env python3
"""Why CUDA does or does not initialise inside libkreward's sandbox (the
ModelNew worker's "start" mode): each variant enters kr_sandbox_enter with
the worker's own spec (kernelbench/confine.py) widened by the reads and
writes its name lists (or narrowed: "no_shm" leaves /dev/shm out,
"task_wo" the task files' read right, kr_sandbox_enter's "gpu_shm" and
"gpu_task_read"), in a fresh Python process, then initialises CUDA through torch and prints one
line. Comparing the lines bisects the refusal: widening the reads to "/"
points at a file the grants lack, writing "/" at a write or a device right,
"no_new_privs only" (prctl, no Landlock, no seccomp) at the filter or the
scopes. Under strace (when installed) the base variant's refused calls are
listed too.

    KREWARD_LIBRARY=build/lib/libkreward.so.1 python3 scripts/sandbox_cuda_probe.py [VARIANT...]

801a644 on the H200: "write=/proc/self/task" was the narrowest variant that
worked; the worker's grant there was write without read. Read and write
still failed (b8b392e); read, write and truncate work (d816279: "base" and
"base_driver" ok): the driver opens task/<tid>/comm with O_TRUNC. 2772c70: "no_shm", "task_wo"
and both together start CUDA (torch and driver-only), so the workers now
leave /dev/shm and the task files' read right out.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONFINE = os.path.join(ROOT, "bindings", "python", "kreward", "kernelbench", "confine.py")

CHILD = r"""
import ctypes, importlib.util, json, os, sys
variant, lib, confine_path, write_dir = sys.argv[1:5]
spec_ = importlib.util.spec_from_file_location("confine", confine_path)
confine = importlib.util.module_from_spec(spec_); spec_.loader.exec_module(confine)
status = None
if variant == "nnp_only":
    PR_SET_NO_NEW_PRIVS = 38
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
elif variant != "none":
    # a variant: the worker's spec widened by reads and writes named in it,
    # "read=/a,/b;write=/c" (the _driver suffix: no torch, see below)
    s = confine.spec(write_dir, True, True)
    for part in variant.replace("_driver", "").split(";"):
        if part in ("no_shm", "task_wo"):  # narrowing: a grant of "gpu" left out
            s["gpu_shm" if part == "no_shm" else "gpu_task_read"] = False
        elif "=" in part:
            key, paths = part.split("=", 1)
            s[key] = sorted(set(s[key]) | {os.path.expanduser(p) for p in paths.split(",")})
    status = confine.enter(lib, s)
if variant.endswith("_driver"):  # the driver API alone, no torch, no cudart
    cu = ctypes.CDLL("libcuda.so.1")
    dev, ctx = ctypes.c_int(), ctypes.c_void_p()
    steps = [("cuInit", lambda: cu.cuInit(0)), ("cuDeviceGet", lambda: cu.cuDeviceGet(ctypes.byref(dev), 0)),
             ("cuDevicePrimaryCtxRetain", lambda: cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev))]
    for name, f in steps:
        rc = f()
        if rc:
            print(json.dumps({"variant": variant, "cuda": f"{name} returned {rc}", "sandbox": status}))
            sys.exit(0)
    print(json.dumps({"variant": variant, "cuda": "ok", "sandbox": status}))
    sys.exit(0)
try:
    import torch
    torch.cuda.init()
    torch.ones(4, device="cuda").sum().item()
    print(json.dumps({"variant": variant, "cuda": "ok", "sandbox": status}))
except Exception as e:
    print(json.dumps({"variant": variant, "cuda": f"{type(e).__name__}: {e}"[:300], "sandbox": status}))
"""

# dee1e1e on the H200: base, read=/, write=/tmp and write=/dev failed with
# 304; read=/;write=/ worked. The writes narrowed one tree at a time; at
# ad4bbcc only the variants writing /proc worked (write=/proc alone too), so
# the last ones narrow /proc: the process's own directory (/proc/self is
# opened as /proc/<pid>, harmless to grant) against the driver's tree
VARIANTS = ("none", "nnp_only", "base", "base_driver", "read=/;write=/", "write=/proc",
            "write=/sys", "write=/run", "write=/var", "write=~", "write=/dev/shm",
            "write=/proc,/sys,/run,/var,~,/tmp,/dev", "write=/proc;read=/", "write=~;read=/",
            "write=/run;read=/", "write=/var;read=/", "write=/proc/self",
            "write=/proc/self/task", "write=/proc/driver", "write=/proc/self_driver",
            # narrower than the worker's spec: does CUDA start without
            # /dev/shm, without reading the task files, without both?
            "no_shm", "no_shm_driver", "task_wo", "task_wo_driver", "no_shm;task_wo",
            "no_shm;task_wo_driver")


def run(variant, lib, strace=None):
    with tempfile.TemporaryDirectory() as d:
        cmd = [sys.executable, "-c", CHILD, variant, lib, CONFINE, d]
        if strace:
            cmd = [strace, "-f", "-qq", "-e", "trace=%file,%network,%ipc,ioctl,mknodat,prctl",
                   "-e", "status=failed", "-o", os.path.join(d, "trace")] + cmd
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        line = (p.stdout.strip().splitlines() or [f'{{"variant": "{variant}", "cuda": "no output, rc {p.returncode}: {p.stderr[-300:]!r}"}}'])[-1]
        refused = []
        if strace and os.path.exists(os.path.join(d, "trace")):
            with open(os.path.join(d, "trace")) as f:
                refused = [ln.strip() for ln in f if "EACCES" in ln or "EPERM" in ln]
        return line, refused


def main():
    lib = os.environ.get("KREWARD_LIBRARY")
    if not lib:
        print("sandbox_cuda_probe: set KREWARD_LIBRARY")
        return 2
    # variants named on the command line, else all
    for v in sys.argv[1:] or VARIANTS:
        line, _ = run(v, lib)
        print(line, flush=True)
    strace = shutil.which("strace")
    if strace:
        _, refused = run("base", lib, strace)
        print(json.dumps({"strace_base_refused": refused[:40]}))
    else:
        print("(no strace here: the refused calls are not listed)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
