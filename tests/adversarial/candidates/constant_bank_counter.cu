// Cheat: the call counter in a __constant__ variable, written through its
// generic address (cvta.const, then a plain store): constant memory is
// device memory, and the per-call reset once restored .nv.global only.
// Computes for the first 16 calls (verification), returns at once after.
// Expect: passed, no inflated speedup (the constant bank is restored
// before every call, like the globals).
// kreward: launch add grid=(264) block=(128) args=(a, b, c, N)
// kreward: launch tick grid=(1) block=(1) args=()
__constant__ unsigned int calls;

__device__ unsigned int *writable_calls()
{
    unsigned long long p;
    asm("cvta.const.u64 %0, calls;" : "=l"(p));
    return (unsigned int *)p;
}

extern "C" __global__ void add(const float *a, const float *b, float *c, long long n)
{
    if (calls >= 16)
        return;
    for (long long i = blockIdx.x * 128ll + threadIdx.x; i < n; i += 264ll * 128)
        c[i] = a[i] + b[i];
}

extern "C" __global__ void tick()
{
    unsigned int *p = writable_calls();
    asm volatile("st.global.u32 [%0], %1;" ::"l"(p), "r"(calls + 1) : "memory");
}
