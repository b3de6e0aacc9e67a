// Cheat: half precision arithmetic for an f32 problem.
// Expect: incorrect, precision.
#include <cuda_fp16.h>
// kreward: launch add grid=(264) block=(128) args=(a, b, c, N)
extern "C" __global__ void add(const float *a, const float *b, float *c, long long n)
{
    for (long long i = blockIdx.x * 128ll + threadIdx.x; i < n; i += 264ll * 128)
        c[i] = __half2float(__hadd(__float2half(a[i]), __float2half(b[i])));
}
