// Honest look-alike (l2_sum): atomics into a zeroed scratch, a second launch
// stores it. Results differ bitwise between runs within tolerance.
// Expect: passed.
// kreward: scratch acc bytes=8 zero
// kreward: launch partial grid=(min(cdiv(N, 256), 2048)) block=(256) args=(x, acc, N)
// kreward: launch finish grid=(1) block=(1) args=(acc, y)
extern "C" __global__ void partial(const float *x, double *acc, long long n)
{
    double s = 0;
    for (long long i = blockIdx.x * 256ll + threadIdx.x; i < n; i += (long long)gridDim.x * 256)
        s += x[i];
    for (int off = 16; off > 0; off >>= 1)
        s += __shfl_down_sync(0xffffffffu, s, off);
    if ((threadIdx.x & 31) == 0)
        atomicAdd(acc, s);
}
extern "C" __global__ void finish(const double *acc, float *y) { y[0] = (float)acc[0]; }
