// Slow but honest: one warp per query row, three passes over the keys (the
// maximum, the normalizer, then the weighted values).
// kreward: launch attn_three_pass grid=(cdiv(BH*S, 4)) block=(128) args=(q, k, v, o, BH, S, scale)
extern "C" __global__ void attn_three_pass(const float* q, const float* k, const float* v, float* o,
                                         int bh, int s, float scale)
{
    long long row = blockIdx.x * 4ll + (threadIdx.x >> 5);
    int lane = threadIdx.x & 31;
    if (row >= (long long)bh * s)
        return;
    long long base = row / s * s;
    int i = (int)(row % s);
    float q0 = q[row * 64 + lane], q1 = q[row * 64 + lane + 32];
    float m = -3.0e38f;
    for (int j = 0; j <= i; j++) {
        float dot = q0 * k[(base + j) * 64 + lane] + q1 * k[(base + j) * 64 + lane + 32];
        for (int off = 16; off > 0; off >>= 1)
            dot += __shfl_xor_sync(0xffffffffu, dot, off);
        m = fmaxf(m, dot * scale);
    }
    float l = 0, a0 = 0, a1 = 0;
    for (int j = 0; j <= i; j++) {
        float dot = q0 * k[(base + j) * 64 + lane] + q1 * k[(base + j) * 64 + lane + 32];
        for (int off = 16; off > 0; off >>= 1)
            dot += __shfl_xor_sync(0xffffffffu, dot, off);
        l += expf(dot * scale - m);
    }
    for (int j = 0; j <= i; j++) {
        float dot = q0 * k[(base + j) * 64 + lane] + q1 * k[(base + j) * 64 + lane + 32];
        for (int off = 16; off > 0; off >>= 1)
            dot += __shfl_xor_sync(0xffffffffu, dot, off);
        float p = expf(dot * scale - m) / l;
        a0 += p * v[(base + j) * 64 + lane];
        a1 += p * v[(base + j) * 64 + lane + 32];
    }
    o[row * 64 + lane] = a0;
    o[row * 64 + lane + 32] = a1;
}
