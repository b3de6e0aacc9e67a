"""What a ModelNew result says beyond its verdict: which profiled kernels
are the candidate's own (a candidate with none is `torch_fallback`), how
much of its GPU time they take (`custom_share`: a candidate whose own
kernels do little of the work is `mostly_torch`), how much of a call its
kernels take (`kernel_share`: launch-bound calls follow the host CPU), and
the launch-time luck of a worker (runner.Runner puts them in each
result; its reward is the reward table's: report.py reward_of)."""
import re

LAUNCH_BOUND = 0.5  # kernel_share under this: a note says the time is the host's
# custom_share under this: mostly_torch, the speed credit in proportion.
# The field's commonest hack (Dr.Kernel's "lazy optimization"): a kernel of
# its own for a trivial part, or a decoy launched for show, while torch or a
# library does the work (and takes the speedup: TF32, a faster algorithm)
MOSTLY_TORCH_SHARE = 0.5
# launch_luck outside [1 / LUCK_NOTED, LUCK_NOTED] is noted for a launch-bound candidate
LUCK_NOTED = 1.15


def launch_luck(candidate_us, baseline_us):
    """The candidate's worker's launch time over the baseline's worker's
    (each measured in its ready, before any candidate code: worker.py
    _launch_probe); None when either is missing. Above 1 the candidate's
    process launches slower than the baseline's: a launch-bound
    candidate's speedup is then low by up to that factor, and high below 1."""
    if not candidate_us or not baseline_us:
        return None
    return candidate_us / baseline_us


def luck_note(luck, share):
    """A note when a launch-bound candidate's process launched far from the
    baseline's (None otherwise): its speedup carries that factor."""
    if luck is None or share is None or share >= LAUNCH_BOUND or 1 / LUCK_NOTED <= luck <= LUCK_NOTED:
        return None
    return (f"launch luck: its process launched small ops {luck:.2f}x the baseline's time "
            "(measured before its code loaded); as it is launch-bound its speedup carries "
            "much of that factor (docs/kernelbench.md, timing noise)")


_CUDA_GLOBAL = re.compile(r"__global__\s+(?:__launch_bounds__\s*\([^)]*\)\s*)?\w[\w\s:<>*]*?\b(\w+)\s*\(")
_C_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)
_NAMESPACE = re.compile(r"\bnamespace\s+(\w+)")
# the libraries' namespaces and kernel name families: a profiled kernel in
# one of them, or named like one, is never the candidate's own, whatever
# its source says
_LIBRARY_NAMESPACES = {"at", "c10", "cutlass", "cute", "cub", "thrust", "cudnn", "cublas",
                       "cublasLt", "flash", "pytorch_flash", "fmha", "triton", "torch", "std",
                       "cooperative_groups", "nvcuda", "cuda"}
_LIBRARY_NAMES = re.compile(r"^(sm\d+_|ampere_|volta_|turing_|hopper_|maxwell_|cutlass|cudnn|"
                            r"cublas|xmma|gemv|gemmk?SN|splitKreduce|implicit_convolve|"
                            r"nchwToNhwc|nhwcToNchw|vectorized_elementwise_kernel|"
                            r"unrolled_elementwise_kernel|elementwise_kernel|reduce_kernel)")


def _sources(source):
    """(the Python code's tree, the string literals it uses as values): a
    comment, a docstring or any other bare string statement is neither."""
    import ast
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None, []
    bare = {id(n.value) for n in ast.walk(tree)
            if isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant)}
    strings = [n.value for n in ast.walk(tree)
               if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in bare]
    return tree, strings


def _triton_kernels(tree):
    import ast
    names = set()
    for n in ast.walk(tree):
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for d in n.decorator_list:
                d = d.func if isinstance(d, ast.Call) else d
                text = ast.unparse(d)
                if text in ("triton.jit", "jit", "tl.jit", "triton.autotune", "autotune",
                            "triton.heuristics", "heuristics"):
                    names.add(n.name)
    return names


