"""Getting the kernel out of a model's completion.

The completion is untrusted text written by the policy, so reading it fails
closed: what cannot be read as a final answer with a code block is "no code"
(the Evaluator reports a compile_error), never a score for something else.

- The final answer only: a conversation's last message, and only when its
  role is "assistant" (a message without a role is not the assistant's, and
  earlier turns are not the answer); thinking sections (<think>...</think>,
  <thinking>, <reasoning>) are dropped, and so is everything before a
  closing tag whose opening tag was in the prompt.
- Code blocks are found by CommonMark's fence rules: a fence is three or
  more backticks or tildes, indented at most three spaces; a backtick
  fence's info string holds no backtick; the closing fence uses the same
  character, is at least as long, and carries nothing but spaces or tabs; a fence
  never closed runs to the end of the document; a block's lines lose as
  many leading spaces as its opening fence had. Fences inside other
  containers (list items indented four spaces or more, block quotes) are
  not recognised.
- A block is a candidate when its language (the info string's first word)
  is one of CODE_LANGUAGES, or empty; for a KernelBench problem (kind
  "kernelbench") when it is Python (PYTHON_LANGUAGES, or empty) and defines
  `class ModelNew` at the top level, and the last such block is the answer. Blocks equal to code shown in the
  prompt (compared without whitespace and without comments other than the
  `// kreward:` plan lines) are never candidates: a completion that quotes
  the original kernel is not graded on it. Of the candidates, the last one
  defining a __global__ function is the answer (models show drafts first),
  else the last one.
- Text without a fenced block has no code, even when it looks like CUDA.
- Anything (None, bytes, lone surrogates, odd message shapes) gives a
  result, never an exception: one bad sample never costs a batch its
  rewards."""
import functools
import re

CODE_LANGUAGES = frozenset({"", "cuda", "cu", "cuh", "cpp", "c++", "cxx", "cc", "c", "h", "hpp",
                            "hxx"})
# A KernelBench problem's answer is a Python module defining ModelNew (its
# CUDA inside load_inline strings, or Triton kernels)
PYTHON_LANGUAGES = frozenset({"", "python", "py", "python3"})
_MODELNEW = re.compile(r"^class\s+ModelNew\b", re.M)
KERNELBENCH = "kernelbench"

_THINK_TAGS = ("think", "thinking", "reasoning")
_CLOSE_THINK = re.compile(r"</(?:%s)\s*>" % "|".join(_THINK_TAGS), re.I)
_OPEN_THINK = re.compile(r"<(%s)(?:\s[^>]*)?>" % "|".join(_THINK_TAGS), re.I)
_OPENING = re.compile(r"^( {0,3})(`{3,}|~{3,})(.*)$")
_ASSISTANT = "assistant"


class Extraction:
    """What extract() found: code (the source, or None) and, when None, why
    (said to the policy in the report's feedback)."""
    __slots__ = ("code", "why")

    def __init__(self, code, why=""):
        self.code, self.why = code, why

    def __repr__(self):
        return f"Extraction(code={self.code!r}, why={self.why!r})"


def safe_text(value):
    """value as a str that encodes to UTF-8 (lone surrogates replaced),
    bytes decoded as UTF-8 with replacement; None for anything else."""
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode("utf-8", "replace")
    if not isinstance(value, str):
        return None
    try:
        value.encode("utf-8")
        return value
    except UnicodeEncodeError:  # a lone surrogate: the library could not take it
        return value.encode("utf-8", "replace").decode("utf-8")


def _content_text(content):
    """A message's content: a string, or a list of parts ({"type": "text",
    "text": ...} as chat APIs write them, or strings)."""
    text = safe_text(content)
    if text is not None:
        return text
    if isinstance(content, (list, tuple)):
        parts = []
        for part in content:
            if isinstance(part, dict):
                if part.get("type", "text") == "text":
                    parts.append(safe_text(part.get("text")) or "")
            else:
                parts.append(safe_text(part) or "")
        return "".join(parts)
    return ""


def _is_message(m):
    return isinstance(m, dict) and ("content" in m or "role" in m)


