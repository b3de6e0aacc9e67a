/* Programs from binaries: CUBIN (ELF) and PTX, and what is not either. */
#include "helpers.h"

#include "compile/program_impl.h"

static const char *SRC =
    "extern \"C\" __global__ void mix(const double* a, char c, float s, long long n, short h) {}\n"
    "extern \"C\" __global__ void other(int* x) { x[0] = 1; }\n";

static kr_program *compile_for(kr_context *ctx, const char *arch)
{
    kr_compile_options o;
    kr_compile_options_init(&o, KR_COMPILE_OPTIONS_VERSION);
    o.arch = arch;
    kr_program *p = NULL;
    assert_int_equal(kr_compile(&p, ctx, SRC, 0, &o), KR_OK);
    return p;
}

static void expect_params(const kr_program *p, const char *kernel, const uint32_t *sizes,
                          const uint32_t *offsets, size_t n)
{
    size_t k = kr_program_find_kernel(p, kernel);
    assert_int_not_equal(k, SIZE_MAX);
    assert_int_equal(kr_program_kernel_attr(p, k, KR_KERNEL_NUM_PARAMS), (int64_t)n);
    for (size_t i = 0; i < n; i++) {
        uint32_t off, size;
        assert_int_equal(kr_program_kernel_param(&off, &size, p, k, i), KR_OK);
        assert_int_equal(size, sizes[i]);
        assert_int_equal(off, offsets[i]);
    }
}

static const uint32_t MIX_SIZES[] = {8, 1, 4, 8, 2};
static const uint32_t MIX_OFFSETS[] = {0, 8, 12, 16, 24};

static void cubin_roundtrip(void **state)
{
    (void)state;
    kr_context *ctx = test_context(NULL);
    kr_program *src = compile_for(ctx, "sm_90a");
    size_t len;
    const void *img = image_of(src, &len, NULL);
    kr_program *bin = NULL;
    assert_int_equal(kr_program_from_binary(&bin, ctx, img, len, "mix.cubin"), KR_OK);
    assert_int_equal(kr_program_kernel_count(bin), 2);
    assert_string_equal(kr_program_arch(bin), "sm_90");
    assert_int_equal(kr_program_cache_result(bin), KR_CACHE_SKIPPED);
    expect_params(bin, "mix", MIX_SIZES, MIX_OFFSETS, 5);
    expect_params(src, "mix", MIX_SIZES, MIX_OFFSETS, 5);
    kr_program_free(src);
    kr_program_free(bin);
    kr_context_free(ctx);
}

static void ptx_roundtrip(void **state)
{
    (void)state;
    kr_context *ctx = test_context(NULL);
    kr_program *src = compile_for(ctx, "compute_90a");
    size_t len;
    const void *img = image_of(src, &len, NULL);
    kr_program *bin = NULL;
    assert_int_equal(kr_program_from_binary(&bin, ctx, img, len, "mix.ptx"), KR_OK);
    assert_string_equal(kr_program_arch(bin), "sm_90a");
    expect_params(bin, "mix", MIX_SIZES, MIX_OFFSETS, 5);
    kr_program_free(src);
    kr_program_free(bin);
    kr_context_free(ctx);
}

static void ptx_by_hand(void **state)
{
    (void)state;
    /* Triton-style PTX: aligned byte arrays, a commented-out entry */
    static const char ptx[] =
        ".version 8.7\n.target sm_90a\n.address_size 64\n"
        "// .entry ghost(.param .u64 p)\n"
        "/* .entry ghost2( .param .u32 q ) */\n"
        ".visible .entry tri_kernel(\n"
        "  .param .u64 .ptr .global .align 1 tri_kernel_param_0,\n"
        "  .param .u32 tri_kernel_param_1,\n"
        "  .param .align 8 .b8 tri_kernel_param_2[16],\n"
        "  .param .u8 tri_kernel_param_3\n"
        ")\n{\n ret;\n}\n";
    kr_context *ctx = test_context(NULL);
    kr_program *p = NULL;
    assert_int_equal(kr_program_from_binary(&p, ctx, ptx, sizeof ptx - 1, "tri.ptx"), KR_OK);
    assert_int_equal(kr_program_kernel_count(p), 1);
    static const uint32_t sizes[] = {8, 4, 16, 1}, offsets[] = {0, 8, 16, 32};
    expect_params(p, "tri_kernel", sizes, offsets, 4);
    kr_program_free(p);
    kr_context_free(ctx);
}

static void not_a_binary(void **state)
{
    (void)state;
    kr_context *ctx = test_context(NULL);
    kr_program *p = NULL;
    assert_int_equal(kr_program_from_binary(&p, ctx, "hello world", 11, "x.bin"), KR_EPARSE);
    assert_contains(kr_context_errmsg(ctx), "neither a CUBIN");
    assert_int_equal(kr_program_from_binary(&p, ctx, "", 0, "x.bin"), KR_EINVAL);

    /* an x86-64 ELF is not a CUDA binary */
    size_t n = 0;
    FILE *f = fopen("/proc/self/exe", "rb");
    assert_non_null(f);
    unsigned char head[4096];
    n = fread(head, 1, sizeof head, f);
    fclose(f);
    assert_int_equal(kr_program_from_binary(&p, ctx, head, n, "exe"), KR_EPARSE);
    assert_contains(kr_context_errmsg(ctx), "not a CUDA binary");

    /* a truncated CUBIN */
    kr_program *src = compile_for(ctx, "sm_90a");
    size_t len;
    const unsigned char *img = image_of(src, &len, NULL);
    for (size_t cut = 16; cut < len; cut += len / 7) {
        int rc = kr_program_from_binary(&p, ctx, img, cut, "cut.cubin");
        assert_int_not_equal(rc, KR_OK);
        assert_null(p);
    }
    /* a fatbinary header */
    static const unsigned char fatbin[16] = {0x50, 0xed, 0x55, 0xba, 1, 0, 16, 0};
    assert_int_equal(kr_program_from_binary(&p, ctx, fatbin, sizeof fatbin, "f.fatbin"),
                     KR_EUNSUPPORTED);
    kr_program_free(src);
    kr_context_free(ctx);
}

