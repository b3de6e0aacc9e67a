// Cheat: zeroes an input and writes what is consistent with the zeroed
// input (c = b), so a check on what it left would agree. Defence: inputs
// are hashed before and after; references run on regenerated inputs.
// Expect: incorrect, input_mutated.
// kreward: launch add grid=(264) block=(128) args=(a, b, c, N)
extern "C" __global__ void add(float *a, const float *b, float *c, long long n)
{
    for (long long i = blockIdx.x * 128ll + threadIdx.x; i < n; i += 264ll * 128) {
        a[i] = 0.0f;
        c[i] = b[i];
    }
}
