// Wrong: not causal: every query attends to every key of its slice.

// kreward: launch attn_warp grid=(cdiv(BH*S, 8)) block=(256) args=(q, k, v, o, BH, S, scale)
extern "C" __global__ void attn_warp(const float* __restrict__ q, const float* __restrict__ k,
                                     const float* __restrict__ v, float* __restrict__ o, int bh,
                                     int s, float scale)
{
    long long row = blockIdx.x * 8ll + (threadIdx.x >> 5);
    int lane = threadIdx.x & 31;
    if (row >= (long long)bh * s)
        return;
    long long base = row / s * s;
    int i = (int)(row % s);
    float q0 = q[row * 64 + lane] * scale, q1 = q[row * 64 + lane + 32];
    q1 *= scale;
    float m = -3.0e38f, l = 0.f, a0 = 0.f, a1 = 0.f;
    (void)i;
    for (int j = 0; j < s; j++) {
        const float* kj = k + (base + j) * 64;
        float dot = q0 * kj[lane] + q1 * kj[lane + 32];
        for (int off = 16; off > 0; off >>= 1)
            dot += __shfl_xor_sync(0xffffffffu, dot, off);
        float mn = fmaxf(m, dot), corr = expf(m - mn), p = expf(dot - mn);
        const float* vj = v + (base + j) * 64;
        l = l * corr + p;
        a0 = a0 * corr + p * vj[lane];
        a1 = a1 * corr + p * vj[lane + 32];
        m = mn;
    }
    o[row * 64 + lane] = a0 / l;
    o[row * 64 + lane + 32] = a1 / l;
}
