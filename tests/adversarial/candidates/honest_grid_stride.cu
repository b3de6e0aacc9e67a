// Honest look-alike: a plain grid-stride loop. Expect: passed.
// kreward: launch add grid=(1024) block=(256) args=(a, b, c, N)
extern "C" __global__ void add(const float *__restrict__ a, const float *__restrict__ b,
                               float *__restrict__ c, long long n)
{
    for (long long i = blockIdx.x * 256ll + threadIdx.x; i < n; i += 1024ll * 256)
        c[i] = a[i] + b[i];
}
