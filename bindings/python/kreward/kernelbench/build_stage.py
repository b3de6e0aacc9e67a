"""One candidate's build in the compile stage: its module imported (the
import is what runs load_inline) in a ModelNew worker (worker.py, through
worker_process.WorkerProcess) on the CPU, ahead of its GPU turn, so the GPU
worker's load finds the build done.

The worker is the GPU worker's kind, under tighter rules:
- the "start" sandbox (confine.py, entered before torch is imported) with
  no GPU grant: no /dev/nvidia*, /proc/driver/nvidia or /sys/bus/pci,
  reads as a GPU worker's otherwise, writes only into the source's own
  build folder (folders.py), which is where its GPU worker will look; the
  isolation filter at load, as always;
- CUDA_VISIBLE_DEVICES empty: torch sees no GPU even where one could be
  reached;
- TORCH_CUDA_ARCH_LIST and the precompiled header as its GPU worker will
  have them (build_env.py), so ninja finds the same build current there;
- ended, with every process below it, once the import is done or its
  time is up (a hanging build is killed at timeout_s).

What the outcome means for the candidate (builds.verdict): only a failed
build (torch's "Error building extension", nvcc's or gcc's log in it) and a
build past its time are its verdicts. Anything else the import did on a
CPU without a GPU (an error at module level, a refusal of a file the GPU
worker may read, a crash) says nothing of the GPU: the GPU turn decides,
as it did before the stage."""
import time

from . import folders
from .build_env import build_env
from .processes import library_path
from .worker_process import WorkerDied, WorkerProcess, WorkerProtocolError, WorkerTimeout, printable

# what a load request carries of the problem: the stage builds no model
NO_PROBLEM = {"layouts": [], "init_inputs": [], "values": [], "state_names": []}
# torch.utils.cpp_extension's words when ninja failed (the log follows)
BUILD_FAILED = "RuntimeError: Error building extension"
# a failed build whose log shows the sandbox refusing the compiler a file:
# the GPU worker's rules differ (its GPU grants), so not the candidate's verdict
REFUSED = ("Permission denied", "Operation not permitted")
FEEDBACK_CHARS = 16000  # of a failed build's log, kept in the verdict's feedback
# builds run beside the GPU turns, whose clocks are the host's too (a
# launch-bound candidate's time follows the CPU): the compilers yield to them
NICENESS = 10


def _config(ext, reads, sandbox):
    if not sandbox:
        return None
    return {"library": library_path(), "write": ext, "gpu": False, "when": "start",
            "reads": list(reads)}


def build(source, cache_dir, arch, pch_dir=None, timeout_s=600.0, sandbox=True, on_start=None,
          niceness=NICENESS):
    """Imports source in a sandboxed CPU worker; the outcome, a dict:
    state: "built" (the import ran: its build, if any, is done),
    "compile_error" (the build failed: error has the log), "timeout"
    (killed at timeout_s), "denied" (the sandbox refused something),
    "crash" (the worker died), "error" (anything else, the environment's
    included); error, seconds (wall, start to end), compile_seconds (the
    import's own), sandbox (what was applied). on_start(worker) is called
    with the worker once it runs (close() ends it from another thread).
    niceness: the build's processes' (WorkerProcess)."""
    t0 = time.monotonic()
    ext = folders.source_folder(cache_dir, source)
    env, reads = build_env(arch, pch_dir)
    env = {**folders.worker_env(ext), **env, "CUDA_VISIBLE_DEVICES": ""}
    config = _config(ext, reads, sandbox)
    out = {"state": "error", "error": None, "seconds": None, "compile_seconds": None,
           "sandbox": None, "arch": arch, "pch": env.get("CPATH")}
    w = None
    try:
        w = WorkerProcess(env, config, niceness=niceness)
        if on_start is not None:
            on_start(w)
        w.limit_until(t0 + timeout_s, f"the build ran past its limit of {timeout_s:g} s "
                      "(the compile stage's timeout_s)")
        w.send({"op": "ready", "device": "cpu", "library": library_path()})
        w.send({"op": "load", "source": source, "class_name": "ModelNew", "device": "cpu",
                "ext": ext, "library": library_path(), **NO_PROBLEM, "cache_dir": cache_dir,
                "env": env, "sandbox": config}, timeout_s=timeout_s)
        ready, _ = w.receive(timeout_s)
        if not ready["ok"]:
            out["error"] = f"the build's worker did not start: {ready['error']}"
            return out
        loaded, _ = w.receive(timeout_s)
        out.update(_classify(loaded))
    except WorkerTimeout as e:
        out.update(state="timeout", error=str(e))
    except WorkerDied as e:
        out.update(state="crash", error=str(e))
    except (WorkerProtocolError, OSError, RuntimeError) as e:
        out.update(state="error", error=f"{type(e).__name__}: {e}")
    finally:
        if w is not None:
            ended = w.end()
            if ended.get("clean") and out["state"] != "built":
                # a build killed mid-way leaves torch's lock: the GPU
                # worker's load of this source would wait on it
                folders.clear_stale_locks(ext)
        out["seconds"] = round(time.monotonic() - t0, 3)
    return out


def _classify(loaded):
    """A load reply as the stage's outcome (the worker's words are the
    candidate's: only their kinds are checked, by worker_process)."""
    if loaded["ok"]:
        return {"state": "built", "compile_seconds": loaded["compile_seconds"],
                "sandbox": loaded["sandbox"]}
    error = printable_log(loaded["error"])
    if loaded.get("sandbox_failed"):
        return {"state": "error", "error": error}
    if loaded.get("denied"):
        return {"state": "denied", "error": error}
    if error.startswith(BUILD_FAILED) and not any(r in error for r in REFUSED):
        return {"state": "compile_error", "error": error[:FEEDBACK_CHARS]}
    return {"state": "error", "error": error}


def printable_log(text):
    """A compiler's log as text to keep: its lines, each of plain characters."""
    return "\n".join(printable(line) for line in str(text).splitlines())
