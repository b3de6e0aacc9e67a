// Wrong: the tail that is not a multiple of 4 is never written.
// kreward: launch add4 grid=(max(1, min(cdiv(N, 1024), 8448))) block=(256) args=(a, b, c, N)
extern "C" __global__ void add4(const float* a, const float* b, float* c, long long n)
{
    long long n4 = n / 4, stride = (long long)gridDim.x * 256;
    for (long long i = blockIdx.x * 256ll + threadIdx.x; i < n4; i += stride) {
        float4 x = reinterpret_cast<const float4*>(a)[i], y = reinterpret_cast<const float4*>(b)[i];
        reinterpret_cast<float4*>(c)[i] = make_float4(x.x + y.x, x.y + y.y, x.z + y.z, x.w + y.w);
    }
}
