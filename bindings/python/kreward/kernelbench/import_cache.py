"""The import's probe results kept on disk, by content: importing a file
runs its Model and get_inputs in probe processes, on the CPU at the file's
own sizes for the value statistics (35 s on the H200's host, 33-63 s here,
for an upstream KernelBench level 1 problem of 4096 x 393216 floats), so a
trainer that imports its problems at every start pays that each time.

The key is the file's bytes, whether it was scaled, the importer's and the
probe's own sources and torch's version: any change of what could change
the probes' answers is another key. Only successful imports are kept (a
refusal may be a probe's timeout, which another try may not repeat). A
file that does not read back as what was written is ignored and replaced:
the cache saves time, never decides a result."""
import hashlib
import json
import os
import tempfile

DEFAULT_DIR = os.path.join(os.path.expanduser("~"), ".cache", "kreward", "imports")
FORMAT = 1  # of the files written; another is ignored
_HERE = os.path.dirname(os.path.abspath(__file__))


def _torch_version():
    from importlib import metadata
    try:
        return metadata.version("torch")
    except metadata.PackageNotFoundError:
        return "none"


def key(path, scale, atol, rtol):
    """The cache key of importing the file at path (hex): the tolerances are
    in it since the soundness check's verdict depends on them."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        h.update(f.read())
    h.update(json.dumps({"scale": bool(scale), "atol": float(atol), "rtol": float(rtol),
                        "torch": _torch_version(), "format": FORMAT}).encode())
    for name in ("importer.py", "probe.py", "prefix_inputs.py", "import_process.py",
                 "import_cache.py", "soundness.py", "soundness_check.py", "inputs.py"):
        with open(os.path.join(_HERE, name), "rb") as f:
            h.update(hashlib.sha256(f.read()).digest())
    return h.hexdigest()


def read(cache_dir, k):
    """(meta, real, cases, notes) kept under key k, or None."""
    try:
        with open(os.path.join(cache_dir, k + ".json")) as f:
            d = json.load(f)
        if d.get("format") != FORMAT or d.get("key") != k:
            return None
        cases = [(how, overrides, probe) for how, overrides, probe in d["cases"]]
        if not (isinstance(d["meta"], dict) and isinstance(d["real"], dict)
                and all(isinstance(n, str) for n in d["notes"])):
            return None
        return d["meta"], d["real"], cases, list(d["notes"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def write(cache_dir, k, meta, real, cases, notes):
    """Keeps an import's probe results under key k (written whole or not
    at all: a temporary file renamed into place). A cache that cannot be
    written is no error: the next import probes again."""
    try:
        os.makedirs(cache_dir, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=cache_dir, prefix=".import-", suffix=".tmp")
        try:
            with os.fdopen(fd, "w") as f:
                json.dump({"format": FORMAT, "key": k, "meta": meta, "real": real,
                           "cases": [list(c) for c in cases], "notes": notes}, f)
            os.replace(tmp, os.path.join(cache_dir, k + ".json"))
        except BaseException:
            os.unlink(tmp)
            raise
    except OSError:
        pass
