"""Triton in completions: the ```python fences of a completion, and the
@triton.jit kernels in them (found with ast, never by running the code).
A ModelNew that launches them runs in the worker (runner.py), where Triton
compiles each kernel per shape it is called with (its own specialisation
cache; @triton.autotune allowed); the runner's attribution counts them as
the candidate's kernels."""
import ast
import re

FENCE = re.compile(r"```(?:python|py)[^\n]*\n(.*?)```", re.S)


def python_blocks(completion):
    """The code of every ```python fence, in order."""
    return [m.group(1) for m in FENCE.finditer(completion)]


def candidate_source(completion):
    """The ModelNew module of a completion: the last fence that defines
    ModelNew (models often show the reference first), else None."""
    for block in reversed(python_blocks(completion)):
        if re.search(r"^class\s+ModelNew\b", block, re.M):
            return block
    return None


def _is_triton(dec):
    node = dec.func if isinstance(dec, ast.Call) else dec
    name = ast.unparse(node)
    return name in ("triton.jit", "jit", "triton.autotune", "autotune", "triton.heuristics")


def triton_kernels(source):
    """[(name, [parameter names], autotuned)] of the @triton.jit functions;
    SyntaxError for code that does not parse."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef) and any(_is_triton(d) for d in node.decorator_list):
            names = [ast.unparse(d.func if isinstance(d, ast.Call) else d) for d in node.decorator_list]
            if any(n.endswith("jit") for n in names):
                out.append((node.name, [a.arg for a in node.args.args],
                            any(n.endswith("autotune") for n in names)))
    return out
