/* kr_compile through the real NVRTC (no GPU needed). */
#include "helpers.h"

static const char *ADD_SRC =
    "extern \"C\" __global__ void add(const float* a, const float* b, float* c, int n) {\n"
    "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (i < n) c[i] = a[i] + b[i];\n"
    "}\n";

static void compile_ok(kr_context *ctx, const char *src, const kr_compile_options *o,
                       kr_program **out)
{
    int rc = kr_compile(out, ctx, src, 0, o);
    if (rc != KR_OK)
        fail_msg("compile failed: %s\n%s", kr_context_errmsg(ctx), kr_context_errdetail(ctx));
}

static void plain_kernel(void **state)
{
    (void)state;
    kr_context *ctx = test_context(NULL);
    kr_program *p = NULL;
    compile_ok(ctx, ADD_SRC, NULL, &p);
    assert_int_equal(kr_program_kernel_count(p), 1);
    assert_string_equal(kr_program_kernel_name(p, 0), "add");
    assert_string_equal(kr_program_arch(p), "sm_90a");
    assert_int_equal(kr_program_kernel_attr(p, 0, KR_KERNEL_NUM_PARAMS), 4);
    uint32_t sizes[4], offsets[4];
    for (size_t i = 0; i < 4; i++)
        assert_int_equal(kr_program_kernel_param(&offsets[i], &sizes[i], p, 0, i), KR_OK);
    assert_int_equal(sizes[0], 8);
    assert_int_equal(sizes[2], 8);
    assert_int_equal(sizes[3], 4);
    assert_int_equal(offsets[3], 24);
    assert_int_equal(kr_program_kernel_param(NULL, NULL, p, 0, 4), KR_ENOTFOUND);
    /* without a device resources are unknown, never invented */
    assert_int_equal(kr_program_kernel_attr(p, 0, KR_KERNEL_REGISTERS), -1);
    size_t len = 0;
    int kind = 0;
    const unsigned char *img = image_of(p, &len, &kind);
    assert_int_equal(kind, KR_BINARY_CUBIN);
    assert_true(len > 64);
    assert_memory_equal(img, "\177ELF", 4);
    assert_true(kr_program_compile_seconds(p) > 0);
    assert_int_equal(strlen(kr_program_hash(p)), 32);
    kr_program_free(p);
    kr_context_free(ctx);
}

static void half_and_bfloat_headers(void **state)
{
    (void)state;
    kr_context *ctx = test_context(NULL);
    kr_program *p = NULL;
    compile_ok(ctx,
               "#include <cuda_fp16.h>\n#include <cuda_bf16.h>\n"
               "extern \"C\" __global__ void cvt(const __half* x, __nv_bfloat16* y, int n) {\n"
               "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
               "  if (i < n) y[i] = __float2bfloat16(__half2float(x[i]) * 2.0f);\n"
               "}\n",
               NULL, &p);
    assert_int_equal(kr_program_find_kernel(p, "cvt"), 0);
    kr_program_free(p);
    kr_context_free(ctx);
}

static void cccl_header(void **state)
{
    (void)state;
    kr_context *ctx = test_context(NULL);
    kr_program *p = NULL;
    compile_ok(ctx,
               "#include <cuda/std/type_traits>\n"
               "extern \"C\" __global__ void k(float* x) {\n"
               "  static_assert(cuda::std::is_same<float, float>::value, \"cccl\");\n"
               "  x[threadIdx.x] = 1.0f;\n}\n",
               NULL, &p);
    kr_program_free(p);
    kr_context_free(ctx);
}

static void template_name_expression(void **state)
{
    (void)state;
    kr_context *ctx = test_context(NULL);
    kr_compile_options o;
    kr_compile_options_init(&o, KR_COMPILE_OPTIONS_VERSION);
    const char *exprs[] = {"scale<128>", "scale<256>"};
    o.name_expressions = exprs;
    o.num_name_expressions = 2;
    kr_program *p = NULL;
    compile_ok(ctx,
               "template <int B> __global__ void scale(float* x) { x[threadIdx.x] *= B; }\n", &o,
               &p);
    const char *lowered = kr_program_lowered_name(p, "scale<128>");
    assert_non_null(lowered);
    assert_string_equal(lowered, "_Z5scaleILi128EEvPf");
    assert_int_equal(kr_program_kernel_count(p), 2);
    assert_int_not_equal(kr_program_find_kernel(p, "scale<128>"), SIZE_MAX);
    assert_int_not_equal(kr_program_find_kernel(p, "scale<256>"), SIZE_MAX);
    assert_int_equal(kr_program_find_kernel(p, "scale<512>"), SIZE_MAX);
    kr_program_free(p);
    kr_context_free(ctx);
}

