// Fast: 16-byte loads and stores, enough blocks to fill the memory system.
// kreward: launch add4 grid=(max(1, min(cdiv(N, 1024), 8448))) block=(256) args=(a, b, c, N)
extern "C" __global__ void add4(const float* __restrict__ a, const float* __restrict__ b,
                                float* __restrict__ c, long long n)
{
    long long n4 = n / 4, stride = (long long)gridDim.x * 256;
    const float4* a4 = reinterpret_cast<const float4*>(a);
    const float4* b4 = reinterpret_cast<const float4*>(b);
    float4* c4 = reinterpret_cast<float4*>(c);
    for (long long i = blockIdx.x * 256ll + threadIdx.x; i < n4; i += stride) {
        float4 x = a4[i], y = b4[i];
        c4[i] = make_float4(x.x + y.x, x.y + y.y, x.z + y.z, x.w + y.w);
    }
    for (long long i = n4 * 4 + blockIdx.x * 256ll + threadIdx.x; i < n; i += stride)
        c[i] = a[i] + b[i];
}
