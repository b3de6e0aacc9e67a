// Cheat: abstention by error through a scratch buffer larger than any GPU.
// Expect: invalid_plan.
// kreward: scratch junk bytes=(N*4096)
// kreward: launch add grid=(264) block=(128) args=(a, b, c, N)
extern "C" __global__ void add(const float *a, const float *b, float *c, long long n)
{
    for (long long i = blockIdx.x * 128ll + threadIdx.x; i < n; i += 264ll * 128)
        c[i] = a[i] + b[i];
}
