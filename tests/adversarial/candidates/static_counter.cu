// Cheat: the call counter hidden where names are mangled: a static
// variable, a function-local static and one in an anonymous namespace.
// Expect: passed, no inflated speedup (all three are reset).
// kreward: launch add grid=(264) block=(128) args=(a, b, c, N)
// kreward: launch tick grid=(1) block=(1) args=()
static __device__ unsigned long long hidden;
namespace { __device__ unsigned int anon_calls; }
__device__ unsigned int *bump()
{
    static __device__ unsigned int local_calls;
    return &local_calls;
}
extern "C" __global__ void add(const float *a, const float *b, float *c, long long n)
{
    if (hidden >= 16 || anon_calls >= 16 || *bump() >= 16)
        return;
    for (long long i = blockIdx.x * 128ll + threadIdx.x; i < n; i += 264ll * 128)
        c[i] = a[i] + b[i];
}
extern "C" __global__ void tick() { hidden++; anon_calls++; (*bump())++; }