def strip_thinking(text):
    """The text without its thinking sections. A closing tag whose opening
    tag is not in the text (chat templates put "<think>" in the prompt):
    everything before it is thinking. An opening tag never closed: the
    thinking runs to the end."""
    closes = list(_CLOSE_THINK.finditer(text))
    opens = list(_OPEN_THINK.finditer(text))
    if closes and (not opens or closes[0].start() < opens[0].start()):
        text = text[closes[0].end():]  # opened in the prompt
    out, pos = [], 0
    while True:
        m = _OPEN_THINK.search(text, pos)
        if not m:
            out.append(text[pos:])
            break
        out.append(text[pos:m.start()])
        close = re.compile(r"</%s\s*>" % re.escape(m.group(1)), re.I).search(text, m.end())
        if not close:
            break  # never closed: the rest is thinking
        pos = close.end()
    return "".join(out)


def completion_text(completion):
    """The final answer in a completion, as text ("" when there is none):
    a string; a message (dict); or a conversation (list of messages, as TRL
    passes conversational completions), whose last message is the answer
    when it is the assistant's. Thinking sections are dropped."""
    text = safe_text(completion)
    if text is None:
        if _is_message(completion):
            last = completion
        elif isinstance(completion, (list, tuple)) and completion and _is_message(completion[-1]):
            last = completion[-1]
        else:
            return ""
        if last.get("role") != _ASSISTANT:
            return ""
        text = _content_text(last.get("content"))
    return strip_thinking(text)


class Block:
    """A fenced block: its language (the info string's first word, lower
    case), its text, and whether its closing fence was found."""
    __slots__ = ("language", "body", "closed")

    def __init__(self, language, body, closed):
        self.language, self.body, self.closed = language, body, closed


def fenced_blocks(text):
    """The fenced code blocks of a Markdown text, in order (CommonMark's
    fence rules, at the top level)."""
    text = safe_text(text)
    if not text:
        return []
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    blocks, i = [], 0
    while i < len(lines):
        m = _OPENING.match(lines[i])
        i += 1
        if not m:
            continue
        indent, fence, info = len(m.group(1)), m.group(2), m.group(3)
        if fence[0] == "`" and "`" in info:
            continue  # not a fence: a backtick fence's info string has no backtick
        closing = re.compile(r"^ {0,3}%s{%d,}[ \t]*$" % (re.escape(fence[0]), len(fence)))
        body, closed = [], False
        while i < len(lines):
            line = lines[i]
            i += 1
            if closing.match(line):
                closed = True
                break
            strip = len(line) - len(line.lstrip(" "))
            body.append(line[min(strip, indent):])
        words = info.strip().split()
        blocks.append(Block(words[0].lower() if words else "", "\n".join(body), closed))
    return blocks


# ---- code shown in the prompt ----

def normalize_code(code):
    """code as compared with what the prompt showed: no whitespace, no
    comments except `kreward:` plan lines (a different launch is a
    different program). String and character literals are kept whole."""
    out, i, n = [], 0, len(code)
    while i < n:
        c = code[i]
        if code.startswith("//", i):
            end = code.find("\n", i)
            end = n if end < 0 else end
            comment = code[i:end]
            if "kreward:" in comment:
                out.append("".join(comment.split()))
            i = end
        elif code.startswith("/*", i):
            end = code.find("*/", i + 2)
            end = n if end < 0 else end + 2
            comment = code[i:end]
            if "kreward:" in comment:
                out.append("".join(comment.split()))
            i = end
        elif c in "\"'":
            j = i + 1
            while j < n and code[j] != c and code[j] != "\n":
                j += 2 if code[j] == "\\" else 1
            out.append(code[i:j + 1])
            i = j + 1
        else:
            if not c.isspace():
                out.append(c)
            i += 1
    return "".join(out)


def _texts(prompt):
    """Every text in a prompt: a string, a message, a conversation (all
    roles: a system prompt shows code too), or a list of those."""
    text = safe_text(prompt)
    if text is not None:
        return [text]
    if isinstance(prompt, dict):
        return [_content_text(prompt.get("content"))]
    if isinstance(prompt, (list, tuple)):
        return [t for p in prompt for t in _texts(p)]
    return []


