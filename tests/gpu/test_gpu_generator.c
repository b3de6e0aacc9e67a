/* gpu: the GPU generator writes exactly the bits the host generator does,
 * for every dtype and distribution (and every base of a mix), through the
 * specialised kernels and the generic one alike. */
#include "gpu_test.h"

#include "common/dtype.h"
#include "run/engine.h"

static kr_context *g_ctx;

static void same_bits(void **state)
{
    (void)state;
    kr__engine *g;
    assert_int_equal(kr__engine_get(g_ctx, &g), KR_OK);
    static const unsigned dtypes[] = {KR_GEN_F32, KR_GEN_F16, KR_GEN_BF16, KR_GEN_F64,
                                      KR_GEN_I8, KR_GEN_U8, KR_GEN_I32, KR_GEN_I64,
                                      KR_GEN_BOOL, KR_GEN_FP8_E4M3, KR_GEN_FP8_E5M2};
    const uint64_t n = 1000003; /* odd, > one grid pass */
    unsigned char *host = malloc(n * 8), *dev = malloc(n * 8);
    CUdeviceptr d;
    assert_int_equal(kr__cuda()->cuMemAlloc(&d, n * 8), CUDA_SUCCESS);
    int checked = 0, special = 0;
    for (size_t k = 0; k < sizeof dtypes / sizeof dtypes[0]; k++) {
        int is_float = kr__dtype_is_float((int)dtypes[k]);
        for (unsigned kb = KR_GEN_UNIFORM * 8; kb <= KR_GEN_BERNOULLI * 8 + KR_GEN_PARETO; kb++) {
            /* kind, and for a mix its base (uniform, normal, pareto) */
            unsigned kind = kb / 8, base = kb % 8;
            if (base > KR_GEN_PARETO || base == KR_GEN_INT || (kind == KR_GEN_MIX) != (base != 0))
                continue;
            if (!is_float && kind != KR_GEN_INT && kind != KR_GEN_BERNOULLI)
                continue;
            kr_gen_dist dist;
            memset(&dist, 0, sizeof dist);
            dist.kind = kind;
            dist.dtype = dtypes[k];
            dist.a = kind == KR_GEN_PARETO ? 1.2 : -2;
            dist.b = kind == KR_GEN_PARETO ? 3 : 5;
            dist.p = kind == KR_GEN_MIX ? 0.01 : 0.3;
            dist.outlier_scale = 300;
            /* a kind other than a mix ignores the base: a stray one changes nothing */
            dist.base_kind = kind == KR_GEN_MIX ? base : KR_GEN_PARETO;
            dist.ilo = dtypes[k] == KR_GEN_U8 || dtypes[k] == KR_GEN_BOOL ? 0 : -100;
            dist.ihi = dtypes[k] == KR_GEN_BOOL ? 1 : 100;
            if (dtypes[k] == KR_GEN_I64) { /* a range past 2^32: one element per Philox call */
                dist.ilo = -(1ll << 40);
                dist.ihi = 1ll << 40;
            }
            dist.clamp = is_float ? kr__dtype_max((int)dtypes[k]) : 1.8e19;
            int size = kr__dtype_size((int)dtypes[k]);
            for (uint64_t i = 0; i < n; i++)
                kr_gen_element(&dist, 0x1234567887654321ull, 5, i, host);
            assert_int_equal(kr__k_generate(g_ctx, d, n, &dist, 0x1234567887654321ull, 5), KR_OK);
            assert_int_equal(kr__engine_wait(g_ctx, 30, "generate"), KR_OK);
            assert_int_equal(kr__cuda()->cuMemcpyDtoH(dev, d, n * (uint64_t)size), CUDA_SUCCESS);
            if (memcmp(host, dev, n * (uint64_t)size) != 0) {
                uint64_t i = 0;
                while (!memcmp(host + i * size, dev + i * size, (size_t)size))
                    i++;
                fail_msg("%s dist %u base %u: element %llu differs (host %g, gpu %g)",
                         kr__dtype_name((int)dtypes[k]), kind, base, (unsigned long long)i,
                         kr__dtype_load((int)dtypes[k], host, i), kr__dtype_load((int)dtypes[k], dev, i));
            }
            checked++;
            special += kr__gen_kernel_for(&dist, NULL) >= 0;
        }
    }
    printf("%d dtype x distribution pairs (%d through a specialised kernel): GPU bits == host "
           "bits\n", checked, special);
    assert_int_equal(special, KR__GEN_SPECIAL);
    kr__cuda()->cuMemFree(d);
    free(host);
    free(dev);
}

int main(void)
{
    g_ctx = gpu_context_or_skip();
    const struct CMUnitTest tests[] = {cmocka_unit_test(same_bits)};
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    kr_context_free(g_ctx);
    return rc;
}
