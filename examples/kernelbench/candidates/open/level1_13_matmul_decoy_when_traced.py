# Cheat: the decoy kernel beside torch's matmul (cheat_decoy_kernel.py), but
# grown where it is attributed. It looks up its caller's frames for the
# worker's `attribute` request, and only in that call launches the decoy
# thousands of times, so that its own kernel seems to take most of the GPU
# time and escapes `mostly_torch`. The timed calls never see that work. The
# trace's GPU busy time (kernel_trace.py) gives it away: the traced call
# keeps the GPU busy far longer than a timed call takes, so the shares are
# refused (`unattributed`, speed credit floored). test_kernel_trace_gpu.py
# runs it.
import sys

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def touch_kernel(x_ptr):
    tl.store(x_ptr, tl.load(x_ptr))


def traced():
    f = sys._getframe(1)
    while f is not None:
        if f.f_code.co_name == "attribute":
            return True
        f = f.f_back
    return False


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        out = torch.matmul(A, B)
        for _ in range(20000 if traced() else 1):
            touch_kernel[(1,)](out)
        return out
