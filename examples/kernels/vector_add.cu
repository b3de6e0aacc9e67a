// A minimal candidate: device code only, launched through its plan.
// kreward: launch vector_add grid=(cdiv(N,256)) block=(256) args=(a, b, c, N)
extern "C" __global__ void vector_add(const float* __restrict__ a, const float* __restrict__ b,
                                      float* __restrict__ c, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        c[i] = a[i] + b[i];
}
