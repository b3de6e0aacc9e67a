// Reference (naive): one thread per row, in double.
// kreward: launch rmsnorm_ref grid=(cdiv(M, 128)) block=(128) args=(x, w, y, M, N, eps)
extern "C" __global__ void rmsnorm_ref(const float* x, const float* w, float* y, int m, int n, float eps)
{
    int row = blockIdx.x * 128 + threadIdx.x;
    if (row >= m)
        return;
    const float* in = x + (long long)row * n;
    double sq = 0;
    for (int j = 0; j < n; j++)
        sq += (double)in[j] * in[j];
    double inv = 1.0 / sqrt(sq / n + eps);
    for (int j = 0; j < n; j++)
        y[(long long)row * n + j] = (float)(in[j] * inv * w[j]);
}
