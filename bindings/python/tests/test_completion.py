"""Extracting kernels from model completions: CommonMark fences, the final
answer only, never code the prompt showed, failing closed, and hostile
completions (issue 16's list, one test each)."""
import pytest

from kreward import completion_text, extract_code
from kreward.completion import (NO_ANSWER, NO_BLOCK, ONLY_SHOWN, extract, fenced_blocks,
                                normalize_code, shown_code, strip_thinking)

KERNEL = 'extern "C" __global__ void k(float* x) { x[0] = 1; }'
MINE = 'extern "C" __global__ void k(float* x) { x[0] = 2; }  // kreward: launch grid=1 block=1'
REFERENCE = ('// the reference\nextern "C" __global__ void k(float* x)\n{\n    x[0] = 1;\n}\n'
             '// kreward: launch grid=1 block=1\n')


def fence(code, lang="cuda", f="```"):
    return f"{f}{lang}\n{code}\n{f}\n"


# ---- CommonMark fences ----

def test_fenced_cuda():
    assert extract_code(f"Here:\n{fence(KERNEL)}Done.") == KERNEL


def test_several_blocks_prefer_the_last_kernel():
    text = (f"Reference:\n{fence('print(1)', 'python')}First try:\n{fence(KERNEL, 'cpp')}"
            f"Better:\n{fence(MINE, 'cu')}A helper:\n{fence('int x;', '')}")
    assert extract_code(text) == MINE


def test_tilde_fences_and_info_strings():
    assert extract_code(f"~~~cuda\n{KERNEL}\n~~~") == KERNEL
    assert extract_code(f"```CUDA title=\"k.cu\" linenums\n{KERNEL}\n```") == KERNEL
    assert extract_code(f"```c++\n{KERNEL}\n```") == KERNEL
    # a backtick closes nothing in a tilde block, and the other way round
    assert extract_code(f"~~~cuda\n{KERNEL}\n```\nint y;\n~~~") == f"{KERNEL}\n```\nint y;"


def test_closing_fence_rules():
    # at least as long as the opening one; nothing after it but spaces/tabs
    assert extract_code(f"```cuda\n{KERNEL}\n`````  \t\nafter") == KERNEL
    blocks = fenced_blocks(f"```cuda\n{KERNEL}\n``` not a close\n```\n")
    assert len(blocks) == 1 and blocks[0].closed and "not a close" in blocks[0].body


def test_backtick_in_the_info_string_is_no_fence():
    # the first line is text; the last one opens an empty block, never closed
    blocks = fenced_blocks("```cu`da\nint x;\n```")
    assert [(b.language, b.body, b.closed) for b in blocks] == [("", "", False)]
    assert extract_code(f"``` `x`\n{KERNEL}\n```") is None
    # a tilde fence's info string may hold backticks
    assert extract_code(f"~~~cuda `k`\n{KERNEL}\n~~~") == KERNEL


def test_indentation():
    # up to three spaces: a fence, its lines lose that many spaces
    text = "  ```cuda\n  " + KERNEL + "\n    int y;\n  ```"
    assert extract_code(text) == KERNEL + "\n  int y;"
    # four spaces: an indented code block, not a fence
    assert extract_code("    ```cuda\n    " + KERNEL + "\n    ```") is None


def test_unclosed_fence_runs_to_the_end_of_the_document():
    assert extract_code(f"text\n```cuda\n{KERNEL}\n") == KERNEL + "\n"
    b = fenced_blocks(f"```cuda\n{KERNEL}")
    assert len(b) == 1 and not b[0].closed


def test_crlf_line_endings():
    assert extract_code(f"```cuda\r\n{KERNEL}\r\n```\r\n") == KERNEL


def test_untagged_blocks_count_and_other_languages_do_not():
    assert extract_code(f"```\n{KERNEL}\n```") == KERNEL
    assert extract_code(fence(KERNEL, "python")) is None
    assert extract_code(fence(KERNEL, "text")) is None


# ---- failing closed ----

def test_no_code():
    assert extract("I cannot write this kernel.").why == NO_BLOCK
    assert extract_code("```python\nprint(1)\n```") is None
    assert extract_code("```cuda\n\n```") is None


def test_a_bare_kernel_without_a_fence_is_no_code():
    assert extract(KERNEL).code is None and extract(KERNEL).why == NO_BLOCK


@pytest.mark.parametrize("bad", [None, 3, 2.5, object(), [], {}, [None], [1, 2], {"x": 1},
                                 [{"role": "assistant"}], [{"role": "assistant", "content": None}]])
def test_odd_completions_have_no_code_and_never_raise(bad):
    x = extract(bad)
    assert x.code is None and x.why in (NO_ANSWER, NO_BLOCK)


def test_bytes_are_decoded():
    assert extract_code(fence(KERNEL).encode()) == KERNEL
    assert extract_code(b"\xff\xfe\n" + fence(KERNEL).encode()) == KERNEL


def test_lone_surrogates_are_replaced():
    code = extract_code(fence(KERNEL + " // \udc80 \ud800"))
    assert code is not None and code.startswith(KERNEL)
    code.encode("utf-8")  # the library can take it
    assert extract_code("\udc80\n" + fence(KERNEL)) == KERNEL


