// Cheat: state on the device heap (malloc'd blocks outlive a call and their
// addresses grow with every call: a counter no global reset reaches).
// Expect: compile_error (device malloc is refused for candidates).
// kreward: launch add grid=(264) block=(128) args=(a, b, c, N)
extern "C" __global__ void add(const float *a, const float *b, float *c, long long n)
{
    __shared__ unsigned long long where;
    if (threadIdx.x == 0)
        where = (unsigned long long)malloc(16);
    __syncthreads();
    if (where > 0x7fffffffffffull)
        return;
    for (long long i = blockIdx.x * 128ll + threadIdx.x; i < n; i += 264ll * 128)
        c[i] = a[i] + b[i];
}
