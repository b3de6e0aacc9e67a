// Correct but hopelessly slow: one thread walks the vector. The time budget
// stops the measurement early. Expect: passed, slow.
// kreward: launch add grid=(1) block=(1) args=(a, b, c, N)
extern "C" __global__ void add(const float *a, const float *b, float *c, long long n)
{
    for (long long i = 0; i < n; i++)
        c[i] = a[i] + b[i];
}
