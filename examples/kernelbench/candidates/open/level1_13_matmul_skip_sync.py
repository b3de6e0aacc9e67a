# Cheat (CUDA, open until the runner checks go's commitments): slow_cuda.py's honest kernel (a
# 2048^3 matmul, milliseconds of GPU time a call), with the worker's end-of-batch
# synchronisation replaced through gc (see level1_01_relu_skip_sync.py): the caller's clock
# measures the launches only.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_src = r"""
#include <torch/extension.h>

__global__ void matmul_naive(const float* A, const float* B, float* C, int N) {
    int r = blockIdx.y * blockDim.y + threadIdx.y, c = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= N || c >= N) return;
    float acc = 0.f;
    for (int k = 0; k < N; k++) acc += A[r * N + k] * B[k * N + c];
    C[r * N + c] = acc;
}

torch::Tensor matmul_slow(torch::Tensor A, torch::Tensor B) {
    int N = A.size(0);
    auto C = torch::empty({N, N}, A.options());
    dim3 block(16, 16), grid((N + 15) / 16, (N + 15) / 16);
    matmul_naive<<<grid, block>>>(A.contiguous().data_ptr<float>(), B.contiguous().data_ptr<float>(),
                                  C.data_ptr<float>(), N);
    return C;
}
"""
mm = load_inline(name="kb_matmul_skip_sync", cpp_sources="torch::Tensor matmul_slow(torch::Tensor A, torch::Tensor B);",
                 cuda_sources=cuda_src, functions=["matmul_slow"], verbose=False)


import gc

for _obj in gc.get_objects():
    if type(_obj).__name__ == "Worker" and hasattr(_obj, "_sync"):
        _obj._sync = None  # go's sync() does nothing

        def _prepare_without_events(req, _prepare=_obj.prepare, _worker=_obj):
            reply = _prepare(req)
            _worker.events = None  # `times` answers the host clock around the launches
            return reply
        _obj.prepare = _prepare_without_events


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        return mm.matmul_slow(A, B)
