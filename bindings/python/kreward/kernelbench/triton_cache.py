"""The library's own Triton kernels, compiled once per problem and planted
in each candidate's Triton cache.

A worker in the "start" sandbox compiles into its candidate's build folder
(TRITON_CACHE_DIR, the one folder it may write), so every new candidate
compiled the region's mask and the commitment's kernel again: ~3.3 s of its
`verify` phase on the H200 at 16b7c39 (0.2-0.4 s when they were cached).
The reference's worker compiles the same kernels (it unmasks and commits
alike), in its own folder, written by the problem's code and the library's
only (in the "start" sandbox; in "init" a candidate's threads started before
its sandbox keep the user's file access, which reaches that folder and much
more: docs/kernelbench.md). Its files are still read as untrusted: no link
followed, nothing but regular files, no more than MAX_ENTRY_BYTES. Before a candidate's worker starts, the Runner copies those entries
(only those: the kernels named in LIBRARY_KERNELS) into the candidate's
folder, so its Triton finds them there.

The candidate's folder is the candidate's to write: a worker of the same
source may have left anything there, a symbolic link to the trainer's files
included. So nothing is written through a path it could have placed: the
folders are opened without following links, an entry is copied only into a
folder made here (never into one that was there), every file is created new.
What the candidate left in its own folder (even a forged entry under a
library kernel's name) is its own worker's business: it can replace that
worker's code anyway.

Triton's host-side modules come along: its driver's helper (cuda_utils) and
the C launcher of each kernel signature (__triton_launcher), which Triton
builds with the host's C compiler into the cache at a process's first use.
Without them each candidate's first verify batch built three to five of
them with gcc (1.44 s of its `verify` on an H100 at e4b938c, the kernels'
cubins planted; 0.64 s with them planted, b197430). They are host code, and
a fresh spare loads them in its ready, before its isolation filter (the
"start" sandbox's file rules are in place): so they are trusted as far as
the reference's folder is. In a "start" Runner that folder is written by
the reference's worker alone (and by a candidate whose source is the
reference's, the same code); a Runner in "init" or without a sandbox on the
same cache_dir lets a candidate's threads started before its sandbox write
it, as they may write anything of the user's (docs/threat-model.md). A
spare's folder takes a source's name only after its ready is over
(processes.py), and each file appears whole under its name (_write_new).
"""
import json
import os
import re
import secrets
import stat
import sysconfig
import threading

# the @triton.jit functions of keystream_triton.py and commit_triton.py
# (tests/kernelbench/test_triton_cache.py checks the names against them)
LIBRARY_KERNELS = frozenset({"chacha_xor_tile_kernel", "chacha_xor_kernel",
                             "chacha_xor_joined_kernel", "mixed_sums_kernel",
                             "mixed_sums_table_kernel"})
MAX_ENTRY_BYTES = 16 << 20  # a compiled kernel's files (cubin, IRs, metadata) are ~1 MB
GROUP_PREFIX = "__grp__"    # Triton's file listing an entry's files, by absolute path
# Triton's host modules (triton/runtime/build.py compile_module_from_src):
# one file in a folder named by the sha256 of its C source and platform, in
# base32 without padding (triton/runtime/cache.py get_cache_manager)
_EXT = sysconfig.get_config_var("EXT_SUFFIX") or ".so"  # a Python extension module's file suffix
HOST_MODULES = frozenset(f"{name}{_EXT}" for name in ("cuda_utils", "__triton_launcher"))
MAX_MODULE_BYTES = 4 << 20  # a launcher is ~20-60 KB
_MODULE_ENTRY = re.compile(r"[A-Z2-7]{52}\Z")

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def library_entries(cache):
    """{entry: {file: bytes}} of the Triton cache folder `cache` whose group
    file names a library kernel, and Triton's host modules (HOST_MODULES:
    one regular file, its folder named as Triton names it); Triton's own
    temporary folders and every other kernel left out; the group files'
    paths rewritten at plant."""
    found = {}
    try:
        names = sorted(os.listdir(cache))
    except OSError:  # no cache yet: the reference's worker has not compiled
        return found
    for entry in names:
        path = os.path.join(cache, entry)
        if entry.startswith("tmp.") or os.path.islink(path) or not os.path.isdir(path):
            continue
        try:
            files = sorted(os.listdir(path))
        except OSError:
            continue
        kernels = {f[len(GROUP_PREFIX):].rsplit(".", 1)[0] for f in files if f.startswith(GROUP_PREFIX)}
        if not kernels:
            module = _host_module(path, entry, files)
            if module is not None:
                found[entry] = module
            continue
        if not kernels <= LIBRARY_KERNELS:
            continue
        blobs, left = {}, MAX_ENTRY_BYTES
        for f in files:
            data = _read_regular(path, f, left)
            if data is None:
                continue
            if len(data) > left:
                break
            left -= len(data)
            blobs[f] = data
        else:
            found[entry] = blobs
    return found


