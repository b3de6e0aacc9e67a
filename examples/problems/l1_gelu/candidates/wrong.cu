// Wrong: the tanh approximation of GELU, off by up to ~1e-3.
// kreward: launch gelu_tanh grid=(cdiv(N, 256)) block=(256) args=(x, y, N)
extern "C" __global__ void gelu_tanh(const float* x, float* y, long long n)
{
    long long i = blockIdx.x * 256ll + threadIdx.x;
    if (i < n) {
        float v = x[i];
        y[i] = 0.5f * v * (1.0f + tanhf(0.7978845608f * (v + 0.044715f * v * v * v)));
    }
}
