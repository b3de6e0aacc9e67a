// Reference (naive): one thread per row, two passes in double.
// kreward: launch layernorm_ref grid=(cdiv(M, 128)) block=(128) args=(x, gamma, beta, y, M, N, eps)
extern "C" __global__ void layernorm_ref(const float* x, const float* gamma, const float* beta,
                                         float* y, int m, int n, float eps)
{
    int row = blockIdx.x * 128 + threadIdx.x;
    if (row >= m)
        return;
    const float* in = x + (long long)row * n;
    double sum = 0, sq = 0;
    for (int j = 0; j < n; j++)
        sum += in[j];
    double mean = sum / n;
    for (int j = 0; j < n; j++)
        sq += (in[j] - mean) * (in[j] - mean);
    double inv = 1.0 / sqrt(sq / n + eps);
    for (int j = 0; j < n; j++)
        y[(long long)row * n + j] = (float)((in[j] - mean) * inv * gamma[j] + beta[j]);
}
