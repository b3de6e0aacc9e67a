"""A process that runs a problem file: the importer's probes (probe.py), the
soundness check (soundness.py), vetting's measurements (vet/measure.py).
A problem file is code from a data set, and what it finds it may change:
so before it runs, the process
- keeps its own answer channel: stdout moves to a descriptor of its own and
  fd 1 becomes stderr, so what the file prints (a forged answer line
  included) never reaches the caller's reading;
- enters the workers' sandbox (confine.py, through libkreward at
  $KREWARD_LIBRARY): the Python, toolkit and system trees and the file
  itself readable, a fresh temporary folder its only write (TMPDIR and the
  compilers' caches point there), no network, programs allowed (torch.compile
  runs a compiler), and the isolation filter (no signal, trace or read of
  another process). So it cannot write the import cache, a vetting run's
  folder or anything else of the user's.
Only the standard library and confine.py (loaded by path): probe.py runs
without the kreward package."""
import importlib.util
import os
import sys
import tempfile

_HERE = os.path.dirname(os.path.abspath(__file__))


def answer_channel():
    """A text stream on the process's original stdout; from now on fd 1 (and
    sys.stdout) is stderr."""
    sys.stdout.flush()
    out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return out


def _confine_module():
    spec = importlib.util.spec_from_file_location("kr_kb_confine", os.path.join(_HERE, "confine.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def confine(problem_path, gpu=False):
    """The sandbox for a process about to run the problem file at
    problem_path: {"applied": bool, "why": ..., "status": ...}. Without
    $KREWARD_LIBRARY (no libkreward to enter it through) nothing is applied
    and "why" says so; a layer the kernel offers that fails raises."""
    library = os.environ.get("KREWARD_LIBRARY")
    scratch = tempfile.mkdtemp(prefix="kreward-file-")
    for var in ("TMPDIR", "TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR", "XDG_CACHE_HOME"):
        os.environ[var] = scratch
    tempfile.tempdir = scratch
    # getpass.getuser() reads the password file (refused) without them:
    # torch.compile names its caches by user ("uid not found: 0")
    os.environ.setdefault("USER", "kreward")
    os.environ.setdefault("LOGNAME", os.environ["USER"])
    if not library or not os.path.exists(library):
        return {"applied": False, "why": "no libkreward ($KREWARD_LIBRARY) to enter the sandbox through"}
    c = _confine_module()
    spec = c.spec(scratch, gpu, exec_allowed=True)
    spec["read"] = sorted(set(spec["read"]) | {os.path.realpath(problem_path)})
    status = c.enter(library, spec)
    isolation = c.isolate(library)
    return {"applied": True, "status": status, "isolation": isolation}
