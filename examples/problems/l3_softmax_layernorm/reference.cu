// Reference (naive): one thread per row; softmax, then layernorm, in double.
// kreward: launch ref grid=(cdiv(R, 64)) block=(64) args=(x, gamma, beta, y, R, H, eps)
extern "C" __global__ void ref(const float* x, const float* gamma, const float* beta, float* y,
                               int rows, int h, float eps)
{
    int row = blockIdx.x * 64 + threadIdx.x;
    if (row >= rows)
        return;
    const float* in = x + (long long)row * h;
    float* out = y + (long long)row * h;
    double mx = -1e300, sum = 0;
    for (int j = 0; j < h; j++)
        mx = fmax(mx, (double)in[j]);
    for (int j = 0; j < h; j++)
        sum += exp(in[j] - mx);
    double mean = 1.0 / h, var = 0; /* softmax sums to one */
    for (int j = 0; j < h; j++) {
        double p = exp(in[j] - mx) / sum - mean;
        var += p * p;
    }
    double inv = 1.0 / sqrt(var / h + eps);
    for (int j = 0; j < h; j++)
        out[j] = (float)((exp(in[j] - mx) / sum - mean) * inv * gamma[j] + beta[j]);
}
