// Reference (naive): one thread per query row, three passes, in double
// (the head dimension is at most 64).
// kreward: launch attn_ref grid=(cdiv(BH*S, 64)) block=(64) args=(q, k, v, o, BH, S, D, scale)
extern "C" __global__ void attn_ref(const float* q, const float* k, const float* v, float* o, int bh,
                                    int s, int d, float scale)
{
    long long row = blockIdx.x * 64ll + threadIdx.x;
    if (row >= (long long)bh * s || d > 64)
        return;
    long long base = row / s * s; /* first row of this slice */
    int i = (int)(row % s);
    const float* qi = q + row * d;
    double mx = -1e300;
    for (int j = 0; j <= i; j++) {
        double dot = 0;
        for (int t = 0; t < d; t++)
            dot += (double)qi[t] * k[(base + j) * d + t];
        mx = fmax(mx, dot * scale);
    }
    double sum = 0, acc[64];
    for (int t = 0; t < d; t++)
        acc[t] = 0;
    for (int j = 0; j <= i; j++) {
        double dot = 0;
        for (int t = 0; t < d; t++)
            dot += (double)qi[t] * k[(base + j) * d + t];
        double p = exp(dot * scale - mx);
        sum += p;
        for (int t = 0; t < d; t++)
            acc[t] += p * v[(base + j) * d + t];
    }
    for (int t = 0; t < d; t++)
        o[row * d + t] = (float)(acc[t] / sum);
}
