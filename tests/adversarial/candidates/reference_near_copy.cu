// Shaping: the reference with an empty statement and the sum's operands
// swapped (its source fingerprint differs; its compiled kernel is the
// reference's up to the order of two loads). It does no work of its own.
// Expect: passed, reference_copy (decided on the compiled code).
// kreward: launch vadd grid=(264) block=(128) args=(a, b, c, N)
extern "C" __global__ void vadd(const float* x, const float* y, float* z, long long count)
{
    ;
    for (long long k = blockIdx.x * 128ll + threadIdx.x; k < count; k += 264ll * 128)
        z[k] = y[k] + x[k];
}
