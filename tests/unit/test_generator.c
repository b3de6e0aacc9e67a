/* The input generator on the CPU: determinism, distributions, rounding into
 * every dtype, and the host entry point. (The gpu suite checks that the GPU
 * produces the same bits.) */
#include "helpers.h"

#include "common/dtype.h"
#include "run/engine.h"
#include "common/kr_gen.h"
#include "common/kr_chacha.h"

#include <math.h>

static kr_gen_dist dist(unsigned kind, unsigned dtype, double a, double b)
{
    kr_gen_dist d;
    memset(&d, 0, sizeof d);
    d.kind = kind;
    d.dtype = dtype;
    d.a = a;
    d.b = b;
    d.clamp = kr__dtype_is_float((int)dtype) ? kr__dtype_max((int)dtype) : 1.8e19;
    return d;
}

static double *sample(const kr_gen_dist *d, uint64_t seed, size_t n)
{
    unsigned char *raw = malloc(n * 8);
    double *out = malloc(n * sizeof *out);
    for (size_t i = 0; i < n; i++) {
        kr_gen_element(d, seed, 3, i, raw);
        out[i] = kr__dtype_load((int)d->dtype, raw, i);
    }
    free(raw);
    return out;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void moments(const double *x, size_t n, double *mean, double *sd)
{
    double s = 0, s2 = 0;
    for (size_t i = 0; i < n; i++)
        s += x[i];
    *mean = s / (double)n;
    for (size_t i = 0; i < n; i++)
        s2 += (x[i] - *mean) * (x[i] - *mean);
    *sd = sqrt(s2 / (double)(n - 1));
}

static void deterministic(void **state)
{
    (void)state;
    kr_gen_dist d = dist(KR_GEN_NORMAL, KR_GEN_F32, 0, 1);
    unsigned char a[4096], b[4096], c[4096], e[4096];
    for (uint64_t i = 0; i < 1024; i++) {
        kr_gen_element(&d, 42, 0, i, a);
        kr_gen_element(&d, 42, 0, i, b);
        kr_gen_element(&d, 43, 0, i, c);
        kr_gen_element(&d, 42, 1, i, e);
    }
    assert_memory_equal(a, b, sizeof a);
    assert_memory_not_equal(a, c, sizeof a);
    assert_memory_not_equal(a, e, sizeof a);
    /* element i does not depend on which others were generated */
    unsigned char one[4096] = {0};
    kr_gen_element(&d, 42, 0, 777, one);
    assert_memory_equal(one + 777 * 4, a + 777 * 4, 4);
}

static void uniform_and_normal(void **state)
{
    (void)state;
    const size_t n = 200000;
    kr_gen_dist u = dist(KR_GEN_UNIFORM, KR_GEN_F64, -1, 3);
    double *x = sample(&u, 7, n), mean, sd, lo = 1e9, hi = -1e9;
    for (size_t i = 0; i < n; i++) {
        lo = fmin(lo, x[i]);
        hi = fmax(hi, x[i]);
    }
    moments(x, n, &mean, &sd);
    assert_true(lo >= -1 && hi < 3 && lo < -0.99 && hi > 2.99);
    assert_true(fabs(mean - 1) < 0.01);
    assert_true(fabs(sd - 4 / sqrt(12)) < 0.01);
    free(x);

    kr_gen_dist g = dist(KR_GEN_NORMAL, KR_GEN_F32, 5, 2);
    x = sample(&g, 8, n);
    moments(x, n, &mean, &sd);
    size_t within = 0;
    for (size_t i = 0; i < n; i++)
        within += fabs(x[i] - 5) < 2;
    assert_true(fabs(mean - 5) < 0.02);
    assert_true(fabs(sd - 2) < 0.02);
    assert_true(fabs((double)within / (double)n - 0.6827) < 0.005);
    free(x);
}

static void integers_bernoulli_heavy_tails(void **state)
{
    (void)state;
    const size_t n = 100000;
    kr_gen_dist d = dist(KR_GEN_INT, KR_GEN_I32, 0, 0);
    d.ilo = -5;
    d.ihi = 5;
    double *x = sample(&d, 1, n);
    size_t seen[11] = {0};
    for (size_t i = 0; i < n; i++) {
        assert_true(x[i] >= -5 && x[i] <= 5 && x[i] == floor(x[i]));
        seen[(int)x[i] + 5]++;
    }
    for (int v = 0; v < 11; v++)
        assert_true(seen[v] > n / 11 * 9 / 10);
    free(x);

    kr_gen_dist b = dist(KR_GEN_BERNOULLI, KR_GEN_BOOL, 0, 0);
    b.p = 0.3;
    x = sample(&b, 2, n);
    double mean, sd;
    moments(x, n, &mean, &sd);
    assert_true(fabs(mean - 0.3) < 0.01);
    free(x);

    kr_gen_dist p = dist(KR_GEN_PARETO, KR_GEN_F32, 1.5, 1);
    x = sample(&p, 3, n);
    double big = 0;
    size_t negative = 0;
    for (size_t i = 0; i < n; i++) {
        big = fmax(big, fabs(x[i]));
        negative += x[i] < 0;
    }
    assert_true(big > 1000); /* heavy tail: u^(-1/1.5) reaches far */
    assert_true(fabs((double)negative / (double)n - 0.5) < 0.01);
    free(x);

    kr_gen_dist m = dist(KR_GEN_MIX, KR_GEN_F32, 0, 1);
    m.base_kind = KR_GEN_NORMAL;
    m.p = 0.01;
    m.outlier_scale = 1e4;
    x = sample(&m, 4, n);
    size_t outliers = 0;
    for (size_t i = 0; i < n; i++)
        outliers += fabs(x[i]) > 100;
    /* 1 % scaled by 1e4; |z| > 0.01 for ~99 % of them */
    assert_true(outliers > n / 100 * 85 / 100 && outliers < n / 100 * 115 / 100);
    free(x);

    /* the outlier draw shares a Philox call with the base value (a word the
     * base does not use; f64 normal: a second call): the fraction holds for
     * every base, and it does not depend on the base value (outliers are as
     * frequent among small base values as among large ones) */
    static const unsigned bases[] = {KR_GEN_UNIFORM, KR_GEN_NORMAL, KR_GEN_PARETO};
    for (size_t k = 0; k < 3; k++)
        for (int f64 = 0; f64 < 2; f64++) {
            kr_gen_dist b = dist(KR_GEN_MIX, f64 ? KR_GEN_F64 : KR_GEN_F32,
                                 bases[k] == KR_GEN_PARETO ? 1.5 : bases[k] == KR_GEN_UNIFORM ? 1 : 0,
                                 bases[k] == KR_GEN_UNIFORM ? 2 : 1);
            b.base_kind = bases[k];
            b.p = 0.05;
            b.outlier_scale = 1e6;
            kr_gen_dist plain = b;
            plain.p = 0; /* the same base values, no outliers */
            double *y = sample(&b, 9, n), *base = sample(&plain, 9, n), median;
            double *sorted = malloc(n * sizeof *sorted);
            for (size_t i = 0; i < n; i++)
                sorted[i] = fabs(base[i]);
            qsort(sorted, n, sizeof *sorted, cmp_double);
            median = sorted[n / 2];
            size_t out_small = 0, out_large = 0, small = 0;
            for (size_t i = 0; i < n; i++) {
                int out = y[i] != base[i];
                small += fabs(base[i]) < median;
                out_small += out && fabs(base[i]) < median;
                out_large += out && fabs(base[i]) >= median;
            }
            double frac = (double)(out_small + out_large) / (double)n;
            double fs = (double)out_small / (double)small, fl = (double)out_large / (double)(n - small);
            assert_true(fabs(frac - 0.05) < 0.003);
            assert_true(fabs(fs - fl) < 0.006);
            free(y);
            free(base);
            free(sorted);
        }
}

static void clamped_to_dtype(void **state)
{
    (void)state;
    kr_gen_dist p = dist(KR_GEN_PARETO, KR_GEN_F16, 0.2, 1000);
    double *x = sample(&p, 5, 20000);
    for (size_t i = 0; i < 20000; i++)
        assert_true(isfinite(x[i]) && fabs(x[i]) <= 65504);
    free(x);
}

/* Every finite non-negative value of a small format, for nearest search. */
typedef struct {
    double value;
    uint32_t code;
} entry;

static int by_value(const void *a, const void *b)
{
    double x = ((const entry *)a)->value, y = ((const entry *)b)->value;
    return (x > y) - (x < y);
}

/* Independent reference: the nearest representable value, ties to the even
 * code, found by searching the whole table. */
static uint32_t nearest_code(const entry *t, size_t n, double v)
{
    size_t lo = 0, hi = n - 1;
    if (v >= t[hi].value)
        return t[hi].code; /* saturate */
    while (hi - lo > 1) {
        size_t mid = (lo + hi) / 2;
        if (t[mid].value <= v)
            lo = mid;
        else
            hi = mid;
    }
    double dl = v - t[lo].value, dh = t[hi].value - v;
    if (dl < dh)
        return t[lo].code;
    if (dh < dl)
        return t[hi].code;
    return (t[lo].code & 1) ? t[hi].code : t[lo].code;
}

static void check_format(int dtype, int bits, int mbits, int bias, uint32_t max_code)
{
    size_t count = (size_t)1 << (bits - 1), n = 0;
    entry *t = malloc(count * sizeof *t);
    for (uint32_t c = 0; c < count && c <= max_code; c++) {
        unsigned char raw[2] = {(unsigned char)c, (unsigned char)(c >> 8)};
        double v = kr__dtype_load(dtype, raw, 0);
        if (isfinite(v)) {
            t[n].value = v;
            t[n].code = c;
            n++;
        }
    }
    qsort(t, n, sizeof *t, by_value);
    double max = t[n - 1].value;
    srand(11);
    for (int i = 0; i < 200000; i++) {
        /* magnitudes spread over the whole range, subnormals included */
        double mag = ldexp((double)rand() / RAND_MAX, -(rand() % (bias + mbits + 4)) + rand() % (bias + 1));
        float f = (float)fmin(mag, max);
        if (rand() & 1)
            f = -f;
        uint32_t got = dtype == KR_DTYPE_BF16 ? kr_gen_to_bf16(f)
                                              : kr_gen_to_small(f, mbits, bias, max_code, bits);
        uint32_t want = nearest_code(t, n, fabs((double)f)) | (f < 0 ? 1u << (bits - 1) : 0);
        if (f == 0)
            want = got; /* signed zero either way */
        if (got != want)
            fail_msg("%s: %.9g -> 0x%x, nearest even is 0x%x", kr__dtype_name(dtype), (double)f,
                     got, want);
    }
    free(t);
}

static void rounding_into_small_formats(void **state)
{
    (void)state;
    check_format(KR_DTYPE_F16, 16, 10, 15, 0x7bff);
    check_format(KR_DTYPE_BF16, 16, 7, 127, 0x7f7f);
    check_format(KR_DTYPE_FP8_E4M3, 8, 3, 7, 0x7e);
    check_format(KR_DTYPE_FP8_E5M2, 8, 2, 15, 0x7b);
}

static void polynomial_math(void **state)
{
    (void)state;
    for (double x = 1e-300; x < 1e300; x *= 1.37)
        assert_true(fabs(kr_gen_log(x) - log(x)) <= 1e-13 * fmax(1, fabs(log(x))));
    for (double x = -700; x < 700; x += 0.731)
        assert_true(fabs(kr_gen_exp(x) - exp(x)) <= 1e-13 * exp(x));
    for (double u = 0; u < 1; u += 1.0 / 4099)
        assert_true(fabs(kr_gen_cos2pi(u) - cos(2 * M_PI * u)) < 1e-13);
    /* the float forms (normal values of every dtype but f64): a few float ulps */
    for (float x = 5.96046448e-08f; x <= 1.0f; x *= 1.0071f)
        assert_true(fabs(kr_gen_logf(x) - log(x)) <= 4e-7 * fmax(1, fabs(log(x))));
    assert_true(kr_gen_logf(1.0f) == 0.0f);
    for (int k = 0; k < (1 << 24); k += 4099) {
        float u = (float)k * 5.96046448e-08f, sn;
        float cs = kr_gen_cossin2pif(u, &sn);
        assert_true(fabs(cs - cos(2 * M_PI * u)) < 4e-7);
        assert_true(fabs(sn - sin(2 * M_PI * u)) < 4e-7);
    }
}

/* A normal pair is computed once per group (kr_gen_group) and per lane
 * (kr_gen_element): both give the same bits, in float dtypes and f64. */
/* The group path (several elements from one Philox call, what the GPU
 * kernels run) writes what the element-by-element definition does, for
 * the distributions whose elements share work (normal pairs, a mix's
 * value and outlier words), partial last groups included. */
static void groups_agree_with_elements(void **state)
{
    (void)state;
    static const unsigned dtypes[] = {KR_GEN_F32, KR_GEN_F64, KR_GEN_BF16, KR_GEN_F16};
    static const unsigned kinds[][2] = {{KR_GEN_NORMAL, 0},
                                        {KR_GEN_UNIFORM, 0},
                                        {KR_GEN_MIX, KR_GEN_UNIFORM},
                                        {KR_GEN_MIX, KR_GEN_NORMAL},
                                        {KR_GEN_MIX, KR_GEN_PARETO}};
    static const uint64_t sizes[] = {1, 2, 3, 5, 999, 1000};
    for (size_t k = 0; k < sizeof dtypes / sizeof dtypes[0]; k++)
        for (size_t j = 0; j < sizeof kinds / sizeof kinds[0]; j++)
            for (size_t z = 0; z < sizeof sizes / sizeof sizes[0]; z++) {
                kr_gen_dist d = dist(kinds[j][0], dtypes[k], kinds[j][1] == KR_GEN_PARETO ? 1.5 : 0.5, 3);
                d.base_kind = kinds[j][1];
                d.p = 0.2;
                d.outlier_scale = 100;
                uint64_t n = sizes[z], per = (uint64_t)kr_gen_per_call(&d);
                unsigned char by_group[1000 * 8], by_element[1000 * 8];
                for (uint64_t g = 0; g * per < n; g++)
                    kr_gen_group(&d, 11, 2, g, n, by_group);
                for (uint64_t i = 0; i < n; i++)
                    kr_gen_element(&d, 11, 2, i, by_element);
                if (memcmp(by_group, by_element, n * (size_t)kr_gen_dtype_size(dtypes[k])))
                    fail_msg("kind %u base %u dtype %u n %llu: the group path differs", kinds[j][0],
                             kinds[j][1], dtypes[k], (unsigned long long)n);
            }
}

static void never_constant(void **state)
{
    (void)state;
    static const int dtypes[] = {KR_DTYPE_F32, KR_DTYPE_F16, KR_DTYPE_BF16, KR_DTYPE_F64,
                                 KR_DTYPE_I8, KR_DTYPE_U8, KR_DTYPE_I32, KR_DTYPE_I64,
                                 KR_DTYPE_BOOL, KR_DTYPE_FP8_E4M3, KR_DTYPE_FP8_E5M2};
    kr_context *ctx = test_context(NULL);
    for (size_t k = 0; k < sizeof dtypes / sizeof dtypes[0]; k++) {
        char spec[600];
        snprintf(spec, sizeof spec,
                 "{\"name\": \"p\", \"dims\": [\"N\"], \"cases\": [{\"N\": 1000}],"
                 " \"tensors\": [{\"name\": \"x\", \"dtype\": \"%s\", \"shape\": [\"N\"], \"role\": \"in\"},"
                 " {\"name\": \"y\", \"dtype\": \"f32\", \"shape\": [\"N\"], \"role\": \"out\"}],"
                 " \"reference\": {\"golden\": true}}",
                 kr__dtype_name(dtypes[k]));
        kr_problem *p = NULL;
        assert_int_equal(kr_problem_parse(&p, ctx, spec, strlen(spec), "p.json", NULL), KR_OK);
        unsigned char buf[8000];
        assert_int_equal(kr_problem_generate_host(buf, sizeof buf, ctx, p, 0, 0,
                                                  kr_problem_case_seed(99, 0)), KR_OK);
        int distinct = 0;
        for (int i = 1; i < 1000; i++)
            distinct += kr__dtype_load(dtypes[k], buf, (uint64_t)i) !=
                        kr__dtype_load(dtypes[k], buf, (uint64_t)i - 1);
        if (distinct < (dtypes[k] == KR_DTYPE_BOOL ? 300 : 500))
            fail_msg("%s: only %d changes in 1000 values", kr__dtype_name(dtypes[k]), distinct);
        /* outputs are not generated; small buffers are refused */
        assert_int_equal(kr_problem_generate_host(buf, sizeof buf, ctx, p, 1, 0, 1), KR_EINVAL);
        assert_int_equal(kr_problem_generate_host(buf, 10, ctx, p, 0, 0, 1), KR_ETOOBIG);
        kr_problem_free(p);
    }
    assert_int_not_equal(kr_problem_case_seed(1, 0), kr_problem_case_seed(1, 1));
    assert_int_not_equal(kr_problem_case_seed(1, 0), kr_problem_case_seed(2, 0));
    kr_context_free(ctx);
}

/* The device side (generator, compare, hash, canaries, spin) compiles:
 * checked here so a broken kernel never waits for a GPU run. */
static void builtin_kernels_compile(void **state)
{
    (void)state;
    kr_context *ctx = test_context(NULL);
    kr_program *p = NULL;
    if (kr__builtins_compile(ctx, &p) != KR_OK)
        fail_msg("%s\n%s", kr_context_errmsg(ctx), kr_context_errdetail(ctx));
    const char *names[] = {"kr_generate", "kr_compare", "kr_hash", "kr_check_bytes", "kr_bitdiff",
                           "kr_spin_until", "kr_spin_cycles", "kr_fma_peak", "kr_mma_peak",
                           "kr_scrub_shared"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        assert_int_not_equal(kr_program_find_kernel(p, names[i]), SIZE_MAX);
    /* every specialised generator the engine looks up is in the module */
    static const unsigned kinds[] = {KR_GEN_UNIFORM, KR_GEN_NORMAL, KR_GEN_INT, KR_GEN_PARETO,
                                     KR_GEN_MIX, KR_GEN_BERNOULLI};
    int found = 0;
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++)
        for (unsigned base = KR_GEN_NONE; base <= KR_GEN_PARETO; base++)
            for (unsigned dt = KR_GEN_F32; dt <= KR_GEN_FP8_E5M2; dt++) {
                kr_gen_dist d = {.kind = kinds[k], .base_kind = base, .dtype = dt};
                const char *name = NULL;
                if (kr__gen_kernel_for(&d, &name) >= 0) {
                    assert_int_not_equal(kr_program_find_kernel(p, name), SIZE_MAX);
                    found++;
                }
            }
    assert_true(found > 0);
    kr_program_free(p);
    kr_context_free(ctx);
}

/* Which generator kernel a distribution gets: its own where the list names
 * its kind, dtype and (for a mix) base; the generic one otherwise. A mix is
 * never given another base's kernel, and other kinds ignore the base field. */
static void generator_kernel_choice(void **state)
{
    (void)state;
    const char *name = NULL;
    kr_gen_dist d = {.kind = KR_GEN_MIX, .base_kind = KR_GEN_UNIFORM, .dtype = KR_GEN_F32};
    assert_true(kr__gen_kernel_for(&d, &name) >= 0);
    assert_string_equal(name, "kr_generate_MIX_UNIFORM_F32");
    d.base_kind = KR_GEN_NORMAL;
    assert_true(kr__gen_kernel_for(&d, &name) >= 0);
    assert_string_equal(name, "kr_generate_MIX_NORMAL_F32");
    d.base_kind = KR_GEN_PARETO; /* no kernel of its own: the generic one */
    assert_int_equal(kr__gen_kernel_for(&d, &name), -1);
    assert_string_equal(name, "kr_generate");
    kr_gen_dist n = {.kind = KR_GEN_NORMAL, .base_kind = KR_GEN_PARETO, .dtype = KR_GEN_BF16};
    assert_true(kr__gen_kernel_for(&n, &name) >= 0);
    assert_string_equal(name, "kr_generate_NORMAL_NONE_BF16");
    kr_gen_dist f8 = {.kind = KR_GEN_NORMAL, .dtype = KR_GEN_FP8_E4M3};
    assert_int_equal(kr__gen_kernel_for(&f8, &name), -1);
    kr_gen_dist i8 = {.kind = KR_GEN_INT, .dtype = KR_GEN_I8};
    assert_int_equal(kr__gen_kernel_for(&i8, NULL), -1);
}

/* kr_chacha.h's block (the reference of the host keystream,
 * kr_keystream_xor) is ChaCha20: the RFC 8439 section 2.3.2 block, and a
 * second one checked with Python's cryptography package (key words
 * i * 0x11111111, counter 7, nonce 3, 5, 0). */
static void chacha20_block_matches_rfc8439(void **state)
{
    (void)state;
    kr_chacha_key key;
    for (int i = 0; i < 8; i++) /* bytes 00 01 .. 1f, little-endian words */
        key.w[i] = (kr_u32)(4 * i) | (kr_u32)(4 * i + 1) << 8 | (kr_u32)(4 * i + 2) << 16 |
                   (kr_u32)(4 * i + 3) << 24;
    const kr_u32 nonce[3] = {0x09000000u, 0x4a000000u, 0};
    const kr_u32 want[16] = {0xe4e7f110u, 0x15593bd1u, 0x1fdd0f50u, 0xc47120a3u,
                             0xc7f4d1c7u, 0x0368c033u, 0x9aaa2204u, 0x4e6cd4c3u,
                             0x466482d2u, 0x09aa9f07u, 0x05d7c214u, 0xa2028bd9u,
                             0xd19c12b5u, 0xb94e16deu, 0xe883d0cbu, 0x4e3c50a2u};
    kr_u32 got[16];
    kr_chacha20_block(&key, 1, nonce, got);
    assert_memory_equal(got, want, sizeof want);
    for (int i = 0; i < 8; i++)
        key.w[i] = (kr_u32)i * 0x11111111u;
    const kr_u32 nonce2[3] = {3, 5, 0};
    const kr_u32 want2[16] = {0xcde8500bu, 0x913a8f49u, 0x00268c8cu, 0xcf71d155u,
                              0x58359be3u, 0x8c2e596du, 0x4cc21d45u, 0x1e6351feu,
                              0xa38e6b14u, 0x0a2943f4u, 0x35bf3f30u, 0xcc93ad70u,
                              0x109eb93au, 0x9b639f99u, 0xef96303bu, 0xbf08d64bu};
    kr_chacha20_block(&key, 7, nonce2, got);
    assert_memory_equal(got, want2, sizeof want2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(deterministic),
        cmocka_unit_test(uniform_and_normal),
        cmocka_unit_test(integers_bernoulli_heavy_tails),
        cmocka_unit_test(clamped_to_dtype),
        cmocka_unit_test(rounding_into_small_formats),
        cmocka_unit_test(polynomial_math),
        cmocka_unit_test(groups_agree_with_elements),
        cmocka_unit_test(never_constant),
        cmocka_unit_test(builtin_kernels_compile),
        cmocka_unit_test(generator_kernel_choice),
        cmocka_unit_test(chacha20_block_matches_rfc8439),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
