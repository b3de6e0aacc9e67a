// Slow but honest: one element per thread, blocks of 32 threads.
// kreward: launch add1 grid=(cdiv(N, 32)) block=(32) args=(a, b, c, N)
extern "C" __global__ void add1(const float* a, const float* b, float* c, long long n)
{
    long long i = blockIdx.x * 32ll + threadIdx.x;
    if (i < n)
        c[i] = a[i] + b[i];
}
