/* The input generator, shared verbatim by the host (C11) and the GPU (CUDA
 * C++ through NVRTC): value = f(seed, tensor, index), bit-identical on both.
 *
 * Why the same bits: a caller rebuilds inputs on the host (e.g. to compute
 * golden outputs with PyTorch) and must see exactly what the GPU kernel saw.
 * So this file uses only operations IEEE 754 fixes exactly: + - * / and sqrt
 * in double and float, the float fused multiply-add where written out
 * (KR_GEN_FMAF: fmaf, correctly rounded on both), int<->double, int->float
 * and double->float conversions, integer bit work.
 * No libm transcendental (log/cos/exp are written here as polynomials) and
 * no contraction of a*b+c the code did not write: the host compiles it with
 * -ffp-contract=off (the default in ISO C mode), NVRTC with --fmad=false.
 *
 * Randomness: Philox4x32-10 (Salmon et al., SC'11), key = seed, counter =
 * (index, tensor, stream tag). */
#ifndef KR_GEN_H
#define KR_GEN_H

#ifdef __CUDACC__
#define KR_GEN_FN static __device__ __forceinline__
typedef unsigned char kr_u8;
typedef unsigned short kr_u16;
typedef unsigned int kr_u32;
typedef unsigned long long kr_u64;
typedef long long kr_i64;
#define KR_GEN_SQRT(x) sqrt(x)
#define KR_GEN_FMAF(a, b, c) fmaf(a, b, c)
#define KR_GEN_F2U(f) __float_as_uint(f)
#define KR_GEN_U2F(u) __uint_as_float(u)
#define KR_GEN_D2U(d) ((kr_u64)__double_as_longlong(d))
#define KR_GEN_U2D(u) __longlong_as_double((long long)(u))
/* full-width stores: tensors are 256-byte aligned and elements naturally */
#define KR_GEN_STORE16(p, v) (*(kr_u16 *)(p) = (kr_u16)(v))
#define KR_GEN_STORE32(p, v) (*(kr_u32 *)(p) = (kr_u32)(v))
#define KR_GEN_STORE64(p, v) (*(kr_u64 *)(p) = (kr_u64)(v))
#define KR_GEN_STORE128(p, lo, hi)                                                    \
    (*(ulonglong2 *)(p) = make_ulonglong2((kr_u64)(lo), (kr_u64)(hi)))
#else
#include <math.h>
#include <stdint.h>
#include <string.h>
#define KR_GEN_FN static inline
typedef uint8_t kr_u8;
typedef uint16_t kr_u16;
typedef uint32_t kr_u32;
typedef uint64_t kr_u64;
typedef int64_t kr_i64;
#define KR_GEN_SQRT(x) sqrt(x)
#define KR_GEN_FMAF(a, b, c) fmaf(a, b, c)
static inline kr_u32 kr_gen_f2u(float f) { kr_u32 u; memcpy(&u, &f, 4); return u; }
static inline float kr_gen_u2f(kr_u32 u) { float f; memcpy(&f, &u, 4); return f; }
static inline kr_u64 kr_gen_d2u(double d) { kr_u64 u; memcpy(&u, &d, 8); return u; }
static inline double kr_gen_u2d(kr_u64 u) { double d; memcpy(&d, &u, 8); return d; }
#define KR_GEN_F2U(f) kr_gen_f2u(f)
#define KR_GEN_U2F(u) kr_gen_u2f(u)
#define KR_GEN_D2U(d) kr_gen_d2u(d)
#define KR_GEN_U2D(u) kr_gen_u2d(u)
/* the host is little-endian like the GPU; memcpy keeps unaligned buffers legal */
#define KR_GEN_STORE16(p, v) do { kr_u16 t_ = (kr_u16)(v); memcpy((p), &t_, 2); } while (0)
#define KR_GEN_STORE32(p, v) do { kr_u32 t_ = (kr_u32)(v); memcpy((p), &t_, 4); } while (0)
#define KR_GEN_STORE64(p, v) do { kr_u64 t_ = (kr_u64)(v); memcpy((p), &t_, 8); } while (0)
#define KR_GEN_STORE128(p, lo, hi)                                                    \
    do { kr_u64 t_[2] = {(kr_u64)(lo), (kr_u64)(hi)}; memcpy((p), t_, 16); } while (0)
#endif

