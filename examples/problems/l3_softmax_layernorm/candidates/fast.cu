// Fast: one warp per row, the row held in registers (hidden <= 1024), one
// read of x and one write of y.
// kreward: launch fused grid=(cdiv(R, 8)) block=(256) args=(x, gamma, beta, y, R, H, eps)
#define MAX_PER_LANE 32

__device__ __forceinline__ float warp_sum(float v)
{
    for (int off = 16; off > 0; off >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, off);
    return v;
}

extern "C" __global__ void fused(const float* __restrict__ x, const float* __restrict__ gamma,
                                 const float* __restrict__ beta, float* __restrict__ y, int rows,
                                 int h, float eps)
{
    int row = blockIdx.x * 8 + (threadIdx.x >> 5), lane = threadIdx.x & 31;
    if (row >= rows)
        return;
    const float* in = x + (long long)row * h;
    float v[MAX_PER_LANE];
    float mx = -3.0e38f;
#pragma unroll
    for (int k = 0; k < MAX_PER_LANE; k++) {
        int j = lane + 32 * k;
        v[k] = j < h ? in[j] : -3.0e38f;
        mx = fmaxf(mx, v[k]);
    }
    for (int off = 16; off > 0; off >>= 1)
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, off));
    float sum = 0;
#pragma unroll
    for (int k = 0; k < MAX_PER_LANE; k++) {
        int j = lane + 32 * k;
        v[k] = j < h ? expf(v[k] - mx) : 0.f;
        sum += v[k];
    }
    float inv_sum = 1.0f / warp_sum(sum), mean = 1.0f / h, var = 0;
#pragma unroll
    for (int k = 0; k < MAX_PER_LANE; k++) {
        int j = lane + 32 * k;
        v[k] = v[k] * inv_sum - mean;
        var += j < h ? v[k] * v[k] : 0.f;
    }
    float inv = rsqrtf(warp_sum(var) / h + eps);
#pragma unroll
    for (int k = 0; k < MAX_PER_LANE; k++) {
        int j = lane + 32 * k;
        if (j < h)
            y[(long long)row * h + j] = v[k] * inv * gamma[j] + beta[j];
    }
}