# ---- the final answer only ----

def test_conversational_completions():
    msgs = [{"role": "assistant", "content": fence(KERNEL)}]
    assert extract_code(msgs) == KERNEL
    assert completion_text(msgs).strip() == fence(KERNEL).strip()
    parts = [{"role": "assistant", "content": [{"type": "text", "text": fence(KERNEL)},
                                               {"type": "image"}]}]
    assert extract_code(parts) == KERNEL


def test_messages_without_a_role_are_not_the_assistants():
    assert extract([{"content": fence(KERNEL)}]).code is None
    assert extract({"content": fence(KERNEL)}).code is None
    assert extract([{"role": "user", "content": fence(KERNEL)}]).code is None
    assert extract_code({"role": "assistant", "content": fence(KERNEL)}) == KERNEL


def test_earlier_turns_are_not_the_answer():
    turns = [{"role": "assistant", "content": fence(KERNEL)},
             {"role": "tool", "content": "compiled fine"},
             {"role": "assistant", "content": "I think the kernel above is good."}]
    assert extract(turns).code is None and extract(turns).why == NO_BLOCK
    # a conversation ending on a tool result has no final answer
    assert extract(turns[:2]).why == NO_ANSWER


def test_a_draft_in_a_thinking_section_never_wins():
    text = f"<think>draft:\n{fence(MINE)}</think>\nFinal:\n{fence(KERNEL)}"
    assert extract_code(text) == KERNEL
    only_draft = f"<think>\n{fence(MINE)}\n</think>\nI could not finish."
    assert extract_code(only_draft) is None
    assert extract_code(f"<Thinking>{fence(MINE)}</Thinking>{fence(KERNEL)}") == KERNEL
    assert extract_code(f"<reasoning>{fence(MINE)}</reasoning>ok") is None


def test_thinking_opened_in_the_prompt_or_never_closed():
    # chat templates put "<think>" at the end of the prompt: the completion
    # starts inside it
    assert extract_code(f"draft\n{fence(MINE)}</think>\n{fence(KERNEL)}") == KERNEL
    assert extract_code(f"draft\n{fence(MINE)}</think>\nno code") is None
    # opened and never closed: the rest is thinking
    assert extract_code(f"{fence(KERNEL)}<think>\n{fence(MINE)}") == KERNEL
    assert strip_thinking("a<think>b") == "a"


# ---- never code the prompt showed ----

def test_normalize_code_ignores_whitespace_and_comments_but_not_the_plan():
    assert normalize_code(REFERENCE) == normalize_code(
        'extern "C" __global__ void k(float* x) { x[0] = 1; } /* c */\n'
        '//   kreward:   launch   grid=1 block=1')
    assert normalize_code(REFERENCE) != normalize_code(
        REFERENCE.replace("block=1", "block=32"))
    assert normalize_code('f("a  // b")') == 'f("a  // b")'


def test_the_original_kernel_shown_for_comparison_is_not_the_answer():
    prompt = f"Make this faster:\n{fence(REFERENCE)}"
    answer = (f"My kernel:\n{fence(MINE)}For comparison, the original kernel:\n"
              f"{fence(REFERENCE)}")
    assert extract_code(answer, prompt=prompt) == MINE
    # the same when only the problem's reference is known (verl, no prompt)
    assert extract_code(answer, sources=[REFERENCE]) == MINE
    # reformatted, other comments: still the prompt's code
    copied = REFERENCE.replace("\n{\n    ", " { ").replace("// the reference", "/* mine! */")
    assert extract(fence(copied), shown_code(prompt)).why == ONLY_SHOWN


def test_shown_code_reads_conversational_prompts():
    prompt = [{"role": "system", "content": "You write CUDA."},
              {"role": "user", "content": [{"type": "text", "text": fence(REFERENCE)}]}]
    assert extract_code(fence(REFERENCE), prompt=prompt) is None
    assert extract_code(fence(MINE), prompt=prompt) == MINE


def test_a_query_that_does_not_start_with_the_prompt():
    # OpenRLHF's query is prompt + response decoded with special tokens;
    # when stripping the prompt fails, the prompt's kernel must not be graded
    prompt = f"<|im_start|>user\nSpeed up:\n{fence(REFERENCE)}<|im_end|>\n<|im_start|>assistant\n"
    query = "<s>" + prompt.replace("user\n", "user \n") + "I cannot do it.<|im_end|>"
    x = extract(query, shown_code(prompt))
    assert x.code is None and x.why == ONLY_SHOWN


def test_four_backtick_fences():
    # a four-backtick block holds ``` lines; the prose after it is not code
    inner = f"{KERNEL}\n// ```not a close\n```\n"
    text = f"````cuda\n{inner}````\nThis prose is not compiled."
    assert extract_code(text) == inner.rstrip("\n")
    # closed with three: per CommonMark, still open to the end
    text = f"````cuda\n{KERNEL}\n```\nprose"
    assert extract_code(text) == f"{KERNEL}\n```\nprose"
    # a markdown block quoting a cuda block is not an answer
    assert extract_code(f"````markdown\n{fence(KERNEL)}````\n") is None