/* dtype numbers: equal to enum kr_dtype in include/kreward/problem.h */
#define KR_GEN_F32 1
#define KR_GEN_F16 2
#define KR_GEN_BF16 3
#define KR_GEN_F64 4
#define KR_GEN_I8 5
#define KR_GEN_U8 6
#define KR_GEN_I32 7
#define KR_GEN_I64 8
#define KR_GEN_BOOL 9
#define KR_GEN_FP8_E4M3 10
#define KR_GEN_FP8_E5M2 11

/* distribution kinds: equal to enum kr_dist (NONE: no mix base) */
#define KR_GEN_NONE 0
#define KR_GEN_UNIFORM 1
#define KR_GEN_NORMAL 2
#define KR_GEN_INT 3
#define KR_GEN_PARETO 4
#define KR_GEN_MIX 5
#define KR_GEN_BERNOULLI 6

/* One tensor's distribution; passed by value to the GPU kernel, so the
 * layout is fixed: 8-byte fields first. */
typedef struct kr_gen_dist {
    double a, b;          /* uniform: low, high; normal: mean, std; pareto: alpha, scale */
    double p;             /* bernoulli: P(true); mix: fraction of outliers */
    double outlier_scale; /* mix: outliers are the base value times this */
    double clamp;         /* |value| is clamped to this (the dtype's range) */
    kr_i64 ilo, ihi;      /* int: inclusive range */
    kr_u32 kind;          /* KR_GEN_UNIFORM ... */
    kr_u32 base_kind;     /* mix: the base distribution (uniform, normal, pareto) */
    kr_u32 dtype;         /* KR_GEN_F32 ... */
    kr_u32 pad;
} kr_gen_dist;

KR_GEN_FN kr_u32 kr_gen_mulhi(kr_u32 a, kr_u32 b, kr_u32 *lo)
{
    kr_u64 p = (kr_u64)a * b;
    *lo = (kr_u32)p;
    return (kr_u32)(p >> 32);
}

/* Philox4x32 with 10 rounds: c is the counter in, the random words out. */
KR_GEN_FN void kr_gen_philox(kr_u32 c[4], kr_u32 k0, kr_u32 k1)
{
    for (int r = 0; r < 10; r++) {
        kr_u32 lo0, lo1;
        kr_u32 hi0 = kr_gen_mulhi(0xD2511F53u, c[0], &lo0);
        kr_u32 hi1 = kr_gen_mulhi(0xCD9E8D57u, c[2], &lo1);
        kr_u32 n0 = hi1 ^ c[1] ^ k0, n2 = hi0 ^ c[3] ^ k1;
        c[0] = n0;
        c[1] = lo1;
        c[2] = n2;
        c[3] = lo0;
        k0 += 0x9E3779B9u;
        k1 += 0xBB67AE85u;
    }
}

/* Uniform in [0, 1) with 53 random bits. */
KR_GEN_FN double kr_gen_u01(kr_u32 hi, kr_u32 lo)
{
    return ((double)(hi >> 5) * 67108864.0 + (double)(lo >> 6)) * (1.0 / 9007199254740992.0);
}

/* ln(x) for x > 0: x = m * 2^e with m in [sqrt(1/2), sqrt(2)), then
 * ln(m) = 2 atanh(s), s = (m-1)/(m+1), |s| < 0.172, series to s^23. */
KR_GEN_FN double kr_gen_log(double x)
{
    kr_u64 bits = KR_GEN_D2U(x);
    int e = (int)((bits >> 52) & 0x7ff) - 1023;
    double m = KR_GEN_U2D((bits & 0x000fffffffffffffull) | 0x3ff0000000000000ull);
    if (m > 1.4142135623730951) {
        m = m * 0.5;
        e += 1;
    }
    double s = (m - 1.0) / (m + 1.0), s2 = s * s;
    double t = 1.0 / 23;
    t = t * s2 + 1.0 / 21;
    t = t * s2 + 1.0 / 19;
    t = t * s2 + 1.0 / 17;
    t = t * s2 + 1.0 / 15;
    t = t * s2 + 1.0 / 13;
    t = t * s2 + 1.0 / 11;
    t = t * s2 + 1.0 / 9;
    t = t * s2 + 1.0 / 7;
    t = t * s2 + 1.0 / 5;
    t = t * s2 + 1.0 / 3;
    t = t * s2 + 1.0;
    return 2.0 * s * t + (double)e * 0.6931471805599453;
}

