"""What a vetting run is given: files and folders, found and named.

A KernelBench-format file is a .py defining Model, get_inputs and
get_init_inputs; a kreward problem is a folder holding problem.json (or
that file named directly). A folder is walked: each .py that looks like a
KernelBench problem and each folder with a problem.json is one problem;
other files are skipped and counted. A problem's name is its path relative
to the common folder of what was given, which is also where it goes in the
kept/ and refused/ folders."""
import hashlib
import os

from ..kernelbench.source_kind import looks_like_kernelbench


class Problem:
    """path: the .py, or the kreward problem's folder (what is hashed and
    copied)."""

    def __init__(self, path, kind):
        self.path, self.kind = os.path.abspath(path), kind
        self.name = None

    def sha256(self):
        h = hashlib.sha256()
        if self.kind == "kreward":
            for root, dirs, files in os.walk(self.path):  # links to folders are not followed
                dirs.sort()
                for f in sorted(files):
                    p = os.path.join(root, f)
                    h.update(os.path.relpath(p, self.path).encode() + b"\0")
                    if os.path.islink(p) or not os.path.isfile(p):
                        h.update(b"link:" + os.readlink(p).encode() if os.path.islink(p) else b"x")
                        continue  # a FIFO or a device would hang or never end the read
                    with open(p, "rb") as fh:
                        h.update(hashlib.sha256(fh.read()).digest())
        else:
            with open(self.path, "rb") as fh:
                h.update(fh.read())
        return h.hexdigest()


def _kernelbench_file(path):
    try:
        with open(path, errors="replace") as f:
            return looks_like_kernelbench(f.read(1 << 20))
    except OSError:
        return False


MARK = ".kreward-vet"  # output.py: a vetting run's folder, never a problem set


def find(paths, skip=()):
    """([Problem] named and sorted by name, [skipped path]). skip: folders
    not walked (a run's own output folder); a vetting run's folder (its
    kept/ and refused/ copies) is never walked either."""
    skip = {os.path.realpath(s) for s in skip}
    found, skipped = [], []
    for given in paths:
        if os.path.isfile(given):
            if os.path.basename(given) == "problem.json":
                found.append(Problem(os.path.dirname(os.path.abspath(given)), "kreward"))
            elif given.endswith(".py") and _kernelbench_file(given):
                found.append(Problem(given, "kernelbench"))
            else:
                skipped.append(given)
        elif os.path.isdir(given):
            for root, dirs, files in os.walk(given):
                if os.path.realpath(root) in skip or MARK in files:
                    dirs[:] = []
                    continue
                dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d != "__pycache__")
                if "problem.json" in files:
                    found.append(Problem(root, "kreward"))
                    dirs[:] = []  # its candidates/ are not problems
                    continue
                for f in sorted(files):
                    p = os.path.join(root, f)
                    if f.endswith(".py") and _kernelbench_file(p):
                        found.append(Problem(p, "kernelbench"))
                    elif f.endswith(".py"):
                        skipped.append(p)
        else:
            raise FileNotFoundError(f"{given}: no such file or folder")
    seen, unique = set(), []
    for p in found:
        if p.path not in seen:
            seen.add(p.path)
            unique.append(p)
    # a kreward problem inside another's folder (both given) is the outer's file
    folders = [p.path for p in unique if p.kind == "kreward"]
    inner = {p.path for p in unique
             if any(p.path != f and p.path.startswith(f.rstrip("/") + "/") for f in folders)}
    skipped += sorted(inner)
    unique = [p for p in unique if p.path not in inner]
    _name(unique)
    return sorted(unique, key=lambda p: p.name), skipped


def _name(problems):
    if not problems:
        return
    parents = [os.path.dirname(p.path) for p in problems]
    root = os.path.commonpath(parents)
    for p in problems:
        p.name = os.path.relpath(p.path, root)