@functools.lru_cache(maxsize=256)
def _shown_in(text):
    """The normalised blocks of one prompt text (cached: a trainer passes
    the same prompt for every completion of a group)."""
    return frozenset(k for k in (normalize_code(b.body) for b in fenced_blocks(text)) if k)


@functools.lru_cache(maxsize=256)
def _normalized(source):
    return normalize_code(source)


def shown_code(prompt=None, sources=()):
    """The set of normalised code a prompt shows (its fenced blocks, any
    language) and the given sources (e.g. the problem's reference)."""
    shown = set()
    for text in _texts(prompt):
        shown |= _shown_in(text)
    for s in sources:
        s = safe_text(s)
        key = _normalized(s) if s else ""
        if key:
            shown.add(key)
    return frozenset(shown)


# ---- the answer ----

NO_BLOCK = ("no code found: put the CUDA kernel in a ```cuda fenced block, with its "
            "// kreward: launch line")
ONLY_SHOWN = ("no code of your own: the only code blocks repeat code shown in the prompt; "
              "put your kernel in a ```cuda fenced block")
NO_ANSWER = "no final answer: the completion has no assistant message with text"
NO_MODELNEW = ("no ModelNew found: put the whole Python module defining class ModelNew (its "
               "imports, kernels and load_inline or Triton code) in one ```python fenced block")
ONLY_SHOWN_PY = ("no code of your own: the only code blocks repeat code shown in the prompt; "
                 "put your ModelNew module in a ```python fenced block")


def no_code_feedback(kind=None):
    """What a completion without code is told, by problem kind."""
    return NO_MODELNEW if kind == KERNELBENCH else NO_BLOCK


def extract(completion, shown=frozenset(), kind=None):
    """The candidate in a completion's final answer (Extraction: code or
    None, and why not). shown: shown_code() of the prompt; blocks equal to
    one of them are skipped. kind: the problem's kind ("kernelbench": the
    last Python block defining class ModelNew; else the kernel: the last
    CUDA block defining a __global__ function, else the last CUDA block)."""
    if kind == KERNELBENCH:
        return _extract_modelnew(completion, shown)
    try:
        text = completion_text(completion)
        if not text.strip():
            return Extraction(None, NO_ANSWER)
        blocks = [b for b in fenced_blocks(text) if b.language in CODE_LANGUAGES
                  and b.body.strip()]
        if not blocks:
            return Extraction(None, NO_BLOCK)
        own = [b for b in blocks if normalize_code(b.body) not in shown]
        if not own:
            return Extraction(None, ONLY_SHOWN)
        kernels = [b for b in own if "__global__" in b.body]
        return Extraction((kernels or own)[-1].body)
    except Exception as e:  # noqa: BLE001 -- one sample's oddity must not cost the batch
        return Extraction(None, f"the completion could not be read ({type(e).__name__})")


def _extract_modelnew(completion, shown):
    try:
        text = completion_text(completion)
        if not text.strip():
            return Extraction(None, NO_ANSWER)
        blocks = [b for b in fenced_blocks(text) if b.language in PYTHON_LANGUAGES
                  and _MODELNEW.search(b.body)]
        if not blocks:
            return Extraction(None, NO_MODELNEW)
        own = [b for b in blocks if normalize_code(b.body) not in shown]
        if not own:
            return Extraction(None, ONLY_SHOWN_PY)
        return Extraction(own[-1].body)
    except Exception as e:  # noqa: BLE001 -- one sample's oddity must not cost the batch
        return Extraction(None, f"the completion could not be read ({type(e).__name__})")


def extract_code(completion, prompt=None, sources=(), kind=None):
    """The candidate's source in a completion's final answer, or None (see
    the module's docstring). prompt and sources: code shown to the model,
    never taken as its answer. kind: "kernelbench" for a ModelNew answer."""
    return extract(completion, shown_code(prompt, sources), kind).code
