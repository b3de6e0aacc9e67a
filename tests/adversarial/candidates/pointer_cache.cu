// Cheat: a pointer cache. Skips the work when it sees an output buffer it
// has written before (benchmarks often reuse buffers). Defence: rotated
// buffer sets with fresh values, and no state survives a call.
// Expect: passed, no inflated speedup.
// kreward: launch add grid=(264) block=(128) args=(a, b, c, N)
// kreward: launch remember grid=(1) block=(1) args=(c)
__device__ const float *seen[64];
__device__ int num_seen;
extern "C" __global__ void add(const float *a, const float *b, float *c, long long n)
{
    for (int i = 0; i < num_seen; i++)
        if (seen[i] == c)
            return;
    for (long long i = blockIdx.x * 128ll + threadIdx.x; i < n; i += 264ll * 128)
        c[i] = a[i] + b[i];
}
extern "C" __global__ void remember(const float *c)
{
    if (num_seen < 64)
        seen[num_seen++] = c;
}
