"""Per-block limits a launch must fit, by architecture, for deciding a
configuration without a GPU.

Source: the CUDA C++ Programming Guide, "Technical Specifications per
Compute Capability" (threads per block, 32-bit registers per block and per
thread, shared memory per block with the opt-in), and the CUDA Occupancy
Calculator's register allocation (per warp, in units of 256 registers).
The opt-in shared memory per arch is the table libkreward's own plan
check uses (lib/problem/plan_bind.c, kr__limits_for), so a configuration
refused here would be refused by the plan check on the GPU as well; the
register and static shared memory checks are ones the library leaves to
the driver at launch time (CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES), which is
why they are made here."""
import re

MAX_THREADS_PER_BLOCK = 1024
REGISTERS_PER_BLOCK = 65536      # cc 5.0 through 12.x
MAX_REGISTERS_PER_THREAD = 255
REGISTER_UNIT = 256              # allocated per warp, in units of 256 registers
WARP = 32
STATIC_SHARED_MAX = 48 * 1024    # static __shared__ per block: "allocations over 48 KB per
                                 # block ... must use dynamic shared memory" (programming guide);
                                 # NVRTC 13 compiles more for sm_90a without a word


def shared_optin(arch):
    """Most shared memory (static + dynamic) one block may use, in bytes."""
    m = re.match(r"^(?:sm|compute)_(\d+)", arch or "")
    num = int(m.group(1)) if m else 0
    if num >= 100 and num not in (120, 121):
        return 232448            # 227 KiB
    if num == 90:
        return 232448
    if num in (80, 87):
        return 166912            # 163 KiB
    if num >= 86:
        return 101376            # 99 KiB (8.6, 8.8, 8.9, 12.x)
    return 65536                 # 7.5


def registers_per_block(registers, threads):
    """Registers a block of `threads` takes when each thread uses
    `registers`: per warp, rounded up to the allocation unit."""
    warps = -(-threads // WARP)
    per_warp = -(-registers * WARP // REGISTER_UNIT) * REGISTER_UNIT
    return warps * per_warp


def check_launch(arch, threads, registers, shared_static, shared_dynamic):
    """None when a block of this kernel fits; else (verdict, why): the
    verdict a GPU run would give (invalid_plan where libkreward's plan
    check refuses it, launch_error where only the driver would) and a
    sentence. Registers: the plan check compares a launch's threads with
    the kernel's own limit from the driver (CU_FUNC_ATTRIBUTE_MAX_THREADS_
    PER_BLOCK, which its registers lower), so too many is invalid_plan
    (seen on the H200: "block has 1024 threads, the kernel allows at most
    512")."""
    if threads > MAX_THREADS_PER_BLOCK:
        return "invalid_plan", f"{threads} threads per block, the limit is {MAX_THREADS_PER_BLOCK}"
    if registers is not None:
        need = registers_per_block(registers, threads)
        if need > REGISTERS_PER_BLOCK:
            return "invalid_plan", (f"{registers} registers x {threads} threads need {need} "
                                    f"registers per block, an SM has {REGISTERS_PER_BLOCK}")
    if shared_static > STATIC_SHARED_MAX:
        return "launch_error", (f"{shared_static} bytes of static shared memory per block; more "
                                f"than {STATIC_SHARED_MAX} must be dynamic (extern __shared__ "
                                "and the plan's smem)")
    total = shared_static + shared_dynamic
    limit = shared_optin(arch)
    if total > limit:
        return "invalid_plan", (f"{total} bytes of shared memory per block ({shared_static} "
                                f"static + {shared_dynamic} dynamic), {arch} allows {limit}")
    return None
