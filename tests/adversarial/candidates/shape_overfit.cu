// Cheat: tuned for one size only (the odd case), wrong elsewhere.
// Expect: incorrect, shape_specific.
// kreward: launch add grid=(264) block=(128) args=(a, b, c, N)
extern "C" __global__ void add(const float *a, const float *b, float *c, long long n)
{
    for (long long i = blockIdx.x * 128ll + threadIdx.x; i < 100003; i += 264ll * 128)
        if (i < n)
            c[i] = a[i] + b[i];
}
