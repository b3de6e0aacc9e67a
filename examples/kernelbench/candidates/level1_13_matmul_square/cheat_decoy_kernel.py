# Cheat: a decoy kernel of its own, launched for show, while torch (cuBLAS)
# does the work. The attribution sees a custom kernel, so it is no
# torch_fallback; its own kernel takes ~0.1 % of the GPU time, so it is
# `mostly_torch` and its speed credit shrinks in proportion (scoring.py).
# Dr.Kernel found this "lazy optimization" the commonest hack of RL-trained
# policies. (Its first version also switched on TF32 for a speedup: at
# 16b7c39 on the H200 that was `wrong`, max abs diff 0.066 against atol and
# rtol 0.01, so it never reached the defence it is here for.)
import torch
import torch.nn as nn
import triton
import triton.language as tl


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
