"""Problems of both kinds, and telling them apart.

A kreward problem is JSON (a path to problem.json, its text, or a dict): the
library runs its candidates, CUDA or Triton kernels with a launch plan. A
KernelBench problem is a Python file with a torch `Model`, `get_inputs()`
and `get_init_inputs()` (a `.py` path, the file's text, or a registered
name): its candidates are `ModelNew` modules, run by kreward.kernelbench.
Every front door (kreward.Evaluator and so the trainer adapters, `kreward
serve`, the Ray pool, the environments, the CLI) takes either and asks
`resolve` which it is.

Names: `register(name, path)` or `register_directory(folder)` (every
KernelBench file below it, by its path relative to the folder without
`.py`, e.g. "level1/01_relu", and by its file name alone when no other file
has it); a name is looked up before anything else is tried.

A KernelBench file's text (a dataset carries the whole reference file, as
KernelGYM's `reference_code` does) is kept as a file named by its content
under the source cache ($KREWARD_KERNELBENCH_SOURCES, else
~/.cache/kreward/kernelbench-sources): the importer and the workers read
files, and one text is one file however often it is sent."""
import hashlib
import json
import os
import re
import threading

from .kernelbench.source_kind import looks_like_kernelbench  # noqa: F401 - the front doors' test, here too

KREWARD, KERNELBENCH = "kreward", "kernelbench"
DEFAULT_TOL = 1e-2  # KernelBench's eval: torch.allclose(atol=1e-02, rtol=1e-02)
SOURCES_ENV = "KREWARD_KERNELBENCH_SOURCES"
DEFAULT_SOURCES = os.path.join(os.path.expanduser("~"), ".cache", "kreward",
                               "kernelbench-sources")
MAX_SOURCE_BYTES = 4 << 20  # a problem file larger than this is not a problem file



class ProblemError(ValueError):
    """A problem that cannot be had: not found, unreadable, refused by the
    importer. .status is the HTTP status a server answers with."""

    def __init__(self, message, status=400):
        super().__init__(message)
        self.status = status


class KernelBenchProblem:
    """A KernelBench-format problem: its file, its text and name, and the
    import (kreward.kernelbench.import_problem: probes in subprocesses,
    kept by content on disk), made once on first use. Equal problems (the
    same text and tolerances) share a key, which the scheduler keeps warm
    workers by."""
    kind = KERNELBENCH

    def __init__(self, path, name=None, atol=DEFAULT_TOL, rtol=DEFAULT_TOL, scale=True):
        self.path = os.path.abspath(path)
        with open(self.path, "rb") as f:
            raw = f.read(MAX_SOURCE_BYTES + 1)
        if len(raw) > MAX_SOURCE_BYTES:
            raise ProblemError(f"{path}: over {MAX_SOURCE_BYTES} bytes: not a problem file", 413)
        self.source = raw.decode("utf-8", "replace")
        if not looks_like_kernelbench(self.source):
            raise ProblemError(f"{path}: not a KernelBench problem (no top-level `class Model(` "
                               "and `def get_inputs(`)")
        self.name = name or os.path.splitext(os.path.basename(self.path))[0]
        self.atol, self.rtol, self.scale = atol, rtol, scale
        digest = hashlib.sha256(raw).hexdigest()
        self.key = f"{digest}:{atol!r}:{rtol!r}:{scale}"
        self._imported = None
        self._refused = None
        self._lock = threading.Lock()

    def imported(self):
        """The ImportedProblem (import_problem's result), made on first use;
        ProblemError with the importer's reason when it refuses the file."""
        with self._lock:
            if self._refused is not None:  # (a refusal costs the probes once)
                raise ProblemError(self._refused)
            if self._imported is None:
                from .kernelbench.importer import ImportRefused, import_problem
                try:
                    self._imported = import_problem(self.path, atol=self.atol, rtol=self.rtol,
                                                    scale=self.scale)
                except ImportRefused as e:
                    self._refused = f"KernelBench problem {self.name}: {e.reason}"
                    raise ProblemError(self._refused) from e
            return self._imported

    @property
    def weak(self):
        """Why the problem can be passed without computing it (its import's
        soundness check), or None: reports then carry weak_problem."""
        return self.imported().weak

    def statement(self):
        """The problem as a model is shown it: the file's text."""
        return self.source

    def close(self):
        pass  # nothing held: the import is plain data, workers belong to the scheduler

    def __repr__(self):
        return f"<KernelBenchProblem {self.name} ({self.path})>"


# ---- names ----

_names = {}
_names_lock = threading.Lock()


def register(name, path):
    """Makes a KernelBench file known by name (in this process)."""
    if not isinstance(name, str) or not name:
        raise ValueError("a problem's name is a non-empty string")
    path = os.path.abspath(path)
    if not os.path.isfile(path):
        raise ProblemError(f"{path}: no such file", 404)
    with _names_lock:
        _names[name] = path


