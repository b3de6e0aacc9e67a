// Reference (naive): one thread per row, three passes over it.
// kreward: launch softmax_ref grid=(cdiv(M, 128)) block=(128) args=(x, y, M, N)
extern "C" __global__ void softmax_ref(const float* x, float* y, int m, int n)
{
    int row = blockIdx.x * 128 + threadIdx.x;
    if (row >= m)
        return;
    const float* in = x + (long long)row * n;
    float* out = y + (long long)row * n;
    float mx = -__int_as_float(0x7f800000);
    for (int j = 0; j < n; j++)
        mx = fmaxf(mx, in[j]);
    double sum = 0;
    for (int j = 0; j < n; j++)
        sum += expf(in[j] - mx);
    for (int j = 0; j < n; j++)
        out[j] = (float)(expf(in[j] - mx) / sum);
}
