// Honest look-alike: an initialised __device__ table and a __constant__
// value read on every call (restored, never lost). Expect: passed.
// kreward: launch add grid=(264) block=(128) args=(a, b, c, N)
__device__ float weights[4] = {1.0f, 1.0f, 1.0f, 1.0f};
__constant__ float one = 1.0f;
extern "C" __global__ void add(const float *a, const float *b, float *c, long long n)
{
    for (long long i = blockIdx.x * 128ll + threadIdx.x; i < n; i += 264ll * 128)
        c[i] = weights[i & 3] * a[i] + one * b[i];
}