/* e^x for |x| < 700: x = k ln2 + r, |r| <= ln2/2, Taylor to r^14, times 2^k. */
KR_GEN_FN double kr_gen_exp(double x)
{
    double kf = x * 1.4426950408889634;
    kr_i64 k = (kr_i64)(kf < 0 ? kf - 0.5 : kf + 0.5);
    double r = x - (double)k * 0.6931471805599453;
    double t = 1.0 / 87178291200.0;
    t = t * r + 1.0 / 6227020800.0;
    t = t * r + 1.0 / 479001600.0;
    t = t * r + 1.0 / 39916800.0;
    t = t * r + 1.0 / 3628800.0;
    t = t * r + 1.0 / 362880.0;
    t = t * r + 1.0 / 40320.0;
    t = t * r + 1.0 / 5040.0;
    t = t * r + 1.0 / 720.0;
    t = t * r + 1.0 / 120.0;
    t = t * r + 1.0 / 24.0;
    t = t * r + 1.0 / 6.0;
    t = t * r + 0.5;
    t = t * r + 1.0;
    t = t * r + 1.0;
    return t * KR_GEN_U2D((kr_u64)(k + 1023) << 52);
}

/* cos(2 pi u) for u in [0, 1), and sin(2 pi u) into *sin_out: quadrant from
 * u, then Taylor polynomials of sin and cos on [0, pi/2) (to x^21 and x^22:
 * error below 1e-16). */
KR_GEN_FN double kr_gen_cossin2pi(double u, double *sin_out)
{
    double q4 = u * 4.0;
    int q = (int)q4;
    double x = (q4 - (double)q) * 1.5707963267948966, x2 = x * x;
    double c = 1.0 / 1124000727777607680000.0; /* 22! */
    c = c * -x2 + 1.0 / 2432902008176640000.0;    /* 20! */
    c = c * -x2 + 1.0 / 6402373705728000.0;       /* 18! */
    c = c * -x2 + 1.0 / 20922789888000.0;
    c = c * -x2 + 1.0 / 87178291200.0;
    c = c * -x2 + 1.0 / 479001600.0;
    c = c * -x2 + 1.0 / 3628800.0;
    c = c * -x2 + 1.0 / 40320.0;
    c = c * -x2 + 1.0 / 720.0;
    c = c * -x2 + 1.0 / 24.0;
    c = c * -x2 + 0.5;
    c = c * -x2 + 1.0;
    double s = 1.0 / 51090942171709440000.0;  /* 21! */
    s = s * -x2 + 1.0 / 121645100408832000.0;     /* 19! */
    s = s * -x2 + 1.0 / 355687428096000.0;        /* 17! */
    s = s * -x2 + 1.0 / 1307674368000.0;
    s = s * -x2 + 1.0 / 6227020800.0;
    s = s * -x2 + 1.0 / 39916800.0;
    s = s * -x2 + 1.0 / 362880.0;
    s = s * -x2 + 1.0 / 5040.0;
    s = s * -x2 + 1.0 / 120.0;
    s = s * -x2 + 1.0 / 6.0;
    s = s * -x2 + 1.0;
    s = s * x;
    /* cos(q pi/2 + x) and sin(q pi/2 + x) */
    *sin_out = q == 0 ? s : q == 1 ? c : q == 2 ? -s : -c;
    return q == 0 ? c : q == 1 ? -s : q == 2 ? -c : s;
}

KR_GEN_FN double kr_gen_cos2pi(double u)
{
    double s;
    return kr_gen_cossin2pi(u, &s);
}

/* The float forms of ln and cos/sin 2 pi u, for the normal distribution of
 * every dtype but f64: the generator fills every input of every timed
 * sample, and the double form (FP64, twelve-term series) made it a third of
 * the memory's speed on an H200, most of a memory-bound benchmark's time.
 * Same rules as above, in float: the series are short enough for float's
 * 24 bits. ln(x) for x in (0, 1]: x = m 2^e, m in [sqrt(1/2), sqrt(2)),
 * ln(m) = 2 atanh(s), s = (m-1)/(m+1), |s| < 0.172, to s^9 (next term
 * 2e-9 of the value). */
