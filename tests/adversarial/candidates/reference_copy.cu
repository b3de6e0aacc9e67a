// Shaping: the reference, renamed and reformatted. It does no work of its
// own. Expect: passed, reference_copy.
// kreward: launch vadd grid=(264) block=(128) args=(a, b, c, N)
extern "C" __global__ void vadd(const float* x, const float* y, float* z, long long count)
{
    // a comment of its own
    for (long long k = blockIdx.x * 128ll + threadIdx.x; k < count; k += 264ll * 128)
        z[k] = x[k] + y[k];
}
