// Reference (naive): a small fixed grid walks the vector one float at a time.
// kreward: launch add_ref grid=(264) block=(128) args=(a, b, c, N)
extern "C" __global__ void add_ref(const float* a, const float* b, float* c, long long n)
{
    for (long long i = blockIdx.x * 128ll + threadIdx.x; i < n; i += 264ll * 128)
        c[i] = a[i] + b[i];
}
