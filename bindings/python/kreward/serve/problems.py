"""The server's problems: registered by name from directories, or sent
inline by the client.

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

from ..errors import KrewardError


class ProblemError(ValueError):
    """A problem the request cannot have (HTTP 400 or 404)."""

    def __init__(self, message, status=400):
        super().__init__(message)
        self.status = status


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
        self._loaded = {}
        self._inline = collections.OrderedDict()
        self._inline_max = inline_cache
        self._lock = threading.Lock()

    def names(self):
        return sorted(self.paths)

    def get(self, spec):
        """The kreward.Problem for a request's "problem" field."""
        if isinstance(spec, dict):
            return self._parse(json.dumps(spec, sort_keys=True))
        if not isinstance(spec, str) or not spec.strip():
            raise ProblemError("problem: a registered name, a path under the server's problem "
                               "directories, or the problem's JSON (object or text)")
        if spec.lstrip().startswith("{"):
            return self._parse(spec)
        if spec in self.paths:
            return self._load(self.paths[spec])
        if os.sep in spec or spec.endswith(".json"):
            return self._load(self._inside(spec))
        raise ProblemError(f"unknown problem {spec!r} (GET /v1/problems lists the names)", 404)

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
