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
- the caller's wish list (want: process-wide, each report counted once,
  MAX_WANTED signatures; to_build: the most reported first, each leased to
  one ready at a time) goes to the next spare started in a fresh folder: in
  its ready (before any candidate's code runs in it, the folder written by
  the library's code alone) it makes each launcher's source with Triton's
  own make_launcher and builds it (build): the same source, so the same
  file, Triton would build in a candidate's process for that signature;
- that folder's Triton host modules are then remembered with the
  library's kernels (triton_cache.remember, MAX_LAUNCHERS of them) and
  planted in every later candidate's folder, where Triton finds the
  launcher by its source's hash and loads it instead of running gcc; the
  ready's word settles each signature asked (settle): kept, present; not
  built, refused; neither is asked again.
A candidate can at most make the spares build launchers for well-formed
signatures it chose (BUILD_PER_READY a ready, MAX_LAUNCHERS kept): CPU
time of the harness's, never code of its own in another candidate; a full
wish list gives a signature named once its place, so one candidate's
reports do not keep the others' out.

Standard library only at import (the worker loads it by path); Triton is
imported where a launcher is recorded or built."""
import collections
import re
import threading
import time

# Triton's names of argument types in a kernel's signature, as Triton 3.6
# spells them (triton/runtime/jit.py mangle_type; the launcher's C types:
# triton/backends/nvidia/driver.py ty_to_cpp): a scalar one of _SCALAR, a
# pointer "*" (or "*k", a constant one) and an element type (the fp8 ones
# only behind a pointer: make_launcher has no C type for a scalar fp8),
# "constexpr" an argument compiled in
_SCALAR = r"(?:[iu](?:1|8|16|32|64)|fp(?:16|32|64)|bf16)"
_FP8 = r"(?:fp8e4nv|fp8e5|fp8e4b15|fp8e4b8|fp8e5b16)"
_TOKEN = re.compile(rf"(?:\*k?(?:{_SCALAR}|{_FP8})|{_SCALAR}|constexpr)\Z")
MAX_ARGS = 64         # a kernel's arguments (Triton's own kernels take < 30)
MAX_SEEN = 16         # signatures a worker reports (its kernels' launchers)
MAX_WANTED = 256      # signatures the caller keeps count of
MAX_SETTLED = 4096    # signatures kept as built (or refused) before the oldest are forgotten
BUILD_PER_READY = 4   # launchers one spare's ready builds (each ~0.3 s of gcc)
LEASE_S = 60.0        # a signature handed to a ready is not handed to another for this long


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
_wanted = collections.Counter()          # signature -> how many seal replies named it
_settled = collections.OrderedDict()     # signature -> "present" or "refused", oldest first
_leased = {}                             # signature -> when a ready was asked to build it


def want(reported):
    """Counts the well-formed signatures of a worker's report (its seal
    reply's "launchers": anything, checked here), each once however often
    the report names it; how many were counted. Where the list is full, a
    signature named once only makes room (the first of those): one
    candidate's reports cannot keep the others' out for good."""
    if not isinstance(reported, list):
        return 0
    sigs = []
    for x in reported[:MAX_SEEN]:
        sig = signature(x)
        if sig is not None and sig not in sigs:
            sigs.append(sig)
    kept = 0
    with _lock:
        for sig in sigs:
            if sig in _settled:
                continue
            if sig not in _wanted and len(_wanted) >= MAX_WANTED:
                once = next((k for k, n in _wanted.items() if n <= 1), None)
                if once is None:
                    continue
                del _wanted[once]
            _wanted[sig] += 1
            kept += 1
    return kept


def to_build(n=BUILD_PER_READY, now=None):
    """The n most reported signatures not built (or refused) yet and not
    handed to another ready in the last LEASE_S, as lists (a ready
    request's "launchers"); they are leased to that ready."""
    now = time.monotonic() if now is None else now
    with _lock:
        out = [sig for sig, _ in _wanted.most_common()
               if now - _leased.get(sig, -LEASE_S) >= LEASE_S][:n]
        for sig in out:
            _leased[sig] = now
        return [list(sig) for sig in out]


def settle(asked, built, kept):
    """After a fresh folder's ready: of the signatures `asked` of it, those
    `built` (its ready's word: [[signature, entry], ...], no candidate code
    had run there) whose entry the process remembered (`kept`: entry names)
    are present, asked no more; one asked and not built is refused (Triton
    could not make it) and asked no more either; one built but not kept
    (the memo's room) stays wanted, its lease running out."""
    built_entries = {}
    for x in built if isinstance(built, list) else ():
        if isinstance(x, list) and len(x) == 2 and isinstance(x[1], str):
            sig = signature(x[0])
            if sig is not None:
                built_entries[sig] = x[1]
    with _lock:
        for x in asked or ():
            sig = signature(x)
            if sig is None:
                continue
            entry = built_entries.get(sig)
            if entry is None:
                state = "refused"
            elif entry in kept:
                state = "present"
            else:
                continue
            _wanted.pop(sig, None)
            _leased.pop(sig, None)
            _settled[sig] = state
            _settled.move_to_end(sig)
            while len(_settled) > MAX_SETTLED:
                _settled.popitem(last=False)


def settled(sig):
    """"present", "refused" or None (tests, the docs)."""
    with _lock:
        return _settled.get(signature(sig))


def forget():
    """Drops the wish list (tests)."""
    with _lock:
        _wanted.clear()
        _settled.clear()
        _leased.clear()


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

        def make_launcher(*args, **kw):
            try:
                sig = args[1] if len(args) > 1 else kw.get("signature")
                sig = tuple(sig.values())
                meta = args[2] if len(args) > 2 else kw.get("tensordesc_meta")
                if not meta and sig not in self.seen and len(self.seen) < MAX_SEEN:
                    self.seen.append(sig)
            except Exception:  # noqa: BLE001 - the record is a hint: never the launch's failure
                pass
            return make(*args, **kw)
        make_launcher.kr_original = make
        driver.make_launcher = make_launcher

    def report(self):
        """The signatures seen, as lists (well-formed ones only)."""
        return [list(s) for s in self.seen if signature(s) is not None]


def build(signatures):
    """Builds (or finds, in TRITON_CACHE_DIR) the launcher of each
    signature as Triton's CudaLauncher does: [[signature, entry], ...] for
    those whose launcher loaded, entry the cache folder it is in (named by
    its source's hash). One that fails is left out (its candidates build
    it, or cannot)."""
    import os
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
            mod = compile_module_from_src(src=src, name="__triton_launcher", library_dirs=driver.library_dirs(),
                                          include_dirs=driver.include_dirs, libraries=driver.libraries)
            entry = os.path.basename(os.path.dirname(mod.__file__))
        except Exception:  # noqa: BLE001 - no launcher ahead: the candidate's first launch builds it
            continue
        done.append([list(sig), entry])
    return done
