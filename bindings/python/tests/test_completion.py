"""Extracting kernels from model completions."""
import kreward
from kreward import extract_code, completion_text

KERNEL = 'extern "C" __global__ void k(float* x) { x[0] = 1; }'


def test_fenced_cuda():
    assert extract_code(f"Here:\n```cuda\n{KERNEL}\n```\nDone.").strip() == KERNEL


def test_several_blocks_prefers_the_last_kernel():
    text = (f"Reference:\n```python\nprint(1)\n```\nFirst try:\n```cpp\n{KERNEL}\n```\n"
            f"Better:\n```cu\n{KERNEL.replace('1;', '2;')}\n```\nA helper:\n```\nint x;\n```\n")
    assert "x[0] = 2" in extract_code(text)


def test_untagged_and_unterminated():
    assert extract_code(f"```\n{KERNEL}\n```").strip() == KERNEL
    assert extract_code(f"text\n```cuda\n{KERNEL}\n").strip() == KERNEL


def test_no_code():
    assert extract_code("I cannot write this kernel.") is None
    assert extract_code("```python\nprint(1)\n```") is None
    assert extract_code(None) is None
    assert extract_code("```cuda\n\n```") is None


def test_bare_kernel_without_fence():
    assert extract_code(KERNEL) == KERNEL


def test_conversational_completions():
    msgs = [{"role": "assistant", "content": f"```cuda\n{KERNEL}\n```"}]
    assert extract_code(completion_text(msgs)).strip() == KERNEL
