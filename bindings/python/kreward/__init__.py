"""kreward: honest, fast rewards for RL on GPU kernels (binding of libkreward).

Problems of two kinds (kreward.problems): kreward problems (CUDA or Triton
kernels with a launch plan) and KernelBench problems (ModelNew modules).
kreward.Evaluator judges either on this machine; kreward.backend.resolve()
picks a backend (this machine, a `kreward serve`, a Ray cluster);
kreward.trainers has the adapters for TRL, verl, OpenRLHF and slime."""
from . import _lib, backend, constants, problems
from .backends.local import Evaluator
from .completion import completion_text, extract_code
from .constants import Status, Verdict
from .context import Baseline, Context
from .core import Plan, Problem, Program, Report
from .errors import KrewardError
from .pool import Pool
from .reward import Reward, presets

__version__ = _lib.text(_lib.fn.version())
library_path = _lib.path

__all__ = ["Baseline", "Context", "Evaluator", "KrewardError", "Plan", "Pool", "Problem", "Program",
           "Report", "Reward", "Status", "Verdict", "backend", "completion_text", "constants",
           "extract_code", "presets", "problems", "library_path"]
