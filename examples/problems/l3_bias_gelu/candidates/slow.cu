// Slow but honest: one element per thread, 64-bit division for the column.
// kreward: launch bias_gelu grid=(cdiv(M*N, 128)) block=(128) args=(x, bias, y, M, N)
extern "C" __global__ void bias_gelu(const float* x, const float* bias, float* y, long long m, long long n)
{
    long long i = blockIdx.x * 128ll + threadIdx.x;
    if (i < m * n) {
        double v = (double)x[i] + bias[i % n];
        y[i] = (float)(0.5 * v * (1.0 + erf(v * 0.70710678118654752)));
    }
}