KR_GEN_FN float kr_gen_logf(float x)
{
    kr_u32 bits = KR_GEN_F2U(x);
    int e = (int)((bits >> 23) & 0xffu) - 127;
    float m = KR_GEN_U2F((bits & 0x007fffffu) | 0x3f800000u);
    if (m > 1.41421356f) {
        m = m * 0.5f;
        e += 1;
    }
    float s = (m - 1.0f) / (m + 1.0f), s2 = s * s;
    float t = 0.111111111f;
    t = KR_GEN_FMAF(t, s2, 0.142857143f);
    t = KR_GEN_FMAF(t, s2, 0.2f);
    t = KR_GEN_FMAF(t, s2, 0.333333333f);
    t = KR_GEN_FMAF(t, s2, 1.0f);
    return KR_GEN_FMAF((float)e, 0.693147181f, 2.0f * s * t);
}

/* cos(2 pi u) and sin(2 pi u) for u in [0, 1): quadrant from u, Taylor to
 * x^12 and x^13 on [0, pi/2) (next terms under 7e-9). */
KR_GEN_FN float kr_gen_cossin2pif(float u, float *sin_out)
{
    float q4 = u * 4.0f;
    int q = (int)q4;
    float x = (q4 - (float)q) * 1.57079633f, x2 = x * x;
    float c = 2.08767570e-09f;                  /* 1/12! */
    c = KR_GEN_FMAF(c, -x2, 2.75573192e-07f); /* 1/10! */
    c = KR_GEN_FMAF(c, -x2, 2.48015873e-05f); /* 1/8! */
    c = KR_GEN_FMAF(c, -x2, 1.38888889e-03f); /* 1/6! */
    c = KR_GEN_FMAF(c, -x2, 4.16666667e-02f); /* 1/4! */
    c = KR_GEN_FMAF(c, -x2, 0.5f);
    c = KR_GEN_FMAF(c, -x2, 1.0f);
    float s = 1.60590438e-10f;                  /* 1/13! */
    s = KR_GEN_FMAF(s, -x2, 2.50521084e-08f); /* 1/11! */
    s = KR_GEN_FMAF(s, -x2, 2.75573192e-06f); /* 1/9! */
    s = KR_GEN_FMAF(s, -x2, 1.98412698e-04f); /* 1/7! */
    s = KR_GEN_FMAF(s, -x2, 8.33333333e-03f); /* 1/5! */
    s = KR_GEN_FMAF(s, -x2, 0.166666667f);    /* 1/3! */
    s = KR_GEN_FMAF(s, -x2, 1.0f);
    s = s * x;
    *sin_out = q == 0 ? s : q == 1 ? c : q == 2 ? -s : -c;
    return q == 0 ? c : q == 1 ? -s : q == 2 ? -c : s;
}

/* Box-Muller: a pair of normal values, mean and std applied (in double).
 * f64 tensors keep the double form (53-bit uniforms from all four words of
 * w, tails to 8.6 sigma); the others use float (24-bit uniforms from the
 * words x and y, tails to 5.8 sigma: beyond it lies one value in 10^8). */
KR_GEN_FN void kr_gen_normal_pair(const kr_gen_dist *d, const kr_u32 w[4], kr_u32 x, kr_u32 y,
                                  double z[2])
{
    if (d->dtype == KR_GEN_F64) {
        double u1 = 1.0 - kr_gen_u01(w[0], w[1]); /* (0, 1] */
        double r = KR_GEN_SQRT(-2.0 * kr_gen_log(u1)), sn;
        double cs = kr_gen_cossin2pi(kr_gen_u01(w[2], w[3]), &sn);
        z[0] = d->a + d->b * r * cs;
        z[1] = d->a + d->b * r * sn;
        return;
    }
    float u1 = (float)((x >> 8) + 1u) * 5.96046448e-08f; /* (0, 1], times 2^-24 */
    float u2 = (float)(y >> 8) * 5.96046448e-08f;        /* [0, 1) */
    float r = sqrtf(-2.0f * kr_gen_logf(u1)), sn;
    float cs = kr_gen_cossin2pif(u2, &sn);
    z[0] = d->a + d->b * (double)(r * cs);
    z[1] = d->a + d->b * (double)(r * sn);
}

