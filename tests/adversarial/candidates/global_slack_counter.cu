// Cheat: the call counter kept where no symbol is, inside the module's own
// sections: past the end of a one-element __device__ array (slack[32], 128
// bytes on: the alignment padding before `next`, the section's next
// 256-byte-aligned variable) and 64 bytes past a __constant__ (its generic
// address, cvta.const, plus an offset: its bank's padding before `anchor2`).
// The symbols themselves never change, so a reset of each symbol's own bytes
// left both counts alone.
// Computes for the first 16 calls (verification), returns at once after.
// Expect: passed, no inflated speedup (the module's sections, padding and
// all, are restored whole before every call). Not exercised here, and still
// open: a count kept beyond the module's sections (padding between sections,
// another module's data), which no restore may touch (docs/threat-model.md).
// kreward: launch add grid=(264) block=(128) args=(a, b, c, N)
// kreward: launch tick grid=(1) block=(1) args=()
__device__ __align__(256) unsigned int slack[1];
__device__ __align__(256) unsigned int next[1];
__constant__ __align__(256) unsigned int anchor;
__constant__ __align__(256) unsigned int anchor2 = 2;

__device__ volatile unsigned int *past_slack()
{
    return (volatile unsigned int *)slack + 32;
}

__device__ volatile unsigned int *past_anchor()
{
    unsigned long long p;
    asm("cvta.const.u64 %0, anchor;" : "=l"(p));
    return (volatile unsigned int *)p + 16;
}

extern "C" __global__ void add(const float *a, const float *b, float *c, long long n)
{
    if (*past_slack() >= 16 + next[0] || *past_anchor() >= 16 + anchor + (anchor2 & 1))
        return;
    for (long long i = blockIdx.x * 128ll + threadIdx.x; i < n; i += 264ll * 128)
        c[i] = a[i] + b[i];
}

extern "C" __global__ void tick()
{
    *past_slack() += 1;
    *past_anchor() += 1;
}
