// Slow but honest: the textbook 16x16 shared-memory tiles, one output per thread.
// kreward: launch mm16 grid=(cdiv(N, 16), cdiv(M, 16)) block=(16, 16) args=(a, b, c, M, N, K)
extern "C" __global__ void mm16(const float* a, const float* b, float* c, int m, int n, int k)
{
    __shared__ float as[16][16], bs[16][16];
    int row = blockIdx.y * 16 + threadIdx.y, col = blockIdx.x * 16 + threadIdx.x;
    float acc = 0;
    for (int k0 = 0; k0 < k; k0 += 16) {
        as[threadIdx.y][threadIdx.x] = (row < m && k0 + threadIdx.x < k) ? a[(long long)row * k + k0 + threadIdx.x] : 0.f;
        bs[threadIdx.y][threadIdx.x] = (col < n && k0 + threadIdx.y < k) ? b[(long long)(k0 + threadIdx.y) * n + col] : 0.f;
        __syncthreads();
        for (int i = 0; i < 16; i++)
            acc += as[threadIdx.y][i] * bs[i][threadIdx.x];
        __syncthreads();
    }
    if (row < m && col < n)
        c[(long long)row * n + col] = acc;
}