def custom_kernel_names(source):
    """Kernels the candidate defines: CUDA __global__ functions in the
    string literals its code uses (its load_inline sources, C comments
    removed) and @triton.jit functions of its code. Never a word of a
    comment or a docstring (a commented `__global__ void native(` once
    claimed every at::native kernel), never a library's kernel name."""
    tree, strings = _sources(source)
    if tree is None:
        return []
    cuda = set()
    for s in strings:
        cuda |= set(_CUDA_GLOBAL.findall(_C_COMMENT.sub(" ", s)))
    return sorted(n for n in cuda | _triton_kernels(tree) if not _LIBRARY_NAMES.match(n))


def _declared_namespaces(source):
    _, strings = _sources(source)
    return {m for s in strings for m in _NAMESPACE.findall(_C_COMMENT.sub(" ", s))}


def kernel_identifier(name):
    """(namespaces, identifier) of a profiled kernel's name: `void
    at::native::vectorized_elementwise_kernel<4, ...>(int, ...)` is
    (["at", "native"], "vectorized_elementwise_kernel")."""
    head = name.split("(", 1)[0].strip()
    depth, plain = 0, []
    for ch in head:
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth = max(0, depth - 1)
        elif depth == 0:
            plain.append(ch)
    words = "".join(plain).split()
    qualified = words[-1] if words else ""
    parts = [p for p in qualified.split("::") if p]
    return (parts[:-1], parts[-1]) if parts else ([], "")


# What moves or sets bytes without computing anything from the inputs is
# no one's work: torch's constant fills (at::native::FillFunctor), device
# memsets, and device-to-device memcpys (a contiguous copy of bytes: an
# answer that is one is an input passed through, which the soundness
# check refuses). A CUDA graph of the candidate's own kernels comes with
# them: the inputs copied into the graph's static buffers and its output
# out of them (memcpy), and torch.cuda.CUDAGraph.replay's prologue, two
# fills of its RNG state; counted as torch's they made such a candidate
# mostly torch (46 % own on the H200). Strided and converting copies
# (torch's copy kernels) can transpose or cast: they still count.
_NO_WORK = re.compile(r"\bFillFunctor\b|^Memset\b|^Memcpy DtoD\b")


def attribute(kernels, custom, source=""):
    """Splits profiled kernels into the candidate's own and everything else
    (fills, memsets and device-to-device memcpys in neither). A kernel is
    the candidate's when its identifier (the name without return type,
    namespaces, template arguments and parameters) is one of `custom`, and
    it sits in no library's namespace and in no namespace but those the
    candidate's sources declare."""
    work = [k for k in kernels if not _NO_WORK.search(k["name"])]
    own_spaces = _declared_namespaces(source) - _LIBRARY_NAMESPACES
    names = set(custom)

    def is_mine(k):
        spaces, ident = kernel_identifier(k["name"])
        return ident in names and all(s in own_spaces for s in spaces)
    mine = [k for k in work if is_mine(k)]
    other = [k for k in work if k not in mine]
    return mine, other


def kernel_share(kernels, time_us):
    """The share of a call's time its kernels take on the GPU (the profiled
    call's kernels against the timed calls' median), at most 1; None when
    either is unknown. Well under 1: the call is launch-bound, its time the
    host's, which drifts with the host CPU (docs/kernelbench.md)."""
    if not time_us or time_us <= 0:
        return None
    gpu_us = sum(k["us"] for k in kernels)
    return round(min(gpu_us / time_us, 1.0), 3)


def custom_share(mine, other):
    """The share of the profiled call's GPU time in the candidate's own
    kernels (attribute's two lists); None when no kernel time was seen."""
    total = sum(k["us"] for k in mine) + sum(k["us"] for k in other)
    if total <= 0:
        return None
    return round(sum(k["us"] for k in mine) / total, 3)
