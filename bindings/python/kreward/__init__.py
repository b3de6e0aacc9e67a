"""kreward: honest, fast rewards for RL on GPU kernels (binding of libkreward)."""
from . import _lib, constants
from .completion import completion_text, extract_code
from .constants import Status, Verdict
from .context import Baseline, Context
from .core import Plan, Problem, Program, Report
from .errors import KrewardError
from .backends.local import Evaluator
from .pool import Pool
from .reward import Reward, presets

__version__ = _lib.text(_lib.fn.version())
library_path = _lib.path

__all__ = ["Baseline", "Context", "Evaluator", "KrewardError", "Plan", "Pool", "Problem", "Program",
           "Report", "Reward", "Status", "Verdict", "completion_text", "constants",
           "extract_code", "presets", "library_path"]
