"""Getting the kernel out of a model's completion."""
import re

_FENCE = re.compile(r"^[ \t]*(```|~~~)[ \t]*([A-Za-z0-9_+#.-]*)[^\n]*$", re.M)
_CODE_TAGS = {"", "cuda", "cu", "cpp", "c++", "cxx", "c", "cuh", "hpp", "h"}


def extract_code(completion):
    """The CUDA source in a completion, or None.

    Fenced blocks tagged cuda/cu/cpp/c++/c (or untagged) are candidates;
    several blocks: the last one that defines a __global__ kernel (models
    often show a reference first), else the last code block; an unterminated
    fence runs to the end; no fence at all: the whole text if it defines a
    kernel."""
    if not isinstance(completion, str):
        return None
    blocks = []
    pos = 0
    while True:
        m = _FENCE.search(completion, pos)
        if not m:
            break
        fence, tag = m.group(1), m.group(2).lower()
        start = m.end() + 1
        end_m = re.compile(r"^[ \t]*" + re.escape(fence) + r"[ \t]*$", re.M).search(completion, start)
        body = completion[start:end_m.start()] if end_m else completion[start:]
        if tag in _CODE_TAGS:
            blocks.append(body)
        if not end_m:
            break
        pos = end_m.end()
    if blocks:
        kernels = [b for b in blocks if "__global__" in b]
        code = (kernels or blocks)[-1]
        return code if code.strip() else None
    return completion if "__global__" in completion else None


def completion_text(completion):
    """TRL passes conversational completions as lists of messages."""
    if isinstance(completion, list):
        parts = [m.get("content", "") for m in completion if isinstance(m, dict)
                 and m.get("role", "assistant") == "assistant"]
        return "\n".join(p for p in parts if isinstance(p, str))
    if isinstance(completion, dict):
        return completion.get("content", "")
    return completion if isinstance(completion, str) else ""
