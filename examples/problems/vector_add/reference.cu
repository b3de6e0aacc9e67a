// Reference: one thread per element.
// kreward: launch add_ref grid=(cdiv(N,256)) block=(256) args=(a, b, c, N)
extern "C" __global__ void add_ref(const float* a, const float* b, float* c, long long n)
{
    long long i = blockIdx.x * 256ll + threadIdx.x;
    if (i < n)
        c[i] = a[i] + b[i];
}
