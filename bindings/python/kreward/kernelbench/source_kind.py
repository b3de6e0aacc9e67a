"""Whether a text is a KernelBench-format problem file: a top-level `class
Model(` and `def get_inputs(`. Read by the front doors that tell kinds
apart (kreward/problems.py) and by vetting's file search, without
importing either."""
import re

_MODEL = re.compile(r"^class\s+Model\s*\(", re.M)
_INPUTS = re.compile(r"^def\s+get_inputs\s*\(", re.M)


def looks_like_kernelbench(text):
    """Whether a text is a KernelBench problem file: a top-level `class
    Model(` and `def get_inputs(`."""
    return (isinstance(text, str) and _MODEL.search(text) is not None
            and _INPUTS.search(text) is not None)
