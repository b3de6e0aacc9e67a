// Reference (naive): one thread per row, in double.
// kreward: launch ref grid=(cdiv(M, 128)) block=(128) args=(x, r, w, y, M, N, eps)
extern "C" __global__ void ref(const float* x, const float* r, const float* w, float* y, int m, int n,
                               float eps)
{
    int row = blockIdx.x * 128 + threadIdx.x;
    if (row >= m)
        return;
    long long base = (long long)row * n;
    double sq = 0;
    for (int j = 0; j < n; j++) {
        double h = (double)x[base + j] + r[base + j];
        sq += h * h;
    }
    double inv = 1.0 / sqrt(sq / n + eps);
    for (int j = 0; j < n; j++)
        y[base + j] = (float)(((double)x[base + j] + r[base + j]) * inv * w[j]);
}
