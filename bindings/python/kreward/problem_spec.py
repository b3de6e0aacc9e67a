"""Problems sent to another process or machine (`kreward serve`, a Ray
actor): made self-contained on the way.

A problem given as a path is read here and sent as JSON, its reference
source inlined ("reference": {"cuda": ...}, its "fast" kernel too), or, for a KernelBench file,
as the file's text: the path means nothing on the server. A name or JSON text goes as is (a name is looked up in the
server's problem directories)."""
import json
import os
import threading

_cache = {}
_lock = threading.Lock()


def _inlined(obj, folder, files):
    """{"source": FILE, ...} as {"cuda": FILE's text, ...} (a copy); the
    file read is added to files."""
    obj = dict(obj)
    if isinstance(obj.get("source"), str):
        source = os.path.join(folder, obj.pop("source"))
        with open(source, encoding="utf-8", errors="surrogateescape") as f:
            obj["cuda"] = f.read()
        files.append(source)
    return obj


def _stamps(files):
    """The files' modification times (None for one that is gone)."""
    out = []
    for f in files:
        try:
            out.append(os.stat(f).st_mtime_ns)
        except OSError:
            out.append(None)
    return out


def portable(spec):
    """A problem spec another process can resolve: a dict (a local file's
    JSON, reference inlined), a KernelBench file's text (for a local .py
    file or a KernelBenchProblem), or the given name, JSON text or dict."""
    from .problems import KernelBenchProblem, looks_like_kernelbench
    if isinstance(spec, KernelBenchProblem):
        return spec.source
    if isinstance(spec, os.PathLike):
        spec = os.fspath(spec)
    if isinstance(spec, str) and spec.endswith(".py") and os.path.isfile(spec):
        with open(spec, encoding="utf-8", errors="replace") as f:
            text = f.read()
        return text if looks_like_kernelbench(text) else spec
    if isinstance(spec, str) and not spec.lstrip().startswith("{") and os.path.exists(spec):
        path = os.path.realpath(spec)
        if os.path.isdir(path):
            path = os.path.join(path, "problem.json")
        with _lock:
            hit = _cache.get(path)
        if hit is not None and hit[0] == _stamps(hit[2]):
            return hit[1]
        with open(path) as f:
            d = json.load(f)
        files = [path]  # every file the spec is made of: a changed one is read again
        ref = d.get("reference")
        if isinstance(ref, dict):
            ref = _inlined(ref, os.path.dirname(path), files)
            if isinstance(ref.get("fast"), dict):  # the fast kernel beside it, the same way
                ref["fast"] = _inlined(ref["fast"], os.path.dirname(path), files)
            d = dict(d, reference=ref)
        with _lock:
            _cache[path] = (_stamps(files), d, files)
        return d
    return spec
