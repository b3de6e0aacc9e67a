// Wrong: reads B as if it were stored transposed.
// kreward: launch mm grid=(cdiv(N, 16), cdiv(M, 16)) block=(16, 16) args=(a, b, c, M, N, K)
extern "C" __global__ void mm(const float* a, const float* b, float* c, int m, int n, int k)
{
    int row = blockIdx.y * 16 + threadIdx.y, col = blockIdx.x * 16 + threadIdx.x;
    if (row >= m || col >= n)
        return;
    float acc = 0;
    for (int i = 0; i < k; i++)
        acc += a[(long long)row * k + i] * b[(long long)col * k + i];
    c[(long long)row * n + col] = acc;
}
