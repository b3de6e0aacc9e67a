// Reference (naive): a small fixed grid, one float at a time.
// kreward: launch gelu_ref grid=(264) block=(128) args=(x, y, N)
extern "C" __global__ void gelu_ref(const float* x, float* y, long long n)
{
    for (long long i = blockIdx.x * 128ll + threadIdx.x; i < n; i += 264ll * 128)
        y[i] = 0.5f * x[i] * (1.0f + erff(x[i] * 0.70710678118654752f));
}
