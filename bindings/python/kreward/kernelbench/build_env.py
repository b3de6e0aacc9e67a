"""What a candidate's load_inline build depends on besides its source and
its folder, set alike in the compile stage (build_stage.py, a CPU worker)
and in the candidate's GPU worker (processes.py), so that the GPU worker's
ninja finds the stage's build current and its load takes about a second:
- the CUDA architectures, TORCH_CUDA_ARCH_LIST: torch writes them into
  build.ninja's nvcc flags, and in a process without a GPU (the stage) it
  has none to ask; a lane knows its device's compute capability, and
  arch_list() writes it as torch would have chosen it in a GPU worker;
- the precompiled torch/extension.h (pch.py), found through CPATH, which
  gcc searches before torch's -isystem folders; its folder is read-only
  to candidates (granted for reading only) and is no part of build.ninja
  or its recorded dependencies, so a build made with it and a load made
  without it (or the reverse) agree;
- needs_build(): the cheap test of a source's text that says whether it
  builds anything at all (others skip the stage)."""
import os
import re

# torch.utils.cpp_extension's builders; `load(` alone is any function's name
_INLINE = re.compile(r"\bload_inline\s*\(")
_LOAD = re.compile(r"\bload\s*\(")


def needs_build(source):
    """Whether a ModelNew source calls load_inline, or cpp_extension's
    load: a test of its text, not of what it runs. A source it misses is
    built in its GPU worker as before; one it takes wrongly costs a short
    import in a CPU worker."""
    if not isinstance(source, str):
        return False
    return bool(_INLINE.search(source)) or ("cpp_extension" in source and bool(_LOAD.search(source)))


def torch_arch_list(capabilities, torch_archs):
    """TORCH_CUDA_ARCH_LIST as torch's _get_cuda_arch_flags picks it when it
    is unset, for GPUs of these capabilities ([(major, minor)]), each
    clamped to the newest sm_ of torch's own build (torch_archs:
    torch.cuda.get_arch_list()), sorted as strings, the last with +PTX.
    Setting it to this gives the flags a GPU worker would have chosen by
    itself, so a build made on the CPU is the one the GPU worker finds."""
    sms = [int("".join(re.findall(r"\d+", a.split("_", 1)[1]))) for a in torch_archs if "sm_" in a]
    if not capabilities or not sms:
        return None
    newest = max((sm // 10, sm % 10) for sm in sms)
    archs = []
    for cap in capabilities:
        major, minor = min(newest, tuple(cap))
        arch = f"{major}.{minor}"
        if arch not in archs:
            archs.append(arch)
    archs = sorted(archs)
    archs[-1] += "+PTX"
    return ";".join(archs)


def arch_list(devices):
    """The architectures to build for, for these lanes' devices: every GPU
    a worker sees (a GPU worker's torch builds for all of them, not only
    its lane's); None where a device is no GPU or CUDA cannot say (the
    caller's TORCH_CUDA_ARCH_LIST then, if set: see make_scheduler)."""
    try:
        import torch
        if not devices or any(not str(d).startswith("cuda") for d in devices):
            return None
        caps = [torch.cuda.get_device_capability(i) for i in range(torch.cuda.device_count())]
        return torch_arch_list(caps, torch.cuda.get_arch_list())
    except Exception:  # noqa: BLE001 - no CUDA here: unknown
        return None


def build_env(arch, pch_dir):
    """(environment, extra read folders) of a worker that builds: the
    architectures, and the precompiled header's folder where it exists
    (complete: pch.py renames it into place when done). A folder that
    does not exist yet is left out: the sandbox grants only folders that
    exist when it is entered (gcc given a CPATH it may not read goes on
    without it: a torch C++ build in the stage did, measured)."""
    env, reads = {}, []
    if arch:
        env["TORCH_CUDA_ARCH_LIST"] = arch
    if pch_dir and os.path.isdir(pch_dir):
        env["CPATH"] = pch_dir
        reads.append(pch_dir)
    return env, reads
