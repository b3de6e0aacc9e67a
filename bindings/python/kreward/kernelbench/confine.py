"""The sandbox of a ModelNew worker (worker.py): which trees it may read,
where it may write, and entering it through libkreward's kr_sandbox_enter
(docs/sandbox.md, "Sandboxing a process of your own").

The worker loads this file by path and calls the library with ctypes: it
imports nothing of kreward (the package, its caller-side objects, stay out
of the process that runs candidate code). Only the standard library here.

Two phases (the worker enters both, the second stacked on the first):
- compile: everything below, exec allowed, from before torch is imported
  until every case has run once. load_inline runs ninja, nvcc and the host
  compiler; Triton runs ptxas and the C compiler at a kernel's first launch
  per shape; a program started inherits every layer (it reads and writes no
  more than the worker).
- run (`seal`): the same trees, no exec.
The network is refused in both."""
import ctypes
import json
import os
import shutil
import site
import sys
import sysconfig

# Trees every worker reads: the loader's, the NVIDIA user-space files in the
# places containers and distributions put them, the CPU's shape (torch's
# cpuinfo reads it at import; nothing secret in it).
SYSTEM_READS = ("/usr/lib", "/usr/lib64", "/lib", "/lib64", "/etc/ld.so.cache",
                "/usr/local/nvidia", "/usr/share/nvidia", "/etc/nvidia",
                "/sys/devices/system/cpu", "/sys/devices/system/node", "/proc/cpuinfo",
                "/proc/meminfo", "/proc/stat")
# What a compile needs besides: the programs (ninja, the compilers, sh), the
# system headers, gcc's own programs (/usr/libexec on some distributions).
COMPILER_READS = ("/usr/bin", "/bin", "/usr/include", "/usr/libexec", "/usr/local/include",
                  "/usr/local/bin")


def _too_wide(path):
    """A sys.path entry that would open the user's files: /, the home
    folder, the working folder, or a folder above one of them."""
    path = os.path.realpath(path)
    for near in (os.path.expanduser("~"), os.getcwd()):
        near = os.path.realpath(near)
        if path == near or near.startswith(path.rstrip("/") + "/"):
            return True
    return path == "/"


def python_reads():
    """The interpreter's own trees: its standard library, headers (Triton
    and load_inline compile against Python.h), site-packages (torch, triton,
    the NVIDIA wheels), the sys.path entries of this process that are not
    the user's folders, the interpreter's bin folder (a pip-installed
    ninja)."""
    paths = set()
    for key in ("stdlib", "platstdlib", "purelib", "platlib", "include", "platinclude"):
        p = sysconfig.get_paths().get(key)
        if p:
            paths.add(p)
    try:
        paths.update(site.getsitepackages())
    except AttributeError:  # a virtualenv's old site.py
        pass
    user = site.getusersitepackages() if hasattr(site, "getusersitepackages") else None
    if user:
        paths.add(user)
    paths.update(p for p in sys.path if p and os.path.exists(p) and not _too_wide(p))
    paths.add(os.path.dirname(os.path.abspath(sys.executable)))
    paths.add(os.path.dirname(os.path.realpath(sys.executable)))
    paths.add(os.path.dirname(os.path.abspath(__file__)))  # worker.py, inputs.py
    return sorted(p for p in paths if not _too_wide(p))


