// Cheat: the call counter kept where no symbol is: past the end of a
// one-element __device__ array (slack[64], 256 bytes on: alignment padding or
// the rest of the module's allocation) and 64 bytes past a __constant__ (its
// generic address, cvta.const, plus an offset). The symbols themselves never
// change, so a reset of each symbol's own bytes left both counts alone.
// Computes for the first 16 calls (verification), returns at once after.
// Expect: passed, no inflated speedup (the allocations holding the module's
// globals and constant banks are restored whole before every call).
// kreward: launch add grid=(264) block=(128) args=(a, b, c, N)
// kreward: launch tick grid=(1) block=(1) args=()
__device__ unsigned int slack[1];
__constant__ unsigned int anchor;

__device__ volatile unsigned int *past_slack()
{
    return (volatile unsigned int *)slack + 64;
}

__device__ volatile unsigned int *past_anchor()
{
    unsigned long long p;
    asm("cvta.const.u64 %0, anchor;" : "=l"(p));
    return (volatile unsigned int *)p + 16;
}

extern "C" __global__ void add(const float *a, const float *b, float *c, long long n)
{
    if (*past_slack() >= 16 || *past_anchor() >= 16 + anchor)
        return;
    for (long long i = blockIdx.x * 128ll + threadIdx.x; i < n; i += 264ll * 128)
        c[i] = a[i] + b[i];
}

extern "C" __global__ void tick()
{
    *past_slack() += 1;
    *past_anchor() += 1;
}
