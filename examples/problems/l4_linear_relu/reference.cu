// Reference (naive): one thread per output, a dot product along K.
// kreward: launch linear grid=(cdiv(N, 16), cdiv(M, 16)) block=(16, 16) args=(x, w, b, y, M, N, K)
extern "C" __global__ void linear(const float* x, const float* w, const float* b, float* y, int m, int n, int k)
{
    int row = blockIdx.y * 16 + threadIdx.y, col = blockIdx.x * 16 + threadIdx.x;
    if (row >= m || col >= n)
        return;
    float acc = b[col];
    for (int i = 0; i < k; i++)
        acc += x[(long long)row * k + i] * w[(long long)col * k + i];
    y[(long long)row * n + col] = fmaxf(acc, 0.f);
}
