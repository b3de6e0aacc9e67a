"""A precompiled torch/extension.h for load_inline's host file (main.cpp),
made by the library once per torch, compiler and flag set, in a folder no
candidate can write (docs/kernelbench.md, "The compile stage").

Why this shape: load_inline's main.cpp starts with `#include
<torch/extension.h>`; gcc looks for `torch/extension.h.gch` in each include
folder before the header itself, and CPATH's folders come before torch's
-isystem ones, so a folder holding `torch/extension.h.gch/` serves every
build whose environment names it, without changing the candidate's text.
A .gch that does not fit the compile's flags is skipped by gcc (its own
check), so a wrong guess costs speed, never a wrong build; the .gch is a
folder of variants, gcc takes the first that fits: VARIANTS are the flags
candidates pass most (none, -O3).

What it cannot do: nvcc's passes (cicc, cudafe++ and the host gcc) read
gcc's preprocessed output, where no #include is left, and nvcc has no
precompiled-header option: the .cu of a CUDA candidate is parsed whole
every time (docs/results.md has the times).

Why not torch's own use_pch=True: it writes extension.h.gch into torch's
installed include folder, which every candidate's build reads (and which
load_inline without it removes again): one writable file for all."""
import hashlib
import os
import secrets
import shutil
import subprocess
import sys
import sysconfig
import threading

FORMAT = 1                       # bump when the layout or the flags change
VARIANTS = {"plain": [], "O3": ["-O3"]}
_lock = threading.Lock()
_key_memo = {}


def _compiler():
    """The C++ compiler torch's builds use (its get_cxx_compiler)."""
    return shutil.which(os.environ.get("CXX", "c++"))


def _include_dirs():
    from torch.utils.cpp_extension import include_paths
    try:
        dirs = include_paths("cuda")
    except Exception:  # noqa: BLE001 - no CUDA toolkit: the CPU's
        dirs = include_paths()
    return dirs + [sysconfig.get_paths()["include"]]


def _flags():
    """main.cpp's flags as load_inline writes them (build.ninja's cflags,
    torch 2.x), without TORCH_EXTENSION_NAME, which no torch header reads."""
    out = ["-DTORCH_API_INCLUDE_EXTENSION_H"]
    for d in _include_dirs():
        out += ["-isystem", d]
    return out + ["-fPIC", "-std=c++17"]


def _compiler_id(cxx):
    try:
        return subprocess.run([cxx, "-dumpfullversion", "-dumpmachine"], capture_output=True,
                              text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return ""


def folder(root):
    """The folder this torch, compiler and flag set's header lives in under
    root (it exists only once made whole); None without a C++ compiler."""
    cxx = _compiler()
    if cxx is None:
        return None
    with _lock:
        key = _key_memo.get((root, cxx))
        if key is None:
            import torch
            text = repr((FORMAT, torch.__version__, torch.__file__, os.path.realpath(cxx),
                         _compiler_id(cxx), _flags(), sorted(VARIANTS.items()), sys.version))
            key = _key_memo[(root, cxx)] = hashlib.sha256(text.encode()).hexdigest()[:20]
    return os.path.join(root, key)


def ready(root):
    """The header's folder when it is made (CPATH for a build), else None."""
    path = folder(root)
    return path if path and os.path.isdir(path) else None


def make(root, timeout_s=900.0, log=None):
    """Makes the header under root once (each variant compiled from torch's
    own extension.h with load_inline's flags) and returns its folder. Made
    in a temporary folder and renamed into place whole, then made read-only:
    a build never sees half of it, and another process that made it first
    wins. Raises when the compiler fails (no header then: builds go on
    without it)."""
    final = folder(root)
    if final is None:
        raise RuntimeError("no C++ compiler for the precompiled header")
    if os.path.isdir(final):
        return final
    from torch.utils.cpp_extension import include_paths
    header = os.path.join(include_paths()[0], "torch", "extension.h")
    os.makedirs(root, exist_ok=True)
    tmp = os.path.join(root, f"tmp-{os.getpid()}-{secrets.token_hex(6)}")
    gch = os.path.join(tmp, "torch", "extension.h.gch")
    os.makedirs(gch)
    try:
        for name, extra in VARIANTS.items():
            cmd = [_compiler(), "-x", "c++-header", header, "-o", os.path.join(gch, name + ".gch"),
                   *_flags(), *extra]
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
            if done.returncode != 0:
                raise RuntimeError(f"the precompiled header did not build: {done.stderr[-2000:]}")
            if log is not None:
                log(f"pch: {name} made")
        for d, _, files in os.walk(tmp):
            for f in files:
                os.chmod(os.path.join(d, f), 0o444)
        try:
            os.rename(tmp, final)
        except OSError:  # another process put its own there first
            if not os.path.isdir(final):
                raise
        for d, _, _ in os.walk(final):
            try:
                os.chmod(d, 0o555)
            except OSError:
                pass
        return final
    finally:
        if os.path.isdir(tmp):
            shutil.rmtree(tmp, ignore_errors=True)


def sweep(root):
    """Removes what a killed maker left (tmp-* of a process that is gone:
    never a build's). Headers of other torch or compiler versions stay:
    another trainer on the same cache may be using them."""
    try:
        names = os.listdir(root)
    except OSError:
        return
    for n in names:
        if n.startswith("tmp-") and not _maker_alive(n):
            shutil.rmtree(os.path.join(root, n), ignore_errors=True)


def _maker_alive(name):
    try:
        os.kill(int(name.split("-")[1]), 0)
        return True
    except (IndexError, ValueError, ProcessLookupError):
        return False
    except OSError:  # someone else's: it exists
        return True