/* How many elements one Philox call (4 words) serves: cheap distributions
 * use one word per element, a float normal pair two (Box-Muller's cos and
 * sin shared: two pairs a call), an f64 pair all four; a mix over a float
 * uniform or normal base two words per element (its value's, and the
 * outlier draw's). The generator writes every input of every timed
 * sample, so Philox calls and Box-Muller pairs per element are most of a
 * benchmark's generation cost. Part of the definition of the values: host
 * and GPU agree on it. */
KR_GEN_FN int kr_gen_per_call(const kr_gen_dist *d)
{
    if (d->kind == KR_GEN_UNIFORM)
        return d->dtype == KR_GEN_F64 ? 1 : 4;
    if (d->kind == KR_GEN_INT)
        return (kr_u64)(d->ihi - d->ilo) < 0xffffffffull ? 4 : 1;
    if (d->kind == KR_GEN_BERNOULLI)
        return 4;
    if (d->kind == KR_GEN_NORMAL)
        return d->dtype == KR_GEN_F64 ? 2 : 4;
    if (d->kind == KR_GEN_MIX && d->dtype != KR_GEN_F64 &&
        (d->base_kind == KR_GEN_UNIFORM || d->base_kind == KR_GEN_NORMAL))
        return 2;
    return 1;
}

/* w[lane] without a dynamic index, so the words stay in registers on the GPU */
KR_GEN_FN kr_u32 kr_gen_word(const kr_u32 w[4], int lane)
{
    return lane == 0 ? w[0] : lane == 1 ? w[1] : lane == 2 ? w[2] : w[3];
}

/* Uniform in [0, 1) from one word: 24 bits, exact in float and double. */
KR_GEN_FN double kr_gen_u24(kr_u32 w)
{
    return (double)(w >> 8) * (1.0 / 16777216.0);
}

/* The continuous distributions (also a mix's base); lane picks the word or
 * the half of a Box-Muller pair. */
KR_GEN_FN double kr_gen_base(kr_u32 kind, const kr_gen_dist *d, const kr_u32 w[4], int lane,
                             int per_call)
{
    if (kind == KR_GEN_UNIFORM) {
        double u = per_call == 4   ? kr_gen_u24(kr_gen_word(w, lane))
                 : per_call == 2 ? kr_gen_u24(kr_gen_word(w, 2 * lane)) /* a mix's value word */
                                 : kr_gen_u01(w[0], w[1]);
        return d->a + (d->b - d->a) * u;
    }
    if (kind == KR_GEN_NORMAL) {
        /* four lanes: pairs (w0, w1) and (w2, w3); a mix's two: (w0, w2) */
        double z[2];
        if (per_call == 4)
            kr_gen_normal_pair(d, w, kr_gen_word(w, lane & 2), kr_gen_word(w, (lane & 2) + 1), z);
        else
            kr_gen_normal_pair(d, w, w[0], w[2], z);
        return (lane & 1) ? z[1] : z[0];
    }
    /* pareto, symmetric: scale * (u^(-1/alpha) - 1) with a random sign */
    double u = 1.0 - kr_gen_u01(w[0], w[1]);
    double v = d->b * (kr_gen_exp(-kr_gen_log(u) / d->a) - 1.0);
    return (w[2] & 1u) ? -v : v;
}

/* float -> a small float format (mbits mantissa bits, exponent bias),
 * round to nearest even, saturating at max_code; used for f16 and fp8. The
 * caller has clamped |f| to the format's range. */
KR_GEN_FN kr_u32 kr_gen_to_small(float f, int mbits, int bias, kr_u32 max_code, int total_bits)
{
    kr_u32 x = KR_GEN_F2U(f);
    kr_u32 sign = (x >> 31) << (total_bits - 1);
    kr_u32 a = x & 0x7fffffffu;
    if (a < 0x00800000u)
        return sign; /* zero or an f32 subnormal: far below every target's range */
    int e = (int)(a >> 23) - 127;
    kr_u32 code;
    if (e < 1 - bias) {
        int shift = 24 - bias - mbits - e;
        kr_u32 m = (a & 0x7fffffu) | 0x800000u;
        if (shift >= 32)
            return sign;
        kr_u32 half = 1u << (shift - 1);
        code = (m + half - 1 + ((m >> shift) & 1u)) >> shift;
    } else {
        int shift = 23 - mbits;
        kr_u32 m = a & 0x7fffffu;
        kr_u32 half = 1u << (shift - 1);
        kr_u32 r = (m + half - 1 + ((m >> shift) & 1u)) >> shift;
        code = ((kr_u32)(e + bias) << mbits) + r; /* a carry out of r bumps the exponent */
    }
    if (code > max_code)
        code = max_code;
    return sign | code;
}

