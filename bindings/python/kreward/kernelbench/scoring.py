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


def custom_kernel_names(source):
    """Kernels the candidate defines: CUDA __global__ functions and
    @triton.jit functions."""
    cuda = re.findall(r"__global__\s+(?:__launch_bounds__\s*\([^)]*\)\s*)?\w[\w\s:<>*]*?\b(\w+)\s*\(", source)
    triton = re.findall(r"@triton\.jit[^\n]*\n(?:\s*@[^\n]*\n)*\s*def\s+(\w+)", source)
    return sorted(set(cuda) | set(triton))


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


def attribute(kernels, custom):
    """Splits profiled kernels into the candidate's own and everything else
    (fills, memsets and device-to-device memcpys in neither)."""
    work = [k for k in kernels if not _NO_WORK.search(k["name"])]
    mine = [k for k in work if any(re.search(rf"\b{re.escape(c)}\b", k["name"]) for c in custom)]
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
