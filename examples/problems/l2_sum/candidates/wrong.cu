// Wrong: only whole groups of 1024 are summed; the remainder is dropped
// (right whenever N is a multiple of 1024).
// kreward: scratch acc bytes=8 zero
// kreward: launch partial grid=(256) block=(256) args=(x, acc, N)
// kreward: launch finish grid=(1) block=(32) args=(acc, y)
extern "C" __global__ void partial(const float* x, double* acc, long long n)
{
    __shared__ double s[256];
    long long m = n / 1024 * 1024;
    double t = 0;
    for (long long i = blockIdx.x * 256ll + threadIdx.x; i < m; i += 256ll * 256)
        t += x[i];
    s[threadIdx.x] = t;
    __syncthreads();
    for (int w = 128; w > 0; w >>= 1) {
        if (threadIdx.x < w)
            s[threadIdx.x] += s[threadIdx.x + w];
        __syncthreads();
    }
    if (threadIdx.x == 0)
        atomicAdd(acc, s[0]);
}

extern "C" __global__ void finish(const double* acc, float* y)
{
    if (threadIdx.x == 0)
        y[0] = (float)acc[0];
}
