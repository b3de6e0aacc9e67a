// Wrong: forgets the ReLU.

// kreward: launch linear64 grid=(cdiv(N, 64), cdiv(M, 64)) block=(16, 16) args=(x, w, b, y, M, N, K)
#define BT 64
#define BK 16

extern "C" __global__ void __launch_bounds__(256) linear64(const float* __restrict__ x,
                                                           const float* __restrict__ w,
                                                           const float* __restrict__ b,
                                                           float* __restrict__ y, int m, int n, int k)
{
    __shared__ float xs[BK][BT + 4], ws[BK][BT + 4];
    int tx = threadIdx.x, ty = threadIdx.y, tid = ty * 16 + tx;
    int row0 = blockIdx.y * BT, col0 = blockIdx.x * BT;
    float acc[4][4] = {};
    for (int k0 = 0; k0 < k; k0 += BK) {
        for (int e = tid; e < BT * BK; e += 256) {
            int r = e / BK, kk = e % BK;
            xs[kk][r] = (row0 + r < m && k0 + kk < k) ? x[(long long)(row0 + r) * k + k0 + kk] : 0.f;
            ws[kk][r] = (col0 + r < n && k0 + kk < k) ? w[(long long)(col0 + r) * k + k0 + kk] : 0.f;
        }
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < BK; kk++) {
            float xv[4], wv[4];
#pragma unroll
            for (int i = 0; i < 4; i++) {
                xv[i] = xs[kk][ty + 16 * i];
                wv[i] = ws[kk][tx + 16 * i];
            }
#pragma unroll
            for (int i = 0; i < 4; i++)
#pragma unroll
                for (int j = 0; j < 4; j++)
                    acc[i][j] += xv[i] * wv[j];
        }
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < 4; i++)
#pragma unroll
        for (int j = 0; j < 4; j++) {
            int r = row0 + ty + 16 * i, c = col0 + tx + 16 * j;
            if (r < m && c < n)
                y[(long long)r * n + c] = acc[i][j] + b[c];
        }
}
