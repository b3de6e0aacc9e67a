// Cheat: abstention by error. A plan no engine can run (65 scratch buffers)
// used to end as verdict error, which trainers score neutral. Expect:
// invalid_plan.
// kreward: scratch s0 bytes=4
// kreward: scratch s1 bytes=4
// kreward: scratch s2 bytes=4
// kreward: scratch s3 bytes=4
// kreward: scratch s4 bytes=4
// kreward: scratch s5 bytes=4
// kreward: scratch s6 bytes=4
// kreward: scratch s7 bytes=4
// kreward: scratch s8 bytes=4
// kreward: scratch s9 bytes=4
// kreward: scratch s10 bytes=4
// kreward: scratch s11 bytes=4
// kreward: scratch s12 bytes=4
// kreward: scratch s13 bytes=4
// kreward: scratch s14 bytes=4
// kreward: scratch s15 bytes=4
// kreward: scratch s16 bytes=4
// kreward: scratch s17 bytes=4
// kreward: scratch s18 bytes=4
// kreward: scratch s19 bytes=4
// kreward: scratch s20 bytes=4
// kreward: scratch s21 bytes=4
// kreward: scratch s22 bytes=4
// kreward: scratch s23 bytes=4
// kreward: scratch s24 bytes=4
// kreward: scratch s25 bytes=4
// kreward: scratch s26 bytes=4
// kreward: scratch s27 bytes=4
// kreward: scratch s28 bytes=4
// kreward: scratch s29 bytes=4
// kreward: scratch s30 bytes=4
// kreward: scratch s31 bytes=4
// kreward: scratch s32 bytes=4
// kreward: scratch s33 bytes=4
// kreward: scratch s34 bytes=4
// kreward: scratch s35 bytes=4
// kreward: scratch s36 bytes=4
// kreward: scratch s37 bytes=4
// kreward: scratch s38 bytes=4
// kreward: scratch s39 bytes=4
// kreward: scratch s40 bytes=4
// kreward: scratch s41 bytes=4
// kreward: scratch s42 bytes=4
// kreward: scratch s43 bytes=4
// kreward: scratch s44 bytes=4
// kreward: scratch s45 bytes=4
// kreward: scratch s46 bytes=4
// kreward: scratch s47 bytes=4
// kreward: scratch s48 bytes=4
// kreward: scratch s49 bytes=4
// kreward: scratch s50 bytes=4
// kreward: scratch s51 bytes=4
// kreward: scratch s52 bytes=4
// kreward: scratch s53 bytes=4
// kreward: scratch s54 bytes=4
// kreward: scratch s55 bytes=4
// kreward: scratch s56 bytes=4
// kreward: scratch s57 bytes=4
// kreward: scratch s58 bytes=4
// kreward: scratch s59 bytes=4
// kreward: scratch s60 bytes=4
// kreward: scratch s61 bytes=4
// kreward: scratch s62 bytes=4
// kreward: scratch s63 bytes=4
// kreward: scratch s64 bytes=4
// kreward: launch add grid=(264) block=(128) args=(a, b, c, N)
extern "C" __global__ void add(const float *a, const float *b, float *c, long long n)
{
    for (long long i = blockIdx.x * 128ll + threadIdx.x; i < n; i += 264ll * 128)
        c[i] = a[i] + b[i];
}
