// Cheat or bug: writes one element past the end of its output.
// Expect: incorrect, out_of_bounds.
// kreward: launch add grid=(264) block=(128) args=(a, b, c, N)
extern "C" __global__ void add(const float *a, const float *b, float *c, long long n)
{
    for (long long i = blockIdx.x * 128ll + threadIdx.x; i <= n; i += 264ll * 128)
        c[i] = i < n ? a[i] + b[i] : 0.0f;
}
