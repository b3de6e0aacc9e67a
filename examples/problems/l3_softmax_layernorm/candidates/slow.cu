// Slow but honest: two kernels (softmax, then layernorm) through a scratch
// copy of the softmax, one block per row each.
// kreward: scratch p bytes=R*H*4
// kreward: launch softmax grid=(R) block=(128) args=(x, p, H)
// kreward: launch layernorm grid=(R) block=(128) args=(p, gamma, beta, y, H, eps)
__device__ float block_reduce(float v, int is_max)
{
    __shared__ float s[128];
    __syncthreads();
    s[threadIdx.x] = v;
    __syncthreads();
    for (int w = 64; w > 0; w >>= 1) {
        if (threadIdx.x < w)
            s[threadIdx.x] = is_max ? fmaxf(s[threadIdx.x], s[threadIdx.x + w]) : s[threadIdx.x] + s[threadIdx.x + w];
        __syncthreads();
    }
    return s[0];
}

extern "C" __global__ void softmax(const float* x, float* p, int h)
{
    const float* in = x + (long long)blockIdx.x * h;
    float mx = -3.0e38f;
    for (int j = threadIdx.x; j < h; j += 128)
        mx = fmaxf(mx, in[j]);
    mx = block_reduce(mx, 1);
    float sum = 0;
    for (int j = threadIdx.x; j < h; j += 128)
        sum += expf(in[j] - mx);
    sum = block_reduce(sum, 0);
    for (int j = threadIdx.x; j < h; j += 128)
        p[(long long)blockIdx.x * h + j] = expf(in[j] - mx) / sum;
}

extern "C" __global__ void layernorm(const float* p, const float* gamma, const float* beta, float* y,
                                     int h, float eps)
{
    const float* in = p + (long long)blockIdx.x * h;
    float s = 0;
    for (int j = threadIdx.x; j < h; j += 128)
        s += in[j];
    float mean = block_reduce(s, 0) / h, q = 0;
    for (int j = threadIdx.x; j < h; j += 128)
        q += (in[j] - mean) * (in[j] - mean);
    float inv = rsqrtf(block_reduce(q, 0) / h + eps);
    for (int j = threadIdx.x; j < h; j += 128)
        y[(long long)blockIdx.x * h + j] = (in[j] - mean) * inv * gamma[j] + beta[j];
}