def scan_kernelbench(folder):
    """{name: path} of the KernelBench files below a folder: each by its
    path relative to the folder without .py ("level1/01_relu"), and by its
    file name alone ("01_relu") where no other file has that name."""
    folder = os.path.realpath(folder)
    if not os.path.isdir(folder):
        raise FileNotFoundError(f"problem directory {folder}: not a directory")
    found = {}
    for root, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for f in sorted(files):
            if not f.endswith(".py"):
                continue
            path = os.path.join(root, f)
            try:
                with open(path, encoding="utf-8", errors="replace") as fh:
                    text = fh.read(MAX_SOURCE_BYTES)
            except OSError:
                continue
            if looks_like_kernelbench(text):
                found[os.path.relpath(path, folder)[:-3].replace(os.sep, "/")] = path
    stems = {}
    for rel, path in found.items():
        stems.setdefault(rel.rsplit("/", 1)[-1], []).append(path)
    names = dict(found)
    for stem, paths in stems.items():
        if len(paths) == 1 and stem not in names:
            names[stem] = paths[0]
    return names


def register_directory(folder):
    """register() for every KernelBench file below folder (scan_kernelbench's
    names); returns them."""
    names = scan_kernelbench(folder)
    with _names_lock:
        _names.update(names)
    return names


def registered():
    """{name: path} of the KernelBench problems registered in this process."""
    with _names_lock:
        return dict(_names)


# ---- texts as files ----

def source_file(text, folder=None):
    """The file holding a KernelBench problem's text (made once, named by
    its content, written whole before it is named)."""
    data = text.encode("utf-8")
    if len(data) > MAX_SOURCE_BYTES:
        raise ProblemError(f"a KernelBench problem of {len(data)} bytes: over the limit of "
                           f"{MAX_SOURCE_BYTES}", 413)
    folder = folder or os.environ.get(SOURCES_ENV) or DEFAULT_SOURCES
    os.makedirs(folder, mode=0o700, exist_ok=True)
    path = os.path.join(folder, hashlib.sha256(data).hexdigest() + ".py")
    if not os.path.isfile(path):
        tmp = f"{path}.{os.getpid()}.{threading.get_ident()}.tmp"
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    return path


# ---- which kind ----

def _is_kreward_json(text):
    return text.lstrip().startswith("{")


def kind_of(spec, names=None):
    """KREWARD or KERNELBENCH for a problem spec (a KernelBenchProblem, a
    kreward problem's dict or JSON, a path, a KernelBench file's text, or a
    registered name); ProblemError when it is none of them."""
    if isinstance(spec, KernelBenchProblem):
        return KERNELBENCH
    if getattr(spec, "kind", None) == KREWARD or isinstance(spec, dict):
        return KREWARD
    if hasattr(spec, "handle"):  # a kreward.Problem made by a Context
        return KREWARD
    if isinstance(spec, os.PathLike):
        spec = os.fspath(spec)
    if not isinstance(spec, str) or not spec.strip():
        raise ProblemError("a problem is a kreward problem (problem.json's path, its JSON or a "
                           "dict) or a KernelBench problem (a .py path, the file's text or a "
                           "registered name)")
    if spec in (names if names is not None else registered()):
        return KERNELBENCH
    if _is_kreward_json(spec):
        return KREWARD
    if looks_like_kernelbench(spec):
        return KERNELBENCH
    if spec.endswith(".py"):
        return KERNELBENCH
    return KREWARD


def kernelbench(spec, names=None, atol=DEFAULT_TOL, rtol=DEFAULT_TOL, source_folder=None):
    """The KernelBenchProblem of a spec kind_of() calls KERNELBENCH.
    names: {name: path} to look names up in (default: registered())."""
    if isinstance(spec, KernelBenchProblem):
        return spec
    if isinstance(spec, os.PathLike):
        spec = os.fspath(spec)
    table = names if names is not None else registered()
    if spec in table:
        return KernelBenchProblem(table[spec], name=spec, atol=atol, rtol=rtol)
    if looks_like_kernelbench(spec):
        return KernelBenchProblem(source_file(spec, source_folder), name=_name_in(spec),
                                  atol=atol, rtol=rtol)
    if not os.path.isfile(spec):
        raise ProblemError(f"KernelBench problem {spec!r}: no such file, and not a registered "
                           "name", 404)
    return KernelBenchProblem(spec, atol=atol, rtol=rtol)


def _name_in(text):
    """A name for a problem sent as text: its Model's docstring's first
    words, or "inline"."""
    m = re.search(r'^class\s+Model\s*\([^)]*\)\s*:\s*\n\s+(?:"""|\'\'\')\s*([^\n"\']{1,60})',
                  text, re.M)
    words = re.sub(r"[^A-Za-z0-9]+", "_", m.group(1)).strip("_").lower() if m else ""
    return f"inline_{words}" if words else "inline"


def key_of(spec):
    """A hashable key for a problem spec, for caches (a dict's sorted JSON,
    a path or text as given)."""
    if isinstance(spec, dict):
        return json.dumps(spec, sort_keys=True)
    if isinstance(spec, KernelBenchProblem):
        return spec.key
    return os.fspath(spec) if isinstance(spec, os.PathLike) else spec


def vet(paths, out=None, **options):
    """Vets a task set (kreward/vet: docs/vetting.md): KernelBench files and
    kreward problems under paths; out: the run's folder (vet.jsonl,
    summary.md, kept/, refused/). Returns a kreward.vet.VetRun."""
    from . import vet as vetting
    return vetting.run(paths, out=out, **options)