KR_GEN_FN kr_u16 kr_gen_to_bf16(float f)
{
    kr_u32 x = KR_GEN_F2U(f);
    return (kr_u16)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

KR_GEN_FN int kr_gen_dtype_size(kr_u32 dtype)
{
    switch (dtype) {
    case KR_GEN_F64:
    case KR_GEN_I64:
        return 8;
    case KR_GEN_F32:
    case KR_GEN_I32:
        return 4;
    case KR_GEN_F16:
    case KR_GEN_BF16:
        return 2;
    default:
        return 1;
    }
}

/* Philox words for a group of elements (counter = group, tensor, tag). */
KR_GEN_FN void kr_gen_words(kr_u64 seed, kr_u32 tensor, kr_u64 group, kr_u32 w[4])
{
    w[0] = (kr_u32)group;
    w[1] = (kr_u32)(group >> 32);
    w[2] = tensor;
    w[3] = 0x6b726777u; /* "krgw" */
    kr_gen_philox(w, (kr_u32)seed, (kr_u32)(seed >> 32));
}

KR_GEN_FN kr_u64 kr_gen_encode(const kr_gen_dist *d, double v, kr_i64 iv, int is_int);

/* A mix's outlier rule: the base value v, scaled where the element's
 * uniform draw u falls under the outlier fraction. */
KR_GEN_FN double kr_gen_outlier(const kr_gen_dist *d, double v, double u)
{
    return u < d->p ? v * d->outlier_scale : v;
}

/* One element's bits, from its group's words. */
KR_GEN_FN kr_u64 kr_gen_bits(const kr_gen_dist *d, const kr_u32 w[4], int lane, int per_call,
                             kr_u64 seed, kr_u32 tensor)
{
    kr_i64 iv = 0;
    double v = 0.0;
    int is_int = d->kind == KR_GEN_INT || d->kind == KR_GEN_BERNOULLI;
    if (d->kind == KR_GEN_INT) {
        if (per_call == 4) {
            iv = d->ilo + (kr_i64)(kr_gen_word(w, lane) % (kr_u32)(d->ihi - d->ilo + 1));
        } else {
            kr_u64 range = (kr_u64)(d->ihi - d->ilo) + 1u; /* 0 means the whole 2^64 */
            kr_u64 r = ((kr_u64)w[0] << 32) | w[1];
            iv = d->ilo + (kr_i64)(range ? r % range : r);
        }
    } else if (d->kind == KR_GEN_BERNOULLI) {
        iv = kr_gen_u24(kr_gen_word(w, lane)) < d->p;
    } else if (d->kind == KR_GEN_MIX && per_call == 2) {
        /* a float uniform or normal base: the outlier draw from the word
         * after the value's (w1 for lane 0, w3 for lane 1) */
        v = kr_gen_outlier(d, kr_gen_base(d->base_kind, d, w, lane, 2),
                           kr_gen_u24(kr_gen_word(w, 2 * lane + 1)));
    } else if (d->kind == KR_GEN_MIX) {
        v = kr_gen_base(d->base_kind, d, w, 0, 1);
        /* an f64 or pareto base: the outlier draw from a word the base
         * value left alone (w[3]: uniform and pareto use w[0..1] and one
         * bit of w[2]); a double normal uses all four, so it takes a
         * second Philox call */
        double u;
        if (d->base_kind == KR_GEN_NORMAL && d->dtype == KR_GEN_F64) {
            kr_u32 w2[4] = {w[2], w[3], w[0] ^ w[1], 0x6d697821u /* "mix!" */};
            kr_gen_philox(w2, (kr_u32)seed ^ 0x5bd1e995u, tensor);
            u = kr_gen_u01(w2[0], w2[1]);
        } else {
            u = kr_gen_u24(w[3]);
        }
        v = kr_gen_outlier(d, v, u);
    } else {
        v = kr_gen_base(d->kind, d, w, lane, per_call);
    }
    return kr_gen_encode(d, v, iv, is_int);
}

/* A value's bits in the tensor's dtype: clamped to its range. */
KR_GEN_FN kr_u64 kr_gen_encode(const kr_gen_dist *d, double v, kr_i64 iv, int is_int)
{
    if (is_int)
        v = (double)iv;
    if (v > d->clamp)
        v = d->clamp;
    if (v < -d->clamp)
        v = -d->clamp;
    switch (d->dtype) {
    case KR_GEN_F64:
        return KR_GEN_D2U(v);
    case KR_GEN_F32:
        return KR_GEN_F2U((float)v);
    case KR_GEN_F16:
        return kr_gen_to_small((float)v, 10, 15, 0x7bffu, 16);
    case KR_GEN_BF16:
        return kr_gen_to_bf16((float)v);
    case KR_GEN_FP8_E4M3:
        return kr_gen_to_small((float)v, 3, 7, 0x7eu, 8);
    case KR_GEN_FP8_E5M2:
        return kr_gen_to_small((float)v, 2, 15, 0x7bu, 8);
    case KR_GEN_I64:
    case KR_GEN_I32:
        return (kr_u64)(is_int ? iv : (kr_i64)v) & (d->dtype == KR_GEN_I32 ? 0xffffffffull : ~0ull);
    default: /* one-byte integers and bool: integral and within range */
        return (kr_u64)(is_int ? iv : (kr_i64)v) & 0xffu;
    }
}

KR_GEN_FN void kr_gen_put(kr_u8 *dst, kr_u64 bits, int size)
{
    if (size == 8)
        KR_GEN_STORE64(dst, bits);
    else if (size == 4)
        KR_GEN_STORE32(dst, bits);
    else if (size == 2)
        KR_GEN_STORE16(dst, bits);
    else
        dst[0] = (kr_u8)bits;
}

/* Computes element `index` of a tensor and stores it at out + index*size:
 * the definition every generator path agrees with. */
KR_GEN_FN void kr_gen_element(const kr_gen_dist *d, kr_u64 seed, kr_u32 tensor, kr_u64 index,
                              kr_u8 *out)
{
    int per = kr_gen_per_call(d), size = kr_gen_dtype_size(d->dtype);
    kr_u32 w[4];
    kr_gen_words(seed, tensor, index / (kr_u64)per, w);
    kr_gen_put(out + index * (kr_u64)size, kr_gen_bits(d, w, (int)(index % (kr_u64)per), per, seed, tensor), size);
}

/* Elements [group*per, group*per + per) clipped to n: one Philox call. A
 * whole group is packed in registers and written with wide stores (the
 * destination is aligned to the group's size on the GPU). */
KR_GEN_FN void kr_gen_group(const kr_gen_dist *d, kr_u64 seed, kr_u32 tensor, kr_u64 group,
                            kr_u64 n, kr_u8 *out)
{
    int per = kr_gen_per_call(d), size = kr_gen_dtype_size(d->dtype);
    kr_u32 w[4];
    kr_gen_words(seed, tensor, group, w);
    kr_u64 first = group * (kr_u64)per;
    kr_u8 *dst = out + first * (kr_u64)size;
    if (first + (kr_u64)per <= n && per >= 2) {
        kr_u64 b0, b1, b2 = 0, b3 = 0;
        if (d->kind == KR_GEN_NORMAL) { /* each pair's logarithm and cosine once */
            double z[2];
            kr_gen_normal_pair(d, w, w[0], w[1], z);
            b0 = kr_gen_encode(d, z[0], 0, 0);
            b1 = kr_gen_encode(d, z[1], 0, 0);
            if (per == 4) {
                kr_gen_normal_pair(d, w, w[2], w[3], z);
                b2 = kr_gen_encode(d, z[0], 0, 0);
                b3 = kr_gen_encode(d, z[1], 0, 0);
            }
        } else if (d->kind == KR_GEN_MIX && d->base_kind == KR_GEN_NORMAL) {
            /* per == 2: one pair, then each lane's outlier draw (as kr_gen_bits) */
            double z[2];
            kr_gen_normal_pair(d, w, w[0], w[2], z);
            b0 = kr_gen_encode(d, kr_gen_outlier(d, z[0], kr_gen_u24(w[1])), 0, 0);
            b1 = kr_gen_encode(d, kr_gen_outlier(d, z[1], kr_gen_u24(w[3])), 0, 0);
        } else {
            b0 = kr_gen_bits(d, w, 0, per, seed, tensor);
            b1 = kr_gen_bits(d, w, 1, per, seed, tensor);
            if (per == 4) {
                b2 = kr_gen_bits(d, w, 2, per, seed, tensor);
                b3 = kr_gen_bits(d, w, 3, per, seed, tensor);
            }
        }
        int bits = 8 * size, bytes = per * size;
        if (bytes <= 8) /* packed little-endian into one word */
            kr_gen_put(dst, b0 | b1 << bits | (per == 4 ? b2 << (2 * bits) | b3 << (3 * bits) : 0), bytes);
        else if (size == 4) /* four f32/i32: 16 bytes */
            KR_GEN_STORE128(dst, b0 | b1 << 32, b2 | b3 << 32);
        else { /* 8-byte elements */
            KR_GEN_STORE128(dst, b0, b1);
            if (per == 4)
                KR_GEN_STORE128(dst + 16, b2, b3);
        }
        return;
    }
    for (int lane = 0; lane < per; lane++) {
        kr_u64 i = first + (kr_u64)lane;
        if (i < n)
            kr_gen_put(out + i * (kr_u64)size, kr_gen_bits(d, w, lane, per, seed, tensor), size);
    }
}

/* The (kind, mix base, dtype) triples the GPU has a generator kernel of its
 * own for, named kr_generate_<KIND>_<BASE>_<DTYPE>; everything else takes
 * the generic kr_generate. The host picks by this list (builtin_launch.c). */
#define KR_GEN_SPECIALISED(X)                                                                 \
    X(UNIFORM, NONE, F32) X(UNIFORM, NONE, F16) X(UNIFORM, NONE, BF16) X(UNIFORM, NONE, F64)  \
    X(NORMAL, NONE, F32) X(NORMAL, NONE, F16) X(NORMAL, NONE, BF16) X(NORMAL, NONE, F64)      \
    X(MIX, UNIFORM, F32) X(MIX, UNIFORM, F16) X(MIX, UNIFORM, BF16)                           \
    X(MIX, NORMAL, F32) X(MIX, NORMAL, F16) X(MIX, NORMAL, BF16)                              \
    X(INT, NONE, I32) X(INT, NONE, I64) X(BERNOULLI, NONE, BOOL)

#ifdef __CUDACC__
/* One thread per group of elements in a grid-stride loop: one Philox call
 * feeds up to four neighbouring stores. In a specialised kernel the kind,
 * the mix base and the dtype are compile-time constants: the compiler drops
 * every other distribution's code and the registers it held (the generic
 * form ran ~400 instructions an element of an f32 mix on 64 registers a
 * thread, half the occupancy; the f32 mix kernel is 152 instructions on
 * 16). Same code, so the same bits as the host's. */
template <kr_u32 KIND, kr_u32 BASE, kr_u32 DTYPE>
__device__ __forceinline__ void kr_gen_loop(kr_u8 *out, kr_u64 n, kr_gen_dist d, kr_u64 seed,
                                            kr_u32 tensor)
{
    if (KIND) { /* 0: the generic form, every field read at run time */
        d.kind = KIND;
        d.base_kind = BASE;
        d.dtype = DTYPE;
    }
    kr_u64 per = (kr_u64)kr_gen_per_call(&d), groups = (n + per - 1) / per;
    kr_u64 stride = (kr_u64)gridDim.x * blockDim.x;
    for (kr_u64 g = (kr_u64)blockIdx.x * blockDim.x + threadIdx.x; g < groups; g += stride)
        kr_gen_group(&d, seed, tensor, g, n, out);
}

extern "C" __global__ void __launch_bounds__(256) kr_generate(kr_u8 *out, kr_u64 n, kr_gen_dist d,
                                                              kr_u64 seed, kr_u32 tensor)
{
    kr_gen_loop<0, 0, 0>(out, n, d, seed, tensor);
}

#define KR_GEN_KERNEL(K, B, D)                                                                 \
    extern "C" __global__ void __launch_bounds__(256) kr_generate_##K##_##B##_##D(             \
        kr_u8 *out, kr_u64 n, kr_gen_dist d, kr_u64 seed, kr_u32 tensor)                       \
    {                                                                                          \
        kr_gen_loop<KR_GEN_##K, KR_GEN_##B, KR_GEN_##D>(out, n, d, seed, tensor);              \
    }
KR_GEN_SPECIALISED(KR_GEN_KERNEL)
#undef KR_GEN_KERNEL
#endif

#endif
