// Slow but honest: one warp per row.
// kreward: launch rmsnorm_warp grid=(cdiv(M, 4)) block=(128) args=(x, w, y, M, N, eps)
extern "C" __global__ void rmsnorm_warp(const float* x, const float* w, float* y, int m, int n, float eps)
{
    int row = blockIdx.x * 4 + (threadIdx.x >> 5), lane = threadIdx.x & 31;
    if (row >= m)
        return;
    const float* in = x + (long long)row * n;
    float q = 0;
    for (int j = lane; j < n; j += 32)
        q += in[j] * in[j];
    for (int off = 16; off > 0; off >>= 1)
        q += __shfl_xor_sync(0xffffffffu, q, off);
    float inv = 1.0f / sqrtf(q / n + eps);
    for (int j = lane; j < n; j += 32)
        y[(long long)row * n + j] = in[j] * inv * w[j];
}
