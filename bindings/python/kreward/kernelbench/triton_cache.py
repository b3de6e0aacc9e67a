"""The library's own Triton kernels, compiled once per problem and planted
in each candidate's Triton cache.

A worker in the "start" sandbox compiles into its candidate's build folder
(TRITON_CACHE_DIR, the one folder it may write), so every new candidate
compiled the region's mask and the commitment's kernel again: ~3.3 s of its
`verify` phase on the H200 at 16b7c39 (0.2-0.4 s when they were cached).
The reference's worker compiles the same kernels (it unmasks and commits
alike), in its own folder, written by the problem's code and the library's
only. Before a candidate's worker starts, the Runner copies those entries
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
"""
import json
import os

# the @triton.jit functions of keystream_triton.py and commit_triton.py
# (tests/test_kernelbench_triton_cache.py checks the names against them)
LIBRARY_KERNELS = frozenset({"chacha_xor_tile_kernel", "chacha_xor_kernel",
                             "chacha_xor_joined_kernel", "mixed_sums_kernel"})
MAX_ENTRY_BYTES = 16 << 20  # a compiled kernel's files (cubin, IRs, metadata) are ~1 MB
GROUP_PREFIX = "__grp__"    # Triton's file listing an entry's files, by absolute path

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def library_entries(cache):
    """{entry: {file: bytes}} of the Triton cache folder `cache` whose group
    file names a library kernel (Triton's own temporary folders and every
    other kernel left out); the group files' paths rewritten at plant."""
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
        if not kernels or not kernels <= LIBRARY_KERNELS:
            continue
        blobs, size = {}, 0
        for f in files:
            p = os.path.join(path, f)
            if os.path.islink(p) or not os.path.isfile(p):
                continue
            size += os.path.getsize(p)
            if size > MAX_ENTRY_BYTES:
                break
            with open(p, "rb") as fh:
                blobs[f] = fh.read()
        else:
            found[entry] = blobs
    return found


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
    except (ValueError, KeyError, TypeError, AttributeError):
        return None
    return json.dumps({"child_paths": moved}).encode()


def _write_new(name, data, dir_fd):
    fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644,
                 dir_fd=dir_fd)
    with os.fdopen(fd, "wb") as f:
        f.write(data)


def plant(source_cache, ext):
    """Copies the library's kernels of Triton cache `source_cache` into
    ext/triton (a candidate's TRITON_CACHE_DIR); returns how many entries
    were planted. Entries already in ext/triton are left as they are."""
    entries = library_entries(source_cache)
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
                try:
                    os.mkdir(entry, 0o755, dir_fd=cache_fd)
                except FileExistsError:
                    continue
                entry_fd = os.open(entry, _DIR_FLAGS, dir_fd=cache_fd)
                try:
                    entry_dir = os.path.join(ext, "triton", entry)
                    # the kernel files first, the group files (what Triton
                    # looks for) last: a worker never sees a group whose
                    # files are missing
                    for name in sorted(files, key=lambda n: n.startswith(GROUP_PREFIX)):
                        data = files[name]
                        if name.startswith(GROUP_PREFIX):
                            data = _regrouped(data, entry_dir, files)
                            if data is None:
                                continue
                        _write_new(name, data, entry_fd)
                    planted += 1
                finally:
                    os.close(entry_fd)
        finally:
            os.close(cache_fd)
    finally:
        os.close(ext_fd)
    return planted
