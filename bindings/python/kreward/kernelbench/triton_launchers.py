"""Triton's C launchers for the candidates' kernel signatures, built by the
library's code, ahead of the candidates that need them.

Why: Triton launches a compiled kernel through a small C module made for
the kernel's argument types (triton/backends/nvidia/driver.py
make_launcher, built with the host's C compiler by
triton/runtime/build.py compile_module_from_src into TRITON_CACHE_DIR,
named by the sha256 of its source). A candidate's worker has a Triton
cache of its own (the "start" sandbox's one writable folder), so every
candidate built the launcher of each of its kernels again in its first
verify batch: 0.25-0.36 s of gcc of its `verify.go` (0.47 s median; an
H100 at 8a6e5fe), where a GRPO batch's candidates share a handful of
signatures (two float32 pointers and an int32, ...).

How, and why it is sound:
- a candidate's worker records the signatures its kernels' launchers were
  made for (LauncherLog, installed in its ready, before its candidate's
  code) and says them in its seal reply. That is the candidate's word: the
  caller keeps only well-formed ones (signature: argument types of Triton's
  own spelling, at most MAX_ARGS) and never anything built by a candidate;
- the caller's wish list (want, to_build: process-wide, bounded, the most
  reported first) goes to the next spare started in a fresh folder: in its
  ready (before any candidate's code runs in it, the folder written by the
  library's code alone) it makes each launcher's source with Triton's own
  make_launcher and builds it (build): the same source, so the same file,
  Triton would build in a candidate's process for that signature;
- that folder's Triton host modules are then remembered with the
  library's kernels (triton_cache.remember) and planted in every later
  candidate's folder, where Triton finds the launcher by its source's hash
  and loads it instead of running gcc.
A candidate can at most make the spares build launchers for well-formed
signatures it chose (BUILD_PER_READY a ready, MAX_WANTED remembered): CPU
time of the harness's, never code of its own in another candidate.

Standard library only at import (the worker loads it by path); Triton is
imported where a launcher is recorded or built."""
import collections
import re
import threading

# Triton's names of argument types in a kernel's signature
# (triton/runtime/jit.py mangle_type, triton/language/core.py dtype names):
# a pointer is "*" and the element type; "constexpr" an argument compiled in
_TYPE = r"(?:i1|[iu](?:8|16|32|64)|fp(?:16|32|64)|bf16|fp8e4nv|fp8e5|fp8e4b15|fp8e4b8|fp8e5b16)"
_TOKEN = re.compile(rf"(?:\*{_TYPE}|{_TYPE}|constexpr)\Z")
MAX_ARGS = 64         # a kernel's arguments (Triton's own kernels take < 30)
MAX_SEEN = 16         # signatures a worker reports (its kernels' launchers)
MAX_WANTED = 256      # signatures the caller keeps count of
BUILD_PER_READY = 4   # launchers one spare's ready builds (each ~0.3 s of gcc)


def signature(x):
    """x as a signature (a tuple of Triton's type names), or None where it
    is not one: a list or tuple of at most MAX_ARGS names of _TOKEN's
    (tuples of arguments, tensor descriptors and TMA descriptors are left
    to the candidate's own build)."""
    if not isinstance(x, (list, tuple)) or not 0 < len(x) <= MAX_ARGS:
        return None
    if not all(isinstance(t, str) and _TOKEN.match(t) for t in x):
        return None
    return tuple(x)


# ---- the caller's wish list (process-wide, like triton_cache's memo)
_lock = threading.Lock()
_wanted = collections.Counter()   # signature -> how many seal replies named it
_present = set()                  # signatures a remembered fresh folder holds


def want(reported):
    """Counts the well-formed signatures of a worker's report (its seal
    reply's "launchers": anything, checked here); how many were kept."""
    if not isinstance(reported, list):
        return 0
    kept = 0
    for x in reported[:MAX_SEEN]:
        sig = signature(x)
        if sig is None:
            continue
        with _lock:
            if sig in _present or (sig not in _wanted and len(_wanted) >= MAX_WANTED):
                continue
            _wanted[sig] += 1
            kept += 1
    return kept


def to_build(n=BUILD_PER_READY):
    """The n most reported signatures no remembered folder holds yet, as
    lists (a ready request's "launchers")."""
    with _lock:
        return [list(sig) for sig, _ in _wanted.most_common() if sig not in _present][:n]


def present(signatures):
    """Marks the signatures whose launchers a fresh folder held when it was
    remembered (its ready's word: no candidate code had run in it)."""
    if not isinstance(signatures, list):
        return
    with _lock:
        for x in signatures[:MAX_WANTED]:
            sig = signature(x)
            if sig is not None:
                _present.add(sig)
                _wanted.pop(sig, None)


def forget():
    """Drops the wish list (tests)."""
    with _lock:
        _wanted.clear()
        _present.clear()


# ---- in a worker
class LauncherLog:
    """The signatures this process's Triton made launchers for (install:
    before the candidate's code; a candidate that removes it only loses its
    own report)."""

    def __init__(self):
        self.seen = []

    def install(self):
        from triton.backends.nvidia import driver
        make = driver.make_launcher

        def make_launcher(constants, signature_, tensordesc_meta, *args, **kw):
            try:
                sig = tuple(signature_.values())
                if not tensordesc_meta and sig not in self.seen and len(self.seen) < MAX_SEEN:
                    self.seen.append(sig)
            except Exception:  # noqa: BLE001 - the record is a hint: never the launch's failure
                pass
            return make(constants, signature_, tensordesc_meta, *args, **kw)
        make_launcher.kr_original = make
        driver.make_launcher = make_launcher

    def report(self):
        """The signatures seen, as lists (well-formed ones only)."""
        return [list(s) for s in self.seen if signature(s) is not None]


def build(signatures):
    """Builds (or finds, in TRITON_CACHE_DIR) the launcher of each
    signature as Triton's CudaLauncher does; the signatures whose launcher
    loaded, as lists. One that fails is skipped (its candidate builds it)."""
    from triton.backends.nvidia import driver
    from triton.runtime.build import compile_module_from_src
    make = getattr(driver.make_launcher, "kr_original", driver.make_launcher)
    done = []
    for x in signatures if isinstance(signatures, list) else ():
        sig = signature(x)
        if sig is None:
            continue
        try:
            src = make({}, dict(enumerate(sig)), None)
            compile_module_from_src(src=src, name="__triton_launcher", library_dirs=driver.library_dirs(),
                                    include_dirs=driver.include_dirs, libraries=driver.libraries)
        except Exception:  # noqa: BLE001 - no launcher ahead: the candidate's first launch builds it
            continue
        done.append(list(sig))
    return done
