// Wrong: adds the bias after the GELU.
// kreward: launch bias_gelu grid=(cdiv(N, 256), min(M, 4096)) block=(256) args=(x, bias, y, M, N)
extern "C" __global__ void bias_gelu(const float* x, const float* bias, float* y, int m, int n)
{
    int col = blockIdx.x * 256 + threadIdx.x;
    if (col >= n)
        return;
    for (int row = blockIdx.y; row < m; row += gridDim.y) {
        long long i = (long long)row * n + col;
        float v = x[i];
        y[i] = 0.5f * v * (1.0f + erff(v * 0.70710678118654752f)) + bias[col];
    }
}
