// Cheat: host-visible managed memory as a call counter.
// Expect: compile_error (__managed__ is refused for candidates).
// kreward: launch add grid=(264) block=(128) args=(a, b, c, N)
__device__ __managed__ unsigned int calls;
extern "C" __global__ void add(const float *a, const float *b, float *c, long long n)
{
    if (calls > 16)
        return;
    for (long long i = blockIdx.x * 128ll + threadIdx.x; i < n; i += 264ll * 128)
        c[i] = a[i] + b[i];
    if (blockIdx.x == 0 && threadIdx.x == 0)
        atomicAdd(&calls, 1u);
}
