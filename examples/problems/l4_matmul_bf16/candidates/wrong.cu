// Wrong: accumulates in bf16, losing the low bits of every partial sum.
// kreward: launch mm grid=(cdiv(N, 16), cdiv(M, 16)) block=(16, 16) args=(a, b, c, M, N, K)
#include <cuda_bf16.h>

extern "C" __global__ void mm(const __nv_bfloat16* a, const __nv_bfloat16* b, float* c, int m, int n,
                              int k)
{
    int row = blockIdx.y * 16 + threadIdx.y, col = blockIdx.x * 16 + threadIdx.x;
    if (row >= m || col >= n)
        return;
    __nv_bfloat16 acc = __float2bfloat16(0.f);
    for (int i = 0; i < k; i++)
        acc = __float2bfloat16(__bfloat162float(acc) + __bfloat162float(a[(long long)row * k + i]) *
                                                           __bfloat162float(b[(long long)i * n + col]));
    c[(long long)row * n + col] = __bfloat162float(acc);
}
