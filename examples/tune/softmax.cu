// Row softmax with knobs, for kreward.tune: a block of THREADS threads
// handles ROWS rows, THREADS / ROWS threads (whole warps) per row; ONLINE=1
// finds the row's max and sum in one pass (rescaling the running sum when
// the max grows), reading x twice instead of three times. THREADS must be
// a multiple of 32 * ROWS: a constraint the tuner checks before compiling.
// kreward: launch softmax_tuned grid=(cdiv(M, ROWS)) block=(THREADS) args=(x, y, M, N)
#ifndef THREADS
#define THREADS 256
#endif
#ifndef ROWS
#define ROWS 1
#endif
#ifndef ONLINE
#define ONLINE 0
#endif
#define TPR (THREADS / ROWS) /* threads per row */
#define WPR (TPR / 32)       /* warps per row */

__device__ __forceinline__ float warp_max(float v)
{
    for (int off = 16; off > 0; off >>= 1)
        v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, off));
    return v;
}

__device__ __forceinline__ float warp_sum(float v)
{
    for (int off = 16; off > 0; off >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, off);
    return v;
}

/* The max (is_max) or sum of v over the TPR threads of row r. Every thread
 * of the block calls it (it may synchronise the block). */
__device__ __forceinline__ float row_reduce(float v, bool is_max, float (*red)[WPR], int r, int t)
{
    v = is_max ? warp_max(v) : warp_sum(v);
    if (WPR == 1)
        return v;
    __syncthreads(); /* red may still be read from the last call */
    if ((t & 31) == 0)
        red[r][t >> 5] = v;
    __syncthreads();
    float out = red[r][0];
    for (int w = 1; w < WPR; w++)
        out = is_max ? fmaxf(out, red[r][w]) : out + red[r][w];
    return out;
}

extern "C" __global__ void softmax_tuned(const float* __restrict__ x, float* __restrict__ y, int m, int n)
{
    __shared__ float red[ROWS][WPR];
    const int r = threadIdx.x / TPR, t = threadIdx.x % TPR;
    const long long row = (long long)blockIdx.x * ROWS + r;
    const bool live = row < m; /* threads of rows past the end still join the reductions */
    const float* in = x + row * n;
    float* out = y + row * n;
    const float neg_inf = -__int_as_float(0x7f800000);
    float mx = neg_inf, sum = 0.f;
#if ONLINE
    if (live)
        for (int j = t; j < n; j += TPR) {
            float v = in[j];
            if (v > mx) {
                sum = sum * expf(mx - v) + 1.f;
                mx = v;
            } else {
                sum += expf(v - mx);
            }
        }
    float row_max = row_reduce(mx, true, red, r, t);
    sum = mx == neg_inf ? 0.f : sum * expf(mx - row_max);
    float inv = 1.f / row_reduce(sum, false, red, r, t);
#else
    if (live)
        for (int j = t; j < n; j += TPR)
            mx = fmaxf(mx, in[j]);
    float row_max = row_reduce(mx, true, red, r, t);
    if (live)
        for (int j = t; j < n; j += TPR)
            sum += expf(in[j] - row_max);
    float inv = 1.f / row_reduce(sum, false, red, r, t);
#endif
    if (live)
        for (int j = t; j < n; j += TPR)
            out[j] = expf(in[j] - row_max) * inv;
}
