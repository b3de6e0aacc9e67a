"""Problems for environments, of both kinds: names resolved from the problem
directories (kreward problems' problem.json, KernelBench files), and the
statement a model reads: for a kreward problem what to compute, the tensors
and how to write the launch line; for a KernelBench problem the Model's file
and what a ModelNew answer is."""
import json
import os
import threading

from .. import problems as _problems
from ..context import Context
from ..serve.problems import one_name_each, scan
from ..serve.server import default_problem_dirs

HOW_MODELNEW = ("Write a Python module that defines `class ModelNew(nn.Module)`, with the same "
                "constructor arguments and forward() as Model, computing the same outputs "
                "faster with kernels of your own (CUDA through "
                "torch.utils.cpp_extension.load_inline, or Triton). Work done by torch or a "
                "library earns no speed credit. Put the whole module in one ```python fenced "
                "block.")

HOW = ("Write one CUDA C++ kernel file that computes the outputs from the inputs. Declare how it "
       "is launched with a line such as\n"
       "// kreward: launch KERNEL grid=(cdiv(N,256)) block=(256) args=(a, b, c, N)\n"
       "and put the file in a ```cuda fenced block.")


class Problems:
    def __init__(self, directories=None):
        dirs = directories or default_problem_dirs()
        self.paths = scan(dirs)
        self.kernelbench = {}
        for d in dirs:
            for name, path in _problems.scan_kernelbench(d).items():
                if name not in self.paths:
                    self.kernelbench.setdefault(name, path)
        self.paths.update(self.kernelbench)
        self._ctx = None
        self._statements = {}
        self._lock = threading.Lock()

    def names(self):
        return sorted(self.paths)

    def distinct_names(self):
        """One name per problem (names() lists most twice): a kreward
        problem's own name, a KernelBench file's relative path."""
        kreward = {n: p for n, p in self.paths.items() if n not in self.kernelbench}
        kb = {}
        for name in sorted(self.kernelbench, key=lambda n: (-n.count("/"), n)):
            kb.setdefault(self.kernelbench[name], name)
        return sorted(one_name_each(kreward) + list(kb.values()))

    def spec(self, name):
        """What a backend takes: a registered name's path, else the spec."""
        return self.paths.get(name, name) if isinstance(name, str) else name

    def statement(self, name):
        key = name if isinstance(name, str) else json.dumps(name, sort_keys=True)
        with self._lock:
            if key not in self._statements:
                spec = self.spec(name)
                if _problems.kind_of(spec, self.kernelbench) == _problems.KERNELBENCH:
                    p = _problems.kernelbench(spec, self.kernelbench)
                    self._statements[key] = render_kernelbench(str(name), p.source)
                    return self._statements[key]
                if self._ctx is None:
                    self._ctx = Context(no_device=True)
                p = self._ctx.problem(spec)
                try:
                    self._statements[key] = render(p.info())
                finally:
                    p.close()
            return self._statements[key]


def render(info):
    lines = [f"Problem: {info.get('name', '')}"]
    if info.get("description"):
        lines.append(info["description"])
    dims = info.get("dims") or []
    if dims:
        lines.append("Sizes: " + ", ".join(dims) + " (several cases; do not assume one size)")
    for t in info.get("tensors", []):
        shape = "x".join(str(d) for d in t.get("shape", [])) or "scalar"
        lines.append(f"- {t.get('role', '')} {t.get('name')}: {t.get('dtype')} [{shape}]")
    for s in info.get("scalars", []):
        lines.append(f"- scalar {s.get('name')}: {s.get('dtype', '')}")
    lines.append(HOW)
    return "\n".join(lines)


def render_kernelbench(name, source):
    """A KernelBench problem as a model reads it: the reference file, and
    what to write."""
    title = name if "\n" not in name else "inline"
    return (f"Problem: {os.path.splitext(title)[0]}\n"
            "The reference is this PyTorch Model (its inputs come from get_inputs(), its "
            "constructor's arguments from get_init_inputs(); it is checked on several sizes):\n"
            f"```python\n{source.rstrip()}\n```\n{HOW_MODELNEW}")
