/* gpu: the check kernels (kr_compare, kr_hash, kr_bitdiff) give what the
 * host's rules give, for every dtype, on both of their paths: 16-byte
 * vectors where the buffers are aligned, element by element where not (the
 * same bytes one element past an aligned address, in one buffer or both)
 * and in the tail; sizes below one vector, and above one pass of the
 * grid (16 blocks of 256 threads per SM: 540672 threads on 132 SMs). */
#include "gpu_test.h"

#include "common/dtype.h"
#include "run/dbuf.h"
#include "run/engine.h"
#include "verify/verify_impl.h"

#include <math.h>

static kr_context *g_ctx;

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static uint64_t next(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

/* d (a fresh allocation: 256-byte aligned) and d + offset hold bytes. */
static CUdeviceptr upload(CUdeviceptr d, size_t offset, const void *bytes, size_t len)
{
    assert_int_equal(kr__cuda()->cuMemcpyHtoD(d + offset, bytes, len), CUDA_SUCCESS);
    return d + offset;
}

typedef struct {
    unsigned long long bad, unwritten, nanbad, first, max_abs_bits;
    double max_rel, sq_err, sq_ref;
} host_stats;

/* kr_compare's rules (run/kr_device.cuh) on the host, element by element. */
static host_stats host_compare(int dtype, const unsigned char *got, const unsigned char *want,
                               uint64_t n, double rtol, double atol, uint32_t poison)
{
    host_stats h = {0, 0, 0, ~0ull, 0, 0, 0, 0};
    double max_abs = 0;
    for (uint64_t i = 0; i < n; i++) {
        uint32_t gb = kr__element_bits(dtype, got, i), wb = kr__element_bits(dtype, want, i);
        double g = kr__dtype_load(dtype, got, i), w = kr__dtype_load(dtype, want, i);
        int ok = kr__element_ok(g, w, gb, poison, rtol, atol);
        h.unwritten += gb == poison && wb != poison;
        if (isnan(g) || isnan(w))
            h.nanbad += !ok;
        else if (!isinf(g) && !isinf(w)) {
            double err = fabs(g - w);
            max_abs = fmax(max_abs, err);
            if (w != 0)
                h.max_rel = fmax(h.max_rel, err / fabs(w));
            h.sq_err += err * err;
            h.sq_ref += w * w;
        }
        if (!ok) {
            h.bad++;
            if (i < h.first)
                h.first = i;
        }
    }
    memcpy(&h.max_abs_bits, &max_abs, 8);
    return h;
}

static kr__cmp_stats device_compare(CUdeviceptr got, CUdeviceptr want, uint64_t n, int dtype,
                                    double rtol, double atol, uint32_t poison, CUdeviceptr stats)
{
    kr__cmp_stats st;
    memset(&st, 0, sizeof st);
    st.first_bad = ~0ull;
    assert_int_equal(kr__cuda()->cuMemcpyHtoD(stats, &st, sizeof st), CUDA_SUCCESS);
    assert_int_equal(kr__k_compare(g_ctx, got, want, n, dtype, rtol, atol, poison, stats), KR_OK);
    assert_int_equal(kr__engine_wait(g_ctx, 30, "compare"), KR_OK);
    assert_int_equal(kr__cuda()->cuMemcpyDtoH(&st, stats, sizeof st), CUDA_SUCCESS);
    return st;
}

static int near(double a, double b, double rel)
{
    return a == b || fabs(a - b) <= rel * fmax(fabs(a), fabs(b));
}

static void compare_matches_the_host_rule(void **state)
{
    (void)state;
    static const int dtypes[] = {KR_DTYPE_F32, KR_DTYPE_F16, KR_DTYPE_BF16, KR_DTYPE_F64,
                                 KR_DTYPE_I8, KR_DTYPE_U8, KR_DTYPE_I32, KR_DTYPE_I64,
                                 KR_DTYPE_BOOL, KR_DTYPE_FP8_E4M3, KR_DTYPE_FP8_E5M2};
    /* 2^22 + 5: two passes of the grid's vectors for 4-byte types, a tail
     * of 5 (or 1 vector + 5); 3: below one vector */
    static const uint64_t sizes[] = {(1u << 22) + 5, 3};
    const uint64_t most = sizes[0];
    unsigned char *got = malloc(most * 8), *want = malloc(most * 8);
    CUdeviceptr dg, dw, stats;
    assert_int_equal(kr__cuda()->cuMemAlloc(&dg, most * 8 + 64), CUDA_SUCCESS);
    assert_int_equal(kr__cuda()->cuMemAlloc(&dw, most * 8 + 64), CUDA_SUCCESS);
    assert_int_equal(kr__cuda()->cuMemAlloc(&stats, sizeof(kr__cmp_stats)), CUDA_SUCCESS);
    for (size_t k = 0; k < 2 * sizeof dtypes / sizeof dtypes[0]; k++) {
        int dtype = dtypes[k / 2], size = kr__dtype_size(dtype);
        uint64_t n = sizes[k % 2];
        uint32_t poison = kr__poison_bits(dtype, 0);
        for (uint64_t i = 0; i < n; i++) {
            unsigned char *w = want + i * size, *g = got + i * size;
            uint64_t r = next(), pick = next() % 10;
            if (kr__dtype_is_float(dtype) && size >= 4 && pick < 7) { /* mostly ordinary values */
                double v = ((double)(r >> 11) / 9007199254740992.0 - 0.5) * 8;
                if (size == 4) {
                    float f = (float)v;
                    memcpy(w, &f, 4);
                } else
                    memcpy(w, &v, 8);
            } else
                memcpy(w, &r, (size_t)size); /* any bits: NaN, Inf, huge, poison-like */
            memcpy(g, w, (size_t)size);
            if (pick == 0) { /* never written: the poison (the high word of 8-byte types) */
                if (size == 8)
                    memcpy(g + 4, &poison, 4);
                else
                    memcpy(g, &poison, (size_t)size);
            } else if (pick == 1) {
                g[0] ^= 1; /* off by one unit in the last place (or one for integers) */
            } else if (pick == 2) {
                uint64_t junk = next();
                memcpy(g, &junk, (size_t)size);
            }
        }
        double rtol = 1e-3, atol = 1e-5;
        host_stats h = host_compare(dtype, got, want, n, rtol, atol, poison);
        if (n > 1000)
            assert_true(h.bad > 0 && h.unwritten > 0);
        for (int path = 0; path < 3; path++) {
            /* 1: both one element past a 16-byte boundary (size < 16): no
             * vectors; 2: only the outputs so */
            size_t off = path ? (size_t)size : 0;
            CUdeviceptr g = upload(dg, off, got, n * size),
                        w = upload(dw, path == 2 ? 0 : off, want, n * size);
            kr__cmp_stats st = device_compare(g, w, n, dtype, rtol, atol, poison, stats);
            double max_rel;
            memcpy(&max_rel, &st.max_rel_bits, 8);
            if (st.mismatches != h.bad || st.unwritten != h.unwritten || st.nan_mismatch != h.nanbad ||
                st.first_bad != h.first || st.max_abs_bits != h.max_abs_bits ||
                !near(max_rel, h.max_rel, 1e-12) || !near(st.sum_sq_err, h.sq_err, 1e-9) ||
                !near(st.sum_sq_ref, h.sq_ref, 1e-9))
                fail_msg("%s, n %llu, %s: device mismatches %llu unwritten %llu nan %llu first %llu "
                         "max_rel %.17g sq_err %.17g sq_ref %.17g; host %llu %llu %llu %llu %.17g "
                         "%.17g %.17g", kr__dtype_name(dtype), (unsigned long long)n,
                         path == 0 ? "vectors" : path == 1 ? "element by element" : "one unaligned",
                         st.mismatches, st.unwritten, st.nan_mismatch, st.first_bad, max_rel,
                         st.sum_sq_err, st.sum_sq_ref, h.bad, h.unwritten, h.nanbad, h.first,
                         h.max_rel, h.sq_err, h.sq_ref);
        }
    }
    kr__cuda()->cuMemFree(dg);
    kr__cuda()->cuMemFree(dw);
    kr__cuda()->cuMemFree(stats);
    free(got);
    free(want);
}

/* kr_hash's definition (run/kr_device.cuh) on the host. */
static uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static uint64_t host_hash(const unsigned char *p, uint64_t bytes, uint64_t key)
{
    uint64_t h = 0, words = bytes / 4;
    for (uint64_t i = 0; i < words; i++) {
        uint32_t w;
        memcpy(&w, p + 4 * i, 4);
        h += mix64(key ^ (i * 0x9E3779B97F4A7C15ull) ^ ((uint64_t)w << 17));
    }
    for (uint64_t t = 0; t < bytes % 4; t++)
        h += mix64(key ^ ((words * 4 + t) * 0xD6E8FEB86659FD93ull) ^ p[words * 4 + t]);
    return h;
}

static void hash_matches_the_host(void **state)
{
    (void)state;
    const uint64_t lens[] = {3, 16, 1000, (1u << 20) + 7, (1u << 24) + 7}; /* the last: 2 passes */
    const uint64_t most = lens[sizeof lens / sizeof lens[0] - 1];
    unsigned char *buf = malloc(most);
    for (uint64_t i = 0; i < most; i++)
        buf[i] = (unsigned char)next();
    CUdeviceptr d, out;
    assert_int_equal(kr__cuda()->cuMemAlloc(&d, most + 64), CUDA_SUCCESS);
    assert_int_equal(kr__cuda()->cuMemAlloc(&out, 8), CUDA_SUCCESS);
    for (size_t k = 0; k < sizeof lens / sizeof lens[0]; k++)
        for (int path = 0; path < 2; path++) {
            uint64_t key = next(), h = 0, want = host_hash(buf, lens[k], key);
            CUdeviceptr p = upload(d, path ? 4 : 0, buf, lens[k]);
            assert_int_equal(kr__cuda()->cuMemcpyHtoD(out, &h, 8), CUDA_SUCCESS);
            assert_int_equal(kr__k_hash(g_ctx, p, lens[k], key, out), KR_OK);
            assert_int_equal(kr__engine_wait(g_ctx, 30, "hash"), KR_OK);
            assert_int_equal(kr__cuda()->cuMemcpyDtoH(&h, out, 8), CUDA_SUCCESS);
            if (h != want)
                fail_msg("%llu bytes, %s: device hash %016llx, host %016llx",
                         (unsigned long long)lens[k], path ? "words" : "vectors",
                         (unsigned long long)h, (unsigned long long)want);
        }
    kr__cuda()->cuMemFree(d);
    kr__cuda()->cuMemFree(out);
    free(buf);
}

static void bitdiff_counts_elements(void **state)
{
    (void)state;
    const uint64_t n = (1u << 22) + 3; /* two passes of the grid's vectors for 1-byte elements */
    unsigned char *a = malloc(n * 8), *b = malloc(n * 8);
    CUdeviceptr da, db, count;
    assert_int_equal(kr__cuda()->cuMemAlloc(&da, n * 8 + 64), CUDA_SUCCESS);
    assert_int_equal(kr__cuda()->cuMemAlloc(&db, n * 8 + 64), CUDA_SUCCESS);
    assert_int_equal(kr__cuda()->cuMemAlloc(&count, 8), CUDA_SUCCESS);
    for (uint32_t elem = 1; elem <= 8; elem *= 2) {
        unsigned long long want = 0;
        for (uint64_t i = 0; i < n * elem; i++)
            a[i] = b[i] = (unsigned char)next();
        for (uint64_t i = 0; i < n; i++)
            if (next() % 7 == 0) { /* one byte of the element, any of them */
                b[i * elem + next() % elem] ^= (unsigned char)(1u << (next() % 8));
                want++;
            }
        for (int path = 0; path < 2; path++) {
            size_t off = path ? elem : 0;
            CUdeviceptr x = upload(da, off, a, n * elem), y = upload(db, off, b, n * elem);
            unsigned long long c = 0;
            assert_int_equal(kr__cuda()->cuMemcpyHtoD(count, &c, 8), CUDA_SUCCESS);
            assert_int_equal(kr__k_bitdiff(g_ctx, x, y, n, elem, count), KR_OK);
            assert_int_equal(kr__engine_wait(g_ctx, 30, "bitdiff"), KR_OK);
            assert_int_equal(kr__cuda()->cuMemcpyDtoH(&c, count, 8), CUDA_SUCCESS);
            if (c != want)
                fail_msg("%u-byte elements, %s: device %llu differ, host %llu", elem,
                         path ? "element by element" : "vectors", c, want);
        }
    }
    kr__cuda()->cuMemFree(da);
    kr__cuda()->cuMemFree(db);
    kr__cuda()->cuMemFree(count);
    free(a);
    free(b);
}

int main(void)
{
    g_ctx = gpu_context_or_skip();
    kr__engine *e;
    if (kr__engine_get(g_ctx, &e) != KR_OK) { /* the builtin kernels and the stream */
        fprintf(stderr, "the engine did not start\n");
        return 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(compare_matches_the_host_rule),
        cmocka_unit_test(hash_matches_the_host),
        cmocka_unit_test(bitdiff_counts_elements),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    kr_context_free(g_ctx);
    return rc;
}