static void defines_reach_the_source(void **state)
{
    (void)state;
    kr_context *ctx = test_context(NULL);
    const char *src = "static_assert(BLOCK == 128, \"BLOCK must be 128\");\n"
                      "extern \"C\" __global__ void k(float* x) { x[threadIdx.x] = BLOCK; }\n";
    kr_compile_options o;
    kr_compile_options_init(&o, KR_COMPILE_OPTIONS_VERSION);
    const char *good[] = {"BLOCK=128"}, *bad[] = {"BLOCK=64"}, *junk[] = {"1BLOCK=3"};
    o.defines = good;
    o.num_defines = 1;
    kr_program *p = NULL;
    compile_ok(ctx, src, &o, &p);
    kr_program_free(p);
    o.defines = bad;
    assert_int_equal(kr_compile(&p, ctx, src, 0, &o), KR_ECOMPILE);
    assert_null(p);
    assert_contains(kr_context_errdetail(ctx), "BLOCK must be 128");
    o.defines = junk;
    assert_int_equal(kr_compile(&p, ctx, src, 0, &o), KR_EINVAL);
    assert_contains(kr_context_errmsg(ctx), "1BLOCK=3");
    kr_context_free(ctx);
}

static void syntax_error_has_log_with_line(void **state)
{
    (void)state;
    kr_context *ctx = test_context(NULL);
    kr_compile_options o;
    kr_compile_options_init(&o, KR_COMPILE_OPTIONS_VERSION);
    o.name = "bad.cu";
    kr_program *p = (kr_program *)0x1;
    int rc = kr_compile(&p, ctx, "extern \"C\" __global__ void f(float* x) {\n  x[0] = 1\n}\n",
                        0, &o);
    assert_int_equal(rc, KR_ECOMPILE);
    assert_null(p);
    assert_contains(kr_context_errmsg(ctx), "bad.cu(3): error");
    assert_contains(kr_context_errmsg(ctx), "1 error");
    assert_contains(kr_context_errdetail(ctx), "expected a \";\"");
    kr_context_free(ctx);
}

static void missing_include(void **state)
{
    (void)state;
    kr_context *ctx = test_context(NULL);
    kr_program *p = NULL;
    assert_int_equal(kr_compile(&p, ctx, "#include \"no_such_header.cuh\"\n__global__ void f(){}\n",
                                0, NULL),
                     KR_ECOMPILE);
    assert_contains(kr_context_errdetail(ctx), "no_such_header.cuh");
    kr_context_free(ctx);
}

static void bad_inputs(void **state)
{
    (void)state;
    kr_context *ctx = test_context(NULL);
    kr_program *p = NULL;
    assert_int_equal(kr_compile(&p, ctx, "", 0, NULL), KR_ECOMPILE);
    assert_contains(kr_context_errmsg(ctx), "empty source: there is no code to compile");
    assert_int_equal(kr_compile(&p, ctx, NULL, 0, NULL), KR_EINVAL);
    assert_int_equal(kr_compile(&p, NULL, ADD_SRC, 0, NULL), KR_EINVAL);

    static const char junk[] = "\x7f\x45\x4c\x46\x02\x01\x00\x00garbage";
    assert_int_equal(kr_compile(&p, ctx, junk, sizeof junk - 1, NULL), KR_EPARSE);
    assert_contains(kr_context_errmsg(ctx), "binary data");

    assert_int_equal(kr_compile(&p, ctx, "qz!! %% ]] not c++ at all ((", 0, NULL), KR_ECOMPILE);

    kr_compile_options o;
    kr_compile_options_init(&o, KR_COMPILE_OPTIONS_VERSION);
    o.max_source_bytes = 16;
    assert_int_equal(kr_compile(&p, ctx, ADD_SRC, 0, &o), KR_ETOOBIG);
    assert_contains(kr_context_errmsg(ctx), "over the limit of 16");

    kr_compile_options_init(&o, KR_COMPILE_OPTIONS_VERSION);
    const char *extra[] = {"--no-such-nvrtc-option"};
    o.extra_options = extra;
    o.num_extra_options = 1;
    assert_int_equal(kr_compile(&p, ctx, ADD_SRC, 0, &o), KR_EINVAL);
    assert_contains(kr_context_errmsg(ctx), "option");

    kr_compile_options_init(&o, KR_COMPILE_OPTIONS_VERSION);
    o.arch = "sm_13";
    assert_int_equal(kr_compile(&p, ctx, ADD_SRC, 0, &o), KR_EINVAL);
    assert_contains(kr_context_errmsg(ctx), "unknown target architecture 'sm_13'");
    assert_contains(kr_context_errmsg(ctx), "sm_90");
    o.arch = "banana";
    assert_int_equal(kr_compile(&p, ctx, ADD_SRC, 0, &o), KR_EINVAL);

    kr_compile_options_init(&o, KR_COMPILE_OPTIONS_VERSION);
    o.version = 99;
    assert_int_equal(kr_compile(&p, ctx, ADD_SRC, 0, &o), KR_EVERSION);
    assert_null(p);
    assert_int_equal(kr_compile_options_init(&o, 99), KR_EVERSION);
    kr_context_free(ctx);
}

