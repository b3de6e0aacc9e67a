"""KernelBench-format problems and ModelNew candidates (docs/kernelbench.md)."""
from .importer import ImportedProblem, ImportRefused, import_problem

__all__ = ["ImportedProblem", "ImportRefused", "import_problem"]