def _host_module(path, entry, files):
    """{file: bytes} of a host module's entry (one of HOST_MODULES, alone
    but for Triton's temporary folders), or None."""
    names = [f for f in files if not f.startswith("tmp.")]
    if not _MODULE_ENTRY.match(entry) or len(names) != 1 or names[0] not in HOST_MODULES:
        return None
    data = _read_regular(path, names[0], MAX_MODULE_BYTES)
    if not data or len(data) > MAX_MODULE_BYTES:
        return None
    return {names[0]: data}


def _read_regular(folder, name, most):
    """The bytes of folder/name if it is a regular file (no link followed,
    a FIFO not waited on), at most most + 1 of them; None otherwise."""
    try:
        fd = os.open(os.path.join(folder, name),
                     os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        chunks, n = [], 0
        while n <= most:
            chunk = os.read(fd, min(1 << 20, most + 1 - n))
            if not chunk:
                break
            chunks.append(chunk)
            n += len(chunk)
        return b"".join(chunks)
    except OSError:
        return None
    finally:
        os.close(fd)


def _regrouped(blob, entry_dir, files):
    """A group file's JSON with its paths moved into entry_dir; None if it
    names a file the entry lacks (Triton would then compile again)."""
    try:
        group = json.loads(blob)
        children = group["child_paths"]
        moved = {}
        for name, old in children.items():
            base = os.path.basename(old)
            if base not in files:
                return None
            moved[name] = os.path.join(entry_dir, base)
    except (ValueError, KeyError, TypeError, AttributeError, RecursionError):
        return None
    return json.dumps({"child_paths": moved}).encode()


def _write_new(name, data, dir_fd):
    """name in the folder dir_fd, created whole or not at all: written
    under a temporary name (Triton and library_entries skip "tmp.") and
    linked to name (which fails where name exists), since Triton loads a
    file it finds by its name alone: a worker warming in that folder
    while this plants must not dlopen half a module (helper-31)."""
    tmp = f"tmp.plant.{os.getpid()}.{secrets.token_hex(8)}"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644,
                 dir_fd=dir_fd)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.link(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd, follow_symlinks=False)
    finally:
        os.unlink(tmp, dir_fd=dir_fd)


# The library's entries as a fresh folder's worker compiled them in its
# ready (remember), kept by this process for every problem's candidates:
# the reference's folder of a problem has them only once its worker's ready
# is over, after its first candidate's worker started (the first candidate
# of each problem compiled them again in its verify: 2.5-2.9 s of it on an
# H100 at 7335438). Only a folder no problem's or candidate's code ran in
# is read (the caller's rule), so a problem's reference cannot reach the
# workers of another problem through this memo.
MAX_REMEMBERED_BYTES = 64 << 20
# Triton's launchers of the candidates' signatures (triton_launchers.py)
# among them, at most: every entry kept is planted in every later worker's
# folder (~25 KB and two files each), and a candidate chooses what it reports
MAX_LAUNCHERS = 64
LAUNCHER = f"__triton_launcher{_EXT}"
_remembered, _remembered_bytes = {}, 0
# the entries' names read and not kept (another kernel, such as the warm's
# own: every fresh folder has it), so a folder holding nothing new is not
# read again; Triton names an entry by its content's hash
_passed, MAX_PASSED = set(), 4096
_remembered_lock = threading.Lock()


