// Slow but honest: erf computed in double.
// kreward: launch gelu_d grid=(cdiv(N, 128)) block=(128) args=(x, y, N)
extern "C" __global__ void gelu_d(const float* x, float* y, long long n)
{
    long long i = blockIdx.x * 128ll + threadIdx.x;
    if (i < n) {
        double v = x[i];
        y[i] = (float)(0.5 * v * (1.0 + erf(v * 0.70710678118654752)));
    }
}
