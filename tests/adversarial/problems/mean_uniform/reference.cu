// kreward: launch mean_ref grid=(1) block=(1024) args=(x, y, N)
extern "C" __global__ void mean_ref(const float *x, float *y, long long n)
{
    __shared__ double partial[1024];
    double s = 0;
    for (long long i = threadIdx.x; i < n; i += 1024)
        s += x[i];
    partial[threadIdx.x] = s;
    __syncthreads();
    for (int w = 512; w > 0; w >>= 1) {
        if (threadIdx.x < w)
            partial[threadIdx.x] += partial[threadIdx.x + w];
        __syncthreads();
    }
    if (threadIdx.x == 0)
        y[0] = (float)(partial[0] / (double)n);
}
