// Slow but honest: one warp per row.
// kreward: launch softmax_warp grid=(cdiv(M, 4)) block=(128) args=(x, y, M, N)
extern "C" __global__ void softmax_warp(const float* x, float* y, int m, int n)
{
    int row = blockIdx.x * 4 + (threadIdx.x >> 5), lane = threadIdx.x & 31;
    if (row >= m)
        return;
    const float* in = x + (long long)row * n;
    float mx = -__int_as_float(0x7f800000);
    for (int j = lane; j < n; j += 32)
        mx = fmaxf(mx, in[j]);
    for (int off = 16; off > 0; off >>= 1)
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, off));
    float sum = 0;
    for (int j = lane; j < n; j += 32)
        sum += expf(in[j] - mx);
    for (int off = 16; off > 0; off >>= 1)
        sum += __shfl_xor_sync(0xffffffffu, sum, off);
    for (int j = lane; j < n; j += 32)
        y[(long long)row * n + j] = expf(in[j] - mx) / sum;
}
