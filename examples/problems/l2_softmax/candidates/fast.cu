// Fast: one block per row; max and sum through warp shuffles.
// kreward: launch softmax_block grid=(M) block=(256) args=(x, y, N)
__device__ __forceinline__ float block_reduce(float v, bool is_max)
{
    __shared__ float warp_vals[8];
    for (int off = 16; off > 0; off >>= 1) {
        float o = __shfl_xor_sync(0xffffffffu, v, off);
        v = is_max ? fmaxf(v, o) : v + o;
    }
    __syncthreads(); /* warp_vals may still be read from the last call */
    if ((threadIdx.x & 31) == 0)
        warp_vals[threadIdx.x >> 5] = v;
    __syncthreads();
    float r = warp_vals[0];
    for (int w = 1; w < 8; w++)
        r = is_max ? fmaxf(r, warp_vals[w]) : r + warp_vals[w];
    return r;
}

extern "C" __global__ void softmax_block(const float* __restrict__ x, float* __restrict__ y, int n)
{
    const float* in = x + (long long)blockIdx.x * n;
    float* out = y + (long long)blockIdx.x * n;
    float mx = -__int_as_float(0x7f800000);
    for (int j = threadIdx.x; j < n; j += 256)
        mx = fmaxf(mx, in[j]);
    mx = block_reduce(mx, true);
    float sum = 0;
    for (int j = threadIdx.x; j < n; j += 256)
        sum += expf(in[j] - mx);
    float inv = 1.0f / block_reduce(sum, false);
    for (int j = threadIdx.x; j < n; j += 256)
        out[j] = expf(in[j] - mx) * inv;
}
