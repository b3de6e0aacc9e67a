// Wrong: forgets gamma (and beta): the plain normalized softmax.
// kreward: launch fused grid=(cdiv(R, 8)) block=(256) args=(x, y, R, H, eps)
extern "C" __global__ void fused(const float* x, float* y, int rows, int h, float eps)
{
    int row = blockIdx.x * 8 + (threadIdx.x >> 5), lane = threadIdx.x & 31;
    if (row >= rows)
        return;
    const float* in = x + (long long)row * h;
    float mx = -3.0e38f, sum = 0, var = 0;
    for (int j = lane; j < h; j += 32)
        mx = fmaxf(mx, in[j]);
    for (int off = 16; off > 0; off >>= 1)
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, off));
    for (int j = lane; j < h; j += 32)
        sum += expf(in[j] - mx);
    for (int off = 16; off > 0; off >>= 1)
        sum += __shfl_xor_sync(0xffffffffu, sum, off);
    float mean = 1.0f / h;
    for (int j = lane; j < h; j += 32) {
        float d = expf(in[j] - mx) / sum - mean;
        var += d * d;
    }
    for (int off = 16; off > 0; off >>= 1)
        var += __shfl_xor_sync(0xffffffffu, var, off);
    float inv = rsqrtf(var / h + eps);
    for (int j = lane; j < h; j += 32)
        y[(long long)row * h + j] = (expf(in[j] - mx) / sum - mean) * inv;
}
