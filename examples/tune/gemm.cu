// A tiled f32 GEMM (C = A B, row-major) with knobs, for kreward.tune: each
// block computes a BM x BN tile of C from BK-deep slabs of A and B staged in
// shared memory; each thread accumulates a TM x TN block of outputs in
// registers. The block has (BM / TM) * (BN / TN) threads, which the launch
// line computes from the knobs. No __launch_bounds__: the compiler may then
// use up to 255 registers, so some configurations exceed the registers an
// SM has for their block size, and the tuner must refuse them before a run.
// kreward: launch sgemm_tiled grid=(cdiv(N, BN), cdiv(M, BM)) block=((BM / TM) * (BN / TN)) args=(a, b, c, M, N, K)
#ifndef BM
#define BM 64
#endif
#ifndef BN
#define BN 64
#endif
#ifndef BK
#define BK 16
#endif
#ifndef TM
#define TM 4
#endif
#ifndef TN
#define TN 4
#endif
#define THREADS ((BM / TM) * (BN / TN))
#define PAD 4 /* A's slab is stored transposed; the pad spreads its columns over banks */

extern "C" __global__ void sgemm_tiled(const float* __restrict__ a, const float* __restrict__ b,
                                       float* __restrict__ c, int m, int n, int k)
{
    __shared__ float as[BK][BM + PAD];
    __shared__ float bs[BK][BN];
    const int tid = threadIdx.x;
    const int tx = tid % (BN / TN), ty = tid / (BN / TN);
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    float acc[TM][TN];
#pragma unroll
    for (int i = 0; i < TM; i++)
#pragma unroll
        for (int j = 0; j < TN; j++)
            acc[i][j] = 0.f;
    for (int k0 = 0; k0 < k; k0 += BK) {
        for (int e = tid; e < BM * BK; e += THREADS) {
            int r = e / BK, kk = e % BK;
            as[kk][r] = (row0 + r < m && k0 + kk < k) ? a[(long long)(row0 + r) * k + k0 + kk] : 0.f;
        }
        for (int e = tid; e < BK * BN; e += THREADS) {
            int kk = e / BN, cc = e % BN;
            bs[kk][cc] = (k0 + kk < k && col0 + cc < n) ? b[(long long)(k0 + kk) * n + col0 + cc] : 0.f;
        }
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < BK; kk++) {
            float av[TM], bv[TN];
#pragma unroll
            for (int i = 0; i < TM; i++)
                av[i] = as[kk][ty + (BM / TM) * i];
#pragma unroll
            for (int j = 0; j < TN; j++)
                bv[j] = bs[kk][tx + (BN / TN) * j];
#pragma unroll
            for (int i = 0; i < TM; i++)
#pragma unroll
                for (int j = 0; j < TN; j++)
                    acc[i][j] += av[i] * bv[j];
        }
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < TM; i++)
#pragma unroll
        for (int j = 0; j < TN; j++) {
            int r = row0 + ty + (BM / TM) * i, cc = col0 + tx + (BN / TN) * j;
            if (r < m && cc < n)
                c[(long long)r * n + cc] = acc[i][j];
        }
}