def remember(cache):
    """Keeps the library's entries of Triton cache `cache` (a fresh folder's,
    after its worker's ready, before any source took it) for plant; reads
    the folder's files only where it has an entry not yet kept. How many
    entries were new."""
    global _remembered_bytes
    try:
        names = os.listdir(cache)
    except OSError:
        return 0
    with _remembered_lock:
        if all(n in _remembered or n in _passed or n.startswith("tmp.") for n in names):
            return 0
    new, found = 0, library_entries(cache)
    for entry, files in found.items():
        if not _whole(files):  # (caught half written: a later folder's is kept)
            continue
        size = sum(len(d) for d in files.values())
        with _remembered_lock:
            if entry in _remembered or _remembered_bytes + size > MAX_REMEMBERED_BYTES:
                continue
            if LAUNCHER in files and _launchers() >= MAX_LAUNCHERS:
                continue
            _remembered[entry] = files
            _remembered_bytes += size
            new += 1
    foreign = [n for n in names if n not in found and _foreign(os.path.join(cache, n))]
    with _remembered_lock:
        for n in foreign[:max(0, MAX_PASSED - len(_passed))]:
            _passed.add(n)
    return new


def _whole(files):
    """Whether an entry's files ({file: bytes}) are whole: each group file
    readable and naming only files the entry has (a host module: one)."""
    groups = [d for n, d in files.items() if n.startswith(GROUP_PREFIX)]
    return bool(files) and all(_regrouped(d, "/", files) is not None for d in groups)


def _foreign(path):
    """Whether a cache entry is another kernel's (its group file names no
    library kernel): what remember never keeps, so need not read again."""
    try:
        names = os.listdir(path)
    except OSError:
        return False
    kernels = {f[len(GROUP_PREFIX):].rsplit(".", 1)[0] for f in names if f.startswith(GROUP_PREFIX)}
    return bool(kernels) and not kernels <= LIBRARY_KERNELS


def _launchers():
    """How many launchers the memo holds (lock held)."""
    return sum(1 for files in _remembered.values() if LAUNCHER in files)


def launcher_room():
    """Whether the memo keeps another launcher (MAX_LAUNCHERS)."""
    with _remembered_lock:
        return _launchers() < MAX_LAUNCHERS


def remembered():
    """A copy of what remember kept ({entry: {file: bytes}})."""
    with _remembered_lock:
        return dict(_remembered)


def remembered_names():
    """The entries remember kept, by name."""
    with _remembered_lock:
        return frozenset(_remembered)


def forget():
    """Drops what remember kept (tests)."""
    global _remembered_bytes
    with _remembered_lock:
        _remembered.clear()
        _passed.clear()
        _remembered_bytes = 0


def plant(source_cache, ext, extra=None):
    """Copies the library's kernels and Triton's host modules of Triton
    cache `source_cache` (None: none), and the entries of extra ({entry:
    {file: bytes}}, as remembered returns), into ext/triton (a candidate's
    TRITON_CACHE_DIR); returns how many entries were planted. Entries
    already in ext/triton are left as they are."""
    entries = dict(extra or {})
    if source_cache is not None:
        entries.update(library_entries(source_cache))
    if not entries:
        return 0
    planted = 0
    ext_fd = os.open(ext, _DIR_FLAGS)
    try:
        try:
            os.mkdir("triton", 0o755, dir_fd=ext_fd)
        except FileExistsError:
            pass
        try:
            cache_fd = os.open("triton", _DIR_FLAGS, dir_fd=ext_fd)
        except OSError:  # a link or a file where the folder should be: the candidate's doing
            return 0
        try:
            for entry, files in entries.items():
                entry_dir = os.path.join(ext, "triton", entry)
                # the group files with their paths in the candidate's entry;
                # an entry with one Triton could not read is left out whole
                groups = {n: _regrouped(d, entry_dir, files) for n, d in files.items()
                          if n.startswith(GROUP_PREFIX)}
                if None in groups.values():
                    continue
                try:
                    os.mkdir(entry, 0o755, dir_fd=cache_fd)
                except FileExistsError:
                    continue
                entry_fd = os.open(entry, _DIR_FLAGS, dir_fd=cache_fd)
                try:
                    # the kernel files first, the group files (what Triton
                    # looks for) last: a worker never sees a group whose
                    # files are missing
                    for name, data in files.items():
                        if name not in groups:
                            _write_new(name, data, entry_fd)
                    for name, data in groups.items():
                        _write_new(name, data, entry_fd)
                    planted += 1
                except FileExistsError:  # a worker in this folder wrote it meanwhile: its own
                    pass
                finally:
                    os.close(entry_fd)
        finally:
            os.close(cache_fd)
    finally:
        os.close(ext_fd)
    return planted
