"""Triton kernels found in completions (CPU: ast only, no Triton needed)."""
import pathlib

import pytest

from kreward.kernelbench.triton_extract import candidate_source, python_blocks, triton_kernels

KB = pathlib.Path(__file__).resolve().parents[4] / "examples" / "kernelbench" / "candidates"

AUTOTUNED = '''
import triton
import triton.language as tl

@triton.autotune(configs=[triton.Config({"BLOCK": 256}), triton.Config({"BLOCK": 1024})], key=["n"])
@triton.jit
def add(x, y, out, n, BLOCK: tl.constexpr):
    pass

def helper(x):
    return x

class ModelNew:
    pass
'''


def test_fences_and_the_last_modelnew_wins():
    completion = ("Here is the reference:\n```python\nclass Model:\n    pass\n```\nand mine:\n"
                  "```python\nclass ModelNew:\n    first = 1\n```\nbetter:\n```py\nclass ModelNew:\n    second = 2\n```\n")
    assert len(python_blocks(completion)) == 3
    assert "second" in candidate_source(completion)
    assert candidate_source("```python\nprint(1)\n```") is None
    assert candidate_source("no code at all") is None


def test_kernels_found_with_their_parameters():
    assert triton_kernels(AUTOTUNED) == [("add", ["x", "y", "out", "n", "BLOCK"], True)]
    src = (KB / "level1_05_softmax" / "honest_triton.py").read_text()
    assert triton_kernels(src) == [("softmax_kernel", ["x_ptr", "y_ptr", "n_cols", "stride", "BLOCK"], False)]
    assert triton_kernels((KB / "level1_01_relu" / "honest_cuda.py").read_text()) == []
    with pytest.raises(SyntaxError):
        triton_kernels("def broken(:\n")
