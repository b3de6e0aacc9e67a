"""Problems for environments: names resolved from the problem directories,
and the statement a model reads (what to compute, the tensors, how to
write the launch line)."""
import json
import threading

from ..context import Context
from ..serve.problems import one_name_each, scan
from ..serve.server import default_problem_dirs

HOW = ("Write one CUDA C++ kernel file that computes the outputs from the inputs. Declare how it "
       "is launched with a line such as\n"
       "// kreward: launch KERNEL grid=(cdiv(N,256)) block=(256) args=(a, b, c, N)\n"
       "and put the file in a ```cuda fenced block.")


class Problems:
    def __init__(self, directories=None):
        self.paths = scan(directories or default_problem_dirs())
        self._ctx = None
        self._statements = {}
        self._lock = threading.Lock()

    def names(self):
        return sorted(self.paths)

    def distinct_names(self):
        """One name per problem (names() lists most twice)."""
        return one_name_each(self.paths)

    def spec(self, name):
        """What a backend takes: a registered name's path, else the spec."""
        return self.paths.get(name, name) if isinstance(name, str) else name

    def statement(self, name):
        key = name if isinstance(name, str) else json.dumps(name, sort_keys=True)
        with self._lock:
            if key not in self._statements:
                if self._ctx is None:
                    self._ctx = Context(no_device=True)
                p = self._ctx.problem(self.spec(name))
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
