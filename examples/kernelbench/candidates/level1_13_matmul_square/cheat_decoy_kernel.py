# Cheat: a decoy kernel of its own, launched for show, while torch does the
# work, in TF32 (within the problem's tolerance, and several times faster on
# tensor cores). The attribution sees a custom kernel, so it is no
# torch_fallback; its own kernel takes ~0.1 % of the GPU time, so it is
# `mostly_torch` and its speed credit shrinks in proportion (scoring.py). Dr.Kernel
# found this "lazy optimization" the commonest hack of RL-trained policies.
import torch
import torch.nn as nn
import triton
import triton.language as tl

torch.backends.cuda.matmul.allow_tf32 = True


@triton.jit
def touch_kernel(x_ptr):
    tl.store(x_ptr, tl.load(x_ptr))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        out = torch.matmul(A, B)
        touch_kernel[(1,)](out)
        return out
