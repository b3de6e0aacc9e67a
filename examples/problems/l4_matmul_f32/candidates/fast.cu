// Fast: 64x64 tiles through shared memory, each thread a 4x4 block of
// outputs held in registers.
// kreward: launch mm64 grid=(cdiv(N, 64), cdiv(M, 64)) block=(16, 16) args=(a, b, c, M, N, K)
#define BM 64
#define BN 64
#define BK 16

extern "C" __global__ void __launch_bounds__(256) mm64(const float* __restrict__ a,
                                                       const float* __restrict__ b,
                                                       float* __restrict__ c, int m, int n, int k)
{
    __shared__ float as[BK][BM + 4];
    __shared__ float bs[BK][BN];
    int tx = threadIdx.x, ty = threadIdx.y, tid = ty * 16 + tx;
    int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    float acc[4][4] = {};
    for (int k0 = 0; k0 < k; k0 += BK) {
        for (int e = tid; e < BM * BK; e += 256) {
            int r = e / BK, kk = e % BK;
            as[kk][r] = (row0 + r < m && k0 + kk < k) ? a[(long long)(row0 + r) * k + k0 + kk] : 0.f;
        }
        for (int e = tid; e < BK * BN; e += 256) {
            int kk = e / BN, cc = e % BN;
            bs[kk][cc] = (k0 + kk < k && col0 + cc < n) ? b[(long long)(k0 + kk) * n + col0 + cc] : 0.f;
        }
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < BK; kk++) {
            float av[4], bv[4];
#pragma unroll
            for (int i = 0; i < 4; i++) {
                av[i] = as[kk][ty + 16 * i];
                bv[i] = bs[kk][tx + 16 * i];
            }
#pragma unroll
            for (int i = 0; i < 4; i++)
#pragma unroll
                for (int j = 0; j < 4; j++)
                    acc[i][j] += av[i] * bv[j];
        }
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < 4; i++)
#pragma unroll
        for (int j = 0; j < 4; j++) {
            int r = row0 + ty + 16 * i, cc = col0 + tx + 16 * j;
            if (r < m && cc < n)
                c[(long long)r * n + cc] = acc[i][j];
        }
}