static void log_kept_on_success(void **state)
{
    (void)state;
    kr_context *ctx = test_context(NULL);
    kr_program *p = NULL;
    compile_ok(ctx,
               "extern \"C\" __global__ void k(float* x) { int unused = 3; x[0] = 1.0f; }\n",
               NULL, &p);
    assert_contains(kr_program_log(p), "warning");
    kr_program_free(p);
    kr_context_free(ctx);
}

static void time_limit_cancels(void **state)
{
    (void)state;
    kr_context *ctx = test_context(NULL);
    kr_compile_options o;
    kr_compile_options_init(&o, KR_COMPILE_OPTIONS_VERSION);
    o.time_limit_s = 1e-6;
    o.flags = KR_COMPILE_NO_CACHE;
    kr_program *p = NULL;
    int rc = kr_compile(&p, ctx,
                        "#include <cuda_fp16.h>\n#include <cuda_bf16.h>\n"
                        "extern \"C\" __global__ void k(__half* x) { x[0] = __float2half(1.f); }\n",
                        0, &o);
    assert_int_equal(rc, KR_ETIMEOUT);
    assert_null(p);
    assert_contains(kr_context_errmsg(ctx), "time limit");
    kr_context_free(ctx);
}

static void ptx_target(void **state)
{
    (void)state;
    kr_context *ctx = test_context(NULL);
    kr_compile_options o;
    kr_compile_options_init(&o, KR_COMPILE_OPTIONS_VERSION);
    o.arch = "compute_90";
    kr_program *p = NULL;
    compile_ok(ctx, ADD_SRC, &o, &p);
    int kind = 0;
    const char *text = image_of(p, NULL, &kind);
    assert_int_equal(kind, KR_BINARY_PTX);
    assert_contains(text, ".entry add");
    assert_int_equal(kr_program_kernel_attr(p, 0, KR_KERNEL_PARAM_BYTES), 28);
    kr_program_free(p);
    kr_context_free(ctx);
}

static void program_json(void **state)
{
    (void)state;
    kr_context *ctx = test_context(NULL);
    kr_program *p = NULL;
    compile_ok(ctx, ADD_SRC, NULL, &p);
    char *json = NULL;
    assert_int_equal(kr_program_json(&json, p), KR_OK);
    assert_contains(json, "\"name\": \"add\"");
    assert_contains(json, "\"registers\": null");
    assert_contains(json, "\"cache\": \"miss\"");
    kr_free(json);
    kr_program_free(p);
    kr_context_free(ctx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(plain_kernel),
        cmocka_unit_test(half_and_bfloat_headers),
        cmocka_unit_test(cccl_header),
        cmocka_unit_test(template_name_expression),
        cmocka_unit_test(defines_reach_the_source),
        cmocka_unit_test(syntax_error_has_log_with_line),
        cmocka_unit_test(missing_include),
        cmocka_unit_test(bad_inputs),
        cmocka_unit_test(log_kept_on_success),
        cmocka_unit_test(time_limit_cancels),
        cmocka_unit_test(ptx_target),
        cmocka_unit_test(program_json),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
