// Wrong: normalizes x alone and adds the residual afterwards.
// kreward: launch fused grid=(M) block=(256) args=(x, r, w, y, N, eps)
extern "C" __global__ void fused(const float* x, const float* r, const float* w, float* y, int n, float eps)
{
    __shared__ float scratch[8];
    long long base = (long long)blockIdx.x * n;
    float q = 0;
    for (int j = threadIdx.x; j < n; j += 256)
        q += x[base + j] * x[base + j];
    for (int off = 16; off > 0; off >>= 1)
        q += __shfl_xor_sync(0xffffffffu, q, off);
    if ((threadIdx.x & 31) == 0)
        scratch[threadIdx.x >> 5] = q;
    __syncthreads();
    float t = 0;
    for (int i = 0; i < 8; i++)
        t += scratch[i];
    float inv = rsqrtf(t / n + eps);
    for (int j = threadIdx.x; j < n; j += 256)
        y[base + j] = x[base + j] * inv * w[j] + r[base + j];
}
