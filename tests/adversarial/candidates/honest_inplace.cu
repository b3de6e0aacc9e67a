// Honest look-alike on an in-out tensor: x *= 2 in place. Timed checks
// must compare against the reference run from the same starting contents.
// Expect: passed, no timed_output_wrong.
// kreward: launch scale grid=(cdiv(N, 256)) block=(256) args=(x, N)
extern "C" __global__ void scale(float *x, long long n)
{
    long long i = blockIdx.x * 256ll + threadIdx.x;
    if (i < n)
        x[i] *= 2.0f;
}