static void corrupted_cubin_never_crashes(void **state)
{
    (void)state;
    kr_context *ctx = test_context(NULL);
    kr_program *src = compile_for(ctx, "sm_90a");
    size_t len;
    const unsigned char *img = image_of(src, &len, NULL);
    unsigned char *copy = malloc(len);
    srand(7);
    for (int round = 0; round < 300; round++) {
        memcpy(copy, img, len);
        for (int flips = 0; flips < 8; flips++)
            copy[4 + (size_t)rand() % (len - 4)] = (unsigned char)rand();
        kr_program *p = NULL;
        int rc = kr_program_from_binary(&p, ctx, copy, len, "fuzzed.cubin");
        assert_true(rc == KR_OK || rc == KR_EPARSE || rc == KR_ENOTFOUND);
        kr_program_free(p);
    }
    free(copy);
    kr_program_free(src);
    kr_context_free(ctx);
}

/* Writable device globals and constants are found in the image without a
 * device (the engine resets them before every call), in CUBIN and PTX
 * alike; the device
 * heap and managed variables make a program inadmissible as a candidate. */
static const char *STATEFUL =
    "__device__ int counter;\n"
    "__device__ int table[4] = {1, 2, 3, 4};\n"
    "static __device__ unsigned long long hidden;\n"
    "namespace { __device__ int anon; }\n"
    "__constant__ float cst[8];\n"
    "extern \"C\" __global__ void k(float *y) {\n"
    "  static __device__ int in_function;\n"
    "  counter++; hidden++; anon++; in_function++;\n"
    "  y[0] = table[counter & 3] + cst[0] + hidden + anon + in_function; }\n";

static int has_global(const kr_program *p, const char *part)
{
    for (size_t i = 0; i < p->facts.num_globals; i++)
        if (strstr(p->facts.globals[i].name, part))
            return 1;
    return 0;
}

static void globals_and_heap(void **state)
{
    (void)state;
    kr_context *ctx = test_context(NULL);
    const char *arch[] = {"sm_90a", "compute_90a"};
    for (int a = 0; a < 2; a++) {
        kr_compile_options o;
        kr_compile_options_init(&o, KR_COMPILE_OPTIONS_VERSION);
        o.arch = arch[a];
        kr_program *p = NULL;
        assert_int_equal(kr_compile(&p, ctx, STATEFUL, 0, &o), KR_OK);
        const char *names[] = {"counter", "table", "hidden", "anon", "in_function"};
        for (size_t i = 0; i < 5; i++)
            if (!has_global(p, names[i]))
                fail_msg("%s: global '%s' not found", arch[a], names[i]);
        /* a constant is device memory a generic store can change: reset too */
        if (!has_global(p, "cst"))
            fail_msg("%s: constant 'cst' not found", arch[a]);
        assert_true(p->facts.num_groups >= (a == 0 ? 3u : 6u));
        assert_false(p->facts.uses_heap);
        assert_int_equal(kr__program_admissible(ctx, p), KR_OK);
        kr_program_free(p);

        const char *heap = "extern \"C\" __global__ void k(float *y) {\n"
                           "  float *b = (float *)malloc(16); b[0] = 1; y[0] = b[0]; free(b); }\n";
        assert_int_equal(kr_compile(&p, ctx, heap, 0, &o), KR_OK);
        assert_true(p->facts.uses_heap);
        assert_int_equal(kr__program_admissible(ctx, p), KR_ECOMPILE);
        assert_contains(kr_context_errmsg(ctx), "device malloc");
        kr_program_free(p);
    }
    kr_compile_options o;
    kr_compile_options_init(&o, KR_COMPILE_OPTIONS_VERSION);
    kr_program *p = NULL;
    assert_int_equal(kr_compile(&p, ctx, "__device__ __managed__ int m;\n"
                                "extern \"C\" __global__ void k(int *y) { y[0] = m++; }\n", 0, &o),
                     KR_OK);
    assert_true(p->facts.has_managed);
    assert_int_equal(kr__program_admissible(ctx, p), KR_ECOMPILE);
    assert_contains(kr_context_errmsg(ctx), "__managed__");
    kr_program_free(p);
    kr_context_free(ctx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(cubin_roundtrip),
        cmocka_unit_test(ptx_roundtrip),
        cmocka_unit_test(ptx_by_hand),
        cmocka_unit_test(not_a_binary),
        cmocka_unit_test(corrupted_cubin_never_crashes),
        cmocka_unit_test(globals_and_heap),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
