// Slow but honest: 32 blocks of partial sums, then one block adds them.
// kreward: scratch parts bytes=32*8 zero
// kreward: launch partial grid=(32) block=(256) args=(x, parts, N)
// kreward: launch total grid=(1) block=(32) args=(parts, y)
extern "C" __global__ void partial(const float* x, double* parts, long long n)
{
    __shared__ double s[256];
    double t = 0;
    for (long long i = blockIdx.x * 256ll + threadIdx.x; i < n; i += 32ll * 256)
        t += x[i];
    s[threadIdx.x] = t;
    __syncthreads();
    for (int w = 128; w > 0; w >>= 1) {
        if (threadIdx.x < w)
            s[threadIdx.x] += s[threadIdx.x + w];
        __syncthreads();
    }
    if (threadIdx.x == 0)
        parts[blockIdx.x] = s[0];
}

extern "C" __global__ void total(const double* parts, float* y)
{
    if (threadIdx.x == 0) {
        double t = 0;
        for (int i = 0; i < 32; i++)
            t += parts[i];
        y[0] = (float)t;
    }
}
