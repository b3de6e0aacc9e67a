// Slow but honest: the matrix product into a scratch buffer, then a second
// kernel for bias and ReLU.
// kreward: scratch t bytes=M*N*4
// kreward: launch mm grid=(cdiv(N, 16), cdiv(M, 16)) block=(16, 16) args=(x, w, t, M, N, K)
// kreward: launch bias_relu grid=(cdiv(M*N, 256)) block=(256) args=(t, b, y, M*N, N)
extern "C" __global__ void mm(const float* x, const float* w, float* t, int m, int n, int k)
{
    __shared__ float xs[16][17], ws[16][17];
    int row = blockIdx.y * 16 + threadIdx.y, col = blockIdx.x * 16 + threadIdx.x;
    int wrow = blockIdx.x * 16 + threadIdx.y;
    float acc = 0;
    for (int k0 = 0; k0 < k; k0 += 16) {
        xs[threadIdx.y][threadIdx.x] = (row < m && k0 + threadIdx.x < k) ? x[(long long)row * k + k0 + threadIdx.x] : 0.f;
        ws[threadIdx.y][threadIdx.x] = (wrow < n && k0 + threadIdx.x < k) ? w[(long long)wrow * k + k0 + threadIdx.x] : 0.f;
        __syncthreads();
        for (int i = 0; i < 16; i++)
            acc += xs[threadIdx.y][i] * ws[threadIdx.x][i];
        __syncthreads();
    }
    if (row < m && col < n)
        t[(long long)row * n + col] = acc;
}

extern "C" __global__ void bias_relu(const float* t, const float* b, float* y, long long total, int n)
{
    long long i = blockIdx.x * 256ll + threadIdx.x;
    if (i < total)
        y[i] = fmaxf(t[i] + b[i % n], 0.f);
}
