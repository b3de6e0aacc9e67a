"""The workers' sandbox for this process (kr_sandbox_enter, docs/sandbox.md)
and the isolation filter (kr_sandbox_isolate): for a process that is about
to run untrusted host code itself. Neither can be undone; entering the
sandbox again stacks a narrower layer."""
import ctypes
import json

from . import _lib


def enter(read=(), write=(), exec=False, gpu=False, address_space_bytes=0, cpu_seconds=0,
          open_files=0, file_bytes=0, gpu_shm=True, gpu_task_read=True):
    """Sandboxes the calling process: files readable only under `read` (and
    what the loader needs; with `gpu`, what CUDA needs), writable only under
    `write`, no network socket, no exec unless `exec` (programs under the
    read trees, which inherit the sandbox). gpu_shm=False leaves /dev/shm
    out of the GPU grants, gpu_task_read=False the task files' read right
    (docs/sandbox.md). Returns what was applied:
    {"landlock", "landlock_abi", "landlock_why", "seccomp", "seccomp_why",
    "no_new_privs", "rlimits", "exec", "network"}; a layer the kernel lacks
    is False with its why. Raises KrewardError (KR_EUNSUPPORTED) when a
    layer the kernel offers failed: do not run untrusted code then."""
    spec = {"read": [str(p) for p in read], "write": [str(p) for p in write],
            "exec": bool(exec), "gpu": bool(gpu), "address_space_bytes": int(address_space_bytes),
            "cpu_seconds": int(cpu_seconds), "open_files": int(open_files),
            "file_bytes": int(file_bytes), "gpu_shm": bool(gpu_shm),
            "gpu_task_read": bool(gpu_task_read)}
    return enter_json(json.dumps(spec))


def enter_json(spec_json):
    """kr_sandbox_enter with a JSON spec as is (docs/api.md, kreward/sys/sandbox.h)."""
    status, why = ctypes.c_void_p(), ctypes.c_void_p()
    try:
        _lib.fn.sandbox_enter(_lib.encode(spec_json), ctypes.byref(status), ctypes.pointer(why))
    finally:
        text = _lib.take_string(status)
    return json.loads(text)


def isolate():
    """kr_sandbox_isolate: from now on nothing in this process (every thread,
    everything it starts) can signal, re-prioritise, re-pin, trace or read
    another process; its own stays its own. Returns {"applied": True} or,
    where the kernel has no seccomp, {"applied": False, "why": ...}; raises
    KrewardError (KR_EUNSUPPORTED) when the filter failed to load."""
    status, why = ctypes.c_void_p(), ctypes.c_void_p()
    try:
        _lib.fn.sandbox_isolate(ctypes.byref(status), ctypes.pointer(why))
    finally:
        text = _lib.take_string(status)
    return json.loads(text)
