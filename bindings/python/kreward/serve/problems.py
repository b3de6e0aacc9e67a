"""The server's problems, of both kinds: registered by name from
directories, or sent inline by the client.

Kinds (kreward.problems): a kreward problem (a directory's problem.json, or
its JSON inline) or a KernelBench problem (a .py file under a directory,
by its relative path without .py or its file name; or the file's text
inline, as KernelGYM's clients send `reference_code`). A KernelBench
problem is imported once (probes in subprocesses, kept by content) and
kept; the import runs in the request's worker thread, never the event
loop.

A request names its problem (a registered name), sends it inline (a JSON
object, or JSON text), or gives a path. Paths are read only inside the
registered directories: a client must not make the server read arbitrary
files (a problem's "reference": {"source": ...} is a file read). Inline
problems must be self-contained ("reference": {"cuda": "..."}): a
relative file in them resolves against nothing. Golden problems are
refused: their outputs come from the caller's callback, which a remote
caller cannot lend the server."""
import collections
import hashlib
import json
import os
import threading

from .. import problems as _problems
from ..errors import KrewardError
from ..problems import ProblemError  # noqa: F401 - (HTTP 400, 404 or 413: its .status)


def scan(directories):
    """{name: path of problem.json} for every directory holding a
    problem.json under the given ones (one level deep, or the directory
    itself). Each is registered under its directory's name and under the
    problem's own "name" when no other problem claims it."""
    by_dir, by_name, claimed = {}, {}, collections.Counter()
    for root in directories:
        root = os.path.realpath(root)
        if not os.path.isdir(root):
            raise FileNotFoundError(f"problem directory {root}: not a directory")
        subdirs = [root] + [os.path.join(root, d) for d in sorted(os.listdir(root))]
        for d in subdirs:
            path = os.path.join(d, "problem.json")
            if not os.path.isfile(path):
                continue
            by_dir.setdefault(os.path.basename(d), path)
            try:
                with open(path) as f:
                    name = json.load(f).get("name")
            except (OSError, ValueError):
                name = None  # kept by its directory name; loading says what is wrong
            if isinstance(name, str) and name:
                claimed[name] += 1
                by_name.setdefault(name, path)
    names = dict(by_dir)
    for name, path in by_name.items():
        if claimed[name] == 1 and name not in names:
            names[name] = path
    return names


def one_name_each(paths):
    """One name per problem file of scan()'s {name: path}, for listing or
    drawing problems uniformly (most are registered twice: under their
    directory's name and their own): the problem's own name where it has
    one."""
    def by_directory(name):
        return name == os.path.basename(os.path.dirname(paths[name]))
    chosen = {}
    for name in sorted(paths, key=lambda n: (by_directory(n), n)):
        chosen.setdefault(paths[name], name)
    return sorted(chosen.values())


class Registry:
    """Problems by name (loaded on first use and kept), inline problems
    (parsed and kept in a bounded cache keyed by their text's hash)."""

    def __init__(self, ctx, directories, inline_cache=256):
        self.ctx = ctx
        self.directories = [os.path.realpath(d) for d in directories]
        self.paths = scan(self.directories)
        self.kernelbench = {}
        for d in self.directories:
            for name, path in _problems.scan_kernelbench(d).items():
                self.kernelbench.setdefault(name, path)
        self._loaded = {}
        self._inline = collections.OrderedDict()
        self._inline_max = inline_cache
        self._lock = threading.Lock()

    def names(self):
        return sorted(set(self.paths) | set(self.kernelbench))

    def get(self, spec):
        """The problem for a request's "problem" field: a kreward.Problem, or
        a KernelBenchProblem (imported)."""
        if isinstance(spec, dict):
            return self._parse(json.dumps(spec, sort_keys=True))
        if not isinstance(spec, str) or not spec.strip():
            raise ProblemError("problem: a registered name, a path under the server's problem "
                               "directories, the problem's JSON (object or text), or a "
                               "KernelBench problem's text")
        if spec.lstrip().startswith("{"):
            return self._parse(spec)
        if spec in self.paths:
            return self._load(self.paths[spec])
        if spec in self.kernelbench:
            return self._kernelbench(self.kernelbench[spec], spec)
        if _problems.looks_like_kernelbench(spec):
            return self._kernelbench_text(spec)
        if spec.endswith(".py"):
            return self._kernelbench(self._inside(spec), None)
        if os.sep in spec or spec.endswith(".json"):
            return self._load(self._inside(spec))
        raise ProblemError(f"unknown problem {spec!r} (GET /v1/problems lists the names)", 404)

    def _kernelbench(self, path, name):
        with self._lock:
            p = self._loaded.get(path)
            if p is None:
                p = self._loaded[path] = _problems.KernelBenchProblem(path, name=name)
        p.imported()  # (once; a refusal is kept and said again)
        return p

    def _kernelbench_text(self, text):
        key = "kernelbench:" + hashlib.sha256(text.encode("utf-8", "replace")).hexdigest()
        with self._lock:
            p = self._inline.get(key)
            if p is not None:
                self._inline.move_to_end(key)
        if p is None:
            p = _problems.kernelbench(text, names={})
            with self._lock:
                self._inline[key] = p
                while len(self._inline) > self._inline_max:
                    self._inline.popitem(last=False)
        p.imported()
        return p

    def _inside(self, path):
        real = os.path.realpath(path)
        if os.path.isdir(real):
            real = os.path.join(real, "problem.json")
        if not any(real.startswith(d + os.sep) for d in self.directories):
            raise ProblemError(f"problem path {path!r} is outside the server's problem "
                               "directories: send the problem inline or by name", 403)
        if not os.path.isfile(real):
            raise ProblemError(f"no problem at {path!r}", 404)
        return real

    def _load(self, path):
        with self._lock:
            p = self._loaded.get(path)
            if p is None:
                try:
                    p = self._loaded[path] = self._check(self.ctx.load_problem(path))
                except KrewardError as e:
                    raise ProblemError(f"problem {path}: {e}") from e
            return p

    def _parse(self, text):
        key = hashlib.sha256(text.encode()).hexdigest()
        with self._lock:
            p = self._inline.get(key)
            if p is not None:
                self._inline.move_to_end(key)
                return p
        try:
            p = self._check(self.ctx.parse_problem(text, name="inline problem"))
        except KrewardError as e:
            raise ProblemError(f"inline problem: {e}") from e
        with self._lock:
            self._inline[key] = p
            while len(self._inline) > self._inline_max:
                # jobs in flight keep their Problem alive: dropping it here is safe
                self._inline.popitem(last=False)
        return p

    @staticmethod
    def _check(problem):
        info = problem.info()
        ref = info.get("reference") if isinstance(info, dict) else None
        if isinstance(ref, dict) and ref.get("kind") == "golden":
            problem.close()
            raise ProblemError("golden problems need the caller's callback to compute their "
                               "outputs: evaluate them with a local kreward.Pool")
        return problem
