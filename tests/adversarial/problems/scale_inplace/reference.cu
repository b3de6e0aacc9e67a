// kreward: launch scale_ref grid=(264) block=(128) args=(x, N)
extern "C" __global__ void scale_ref(float *x, long long n)
{
    for (long long i = blockIdx.x * 128ll + threadIdx.x; i < n; i += 264ll * 128)
        x[i] = x[i] * 2.0f;
}
