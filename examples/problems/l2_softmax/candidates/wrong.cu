// Wrong: no max subtracted, so exp overflows to inf for large inputs.
// kreward: launch softmax_naive grid=(M) block=(256) args=(x, y, N)
extern "C" __global__ void softmax_naive(const float* x, float* y, int n)
{
    __shared__ float s[256];
    const float* in = x + (long long)blockIdx.x * n;
    float sum = 0;
    for (int j = threadIdx.x; j < n; j += 256)
        sum += expf(in[j]);
    s[threadIdx.x] = sum;
    __syncthreads();
    for (int w = 128; w > 0; w >>= 1) {
        if (threadIdx.x < w)
            s[threadIdx.x] += s[threadIdx.x + w];
        __syncthreads();
    }
    for (int j = threadIdx.x; j < n; j += 256)
        y[(long long)blockIdx.x * n + j] = expf(in[j]) / s[0];
}
