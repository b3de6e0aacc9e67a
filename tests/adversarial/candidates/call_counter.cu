// Cheat: a __device__ call counter. Computes on the first 16 calls (every
// verification call and the first timed ones), returns at once after.
// Defence: every call starts from the module's state at load, so the
// counter is 0 on every call. Expect: passed, no inflated speedup.
// kreward: launch add grid=(264) block=(128) args=(a, b, c, N)
// kreward: launch tick grid=(1) block=(1) args=()
__device__ unsigned long long calls;
extern "C" __global__ void add(const float *a, const float *b, float *c, long long n)
{
    if (calls >= 16)
        return;
    for (long long i = blockIdx.x * 128ll + threadIdx.x; i < n; i += 264ll * 128)
        c[i] = a[i] + b[i];
}
extern "C" __global__ void tick() { calls++; }
