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


def _inlined(obj, folder):
    """{"source": FILE, ...} as {"cuda": FILE's text, ...} (a copy)."""
    obj = dict(obj)
    if isinstance(obj.get("source"), str):
        with open(os.path.join(folder, obj.pop("source"))) as f:
            obj["cuda"] = f.read()
    return obj


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
        stamp = os.stat(path).st_mtime_ns
        with _lock:
            hit = _cache.get(path)
            if hit is not None and hit[0] == stamp:
                return hit[1]
        with open(path) as f:
            d = json.load(f)
        ref = d.get("reference")
        if isinstance(ref, dict):
            ref = _inlined(ref, os.path.dirname(path))
            if isinstance(ref.get("fast"), dict):  # the fast kernel beside it, the same way
                ref["fast"] = _inlined(ref["fast"], os.path.dirname(path))
            d = dict(d, reference=ref)
        with _lock:
            _cache[path] = (stamp, d)
        return d
    return spec