def toolkit_reads():
    """The CUDA toolkit (nvcc, headers, libraries) wherever it is said to
    be: $CUDA_HOME, $CUDA_PATH, /usr/local/cuda, the nvcc on PATH."""
    homes = {os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"}
    nvcc = shutil.which("nvcc")
    if nvcc:
        homes.add(os.path.dirname(os.path.dirname(os.path.realpath(nvcc))))
    return sorted(os.path.realpath(h) for h in homes if h and os.path.isdir(h))


# The programs a compile starts by name: the C and C++ compilers (Triton's
# launcher, Inductor, load_inline's host side), their assembler and linker.
COMPILER_PROGRAMS = ("cc", "gcc", "c++", "g++", "clang", "clang++", "as", "ld")
# Where, below a compiler's install prefix, it keeps its own programs (cc1,
# collect2), headers and libraries (libgcc, libstdc++).
PREFIX_PARTS = ("bin", "libexec", "include", "lib", "lib64")


def compiler_reads(env=None):
    """The install trees of the compilers a compile would start, wherever
    they live ($CC, $CXX and the COMPILER_PROGRAMS found on PATH, symlinks
    followed): a gcc in /opt/gcc/bin needs /opt/gcc/libexec's cc1 and
    /opt/gcc/lib's libraries, and Landlock judges the path a symlink leads
    to. The system trees (COMPILER_READS) and the user's folders add
    nothing here."""
    env = os.environ if env is None else env
    names = [env.get("CC"), env.get("CXX"), *COMPILER_PROGRAMS]
    out = set()
    for name in names:
        if not name:
            continue
        found = shutil.which(name.split()[0], path=env.get("PATH"))
        if not found:
            continue
        for program in {os.path.abspath(found), os.path.realpath(found)}:
            bindir = os.path.dirname(program)
            prefix = os.path.dirname(bindir)
            for d in [bindir] + [os.path.join(prefix, part) for part in PREFIX_PARTS]:
                if os.path.isdir(d) and not _too_wide(d) and not _system(d):
                    out.add(os.path.realpath(d))
    return sorted(out)


def _system(path):
    """A tree spec() grants anyway, or one too broad to grant for a
    compiler's sake (/usr/local/lib holds whatever the admin installed)."""
    path = os.path.realpath(path)
    granted = COMPILER_READS + SYSTEM_READS
    return (path in ("/usr", "/usr/local", "/usr/local/lib", "/usr/local/lib64", "/opt")
            or any(path == g or path.startswith(g.rstrip("/") + "/") for g in granted))


# No file the worker writes (its build folder, the log the caller gave it as
# stderr) grows past this: a load_inline module is tens of MB. One file
# cannot fill the caller's disk; many still can (docs/kernelbench.md).
FILE_BYTES = 2 << 30


def spec(write_dir, gpu, exec_allowed, first=True, reads=()):
    """The kr_sandbox_enter spec of a worker writing only under write_dir.
    first: the first layer, which sets the limits (a later one cannot).
    reads: more folders it may read, never write (the library's
    precompiled header: build_env.py)."""
    reads = set(python_reads()) | set(toolkit_reads()) | set(SYSTEM_READS) | set(reads)
    # read in both phases: a compiled module may read headers
    reads |= set(COMPILER_READS) | set(compiler_reads())
    out = {"read": sorted(p for p in reads if os.path.exists(p)),
           "write": [os.path.realpath(write_dir)], "exec": bool(exec_allowed), "gpu": bool(gpu)}
    if gpu:
        # CUDA starts without /dev/shm (the same user's shared memory: a
        # trainer's DataLoader tensors) and without reading the task files
        # (task/<tid>/net: the namespace's sockets), measured by
        # scripts/sandbox_cuda_probe.py on the H200 at 2772c70
        out["gpu_shm"] = False
        out["gpu_task_read"] = False
    if first:
        out["file_bytes"] = FILE_BYTES
    return out


class SandboxFailed(Exception):
    """A layer the kernel offers could not be applied: run no candidate."""


def enter(library, spec_dict):
    """Enters the sandbox through libkreward at `library`; returns the
    status dict (what was applied, why a missing layer is missing)."""
    lib = ctypes.CDLL(library)
    f = lib.kr_sandbox_enter
    f.argtypes = [ctypes.c_char_p, ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_void_p)]
    f.restype = ctypes.c_int
    lib.kr_free.argtypes = [ctypes.c_void_p]
    status, why = ctypes.c_void_p(), ctypes.c_void_p()
    rc = f(json.dumps(spec_dict).encode(), ctypes.byref(status), ctypes.byref(why))
    status_text, why_text = _take(lib, status), _take(lib, why)
    if rc != 0:
        raise SandboxFailed(f"kr_sandbox_enter: {why_text or rc}")
    return json.loads(status_text)


def isolate(library):
    """Enters the isolation filter through libkreward at `library`
    (kr_sandbox_isolate: nothing the process starts may signal,
    re-prioritise, re-pin, trace or read another process); the status
    dict ({"applied": True}, or {"applied": False, "why": ...} where the
    kernel has no seccomp). RuntimeError when the kernel has it and the
    filter did not load."""
    lib = ctypes.CDLL(library)
    f = lib.kr_sandbox_isolate
    f.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_void_p)]
    f.restype = ctypes.c_int
    lib.kr_free.argtypes = [ctypes.c_void_p]
    status, why = ctypes.c_void_p(), ctypes.c_void_p()
    rc = f(ctypes.byref(status), ctypes.byref(why))
    status_text, why_text = _take(lib, status), _take(lib, why)
    if rc != 0:
        raise RuntimeError(f"the isolation filter could not be applied: {why_text or rc}")
    return json.loads(status_text)


def _take(lib, p):
    """A string the library allocated, as text, freed."""
    if not p.value:
        return ""
    try:
        return ctypes.string_at(p.value).decode("utf-8", "replace")
    finally:
        lib.kr_free(p)


def missing(status):
    """What the report says where a layer is missing (empty when none is)."""
    out = []
    if not status.get("landlock"):
        out.append("no Landlock here (%s): the candidate can read and write whatever this "
                   "user can" % (status.get("landlock_why") or "not available"))
    if not status.get("seccomp"):
        out.append("no seccomp here (%s): the candidate can open network sockets and start "
                   "programs" % (status.get("seccomp_why") or "not available"))
    return out
