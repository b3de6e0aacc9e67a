/* gpu: programs load on the device and report real resource usage. */
#include "gpu_test.h"

static kr_context *g_ctx;

static const char *SRC =
    "extern \"C\" __global__ void tile(const float* x, float* y, long long n, char c) {\n"
    "  __shared__ float buf[256];\n"
    "  long long i = blockIdx.x * 256ll + threadIdx.x;\n"
    "  buf[threadIdx.x] = i < n ? x[i] : 0.f;\n"
    "  __syncthreads();\n"
    "  if (i < n) y[i] = buf[255 - threadIdx.x] + c;\n"
    "}\n"
    /* a dynamically indexed 1 KiB array lives in local memory (ptxas: 1024
     * bytes stack frame) */
    "extern \"C\" __global__ void __launch_bounds__(128) spill(float* y, int k) {\n"
    "  float a[256];\n"
    "  for (int j = 0; j < 256; j++) a[j] = y[j * k];\n"
    "  y[threadIdx.x] = a[(threadIdx.x * k) & 255];\n"
    "}\n";

static void resources_are_read(void **state)
{
    (void)state;
    kr_program *p = NULL;
    int rc = kr_compile(&p, g_ctx, SRC, 0, NULL);
    if (rc != KR_OK)
        fail_msg("%s", kr_context_errmsg(g_ctx));
    char *json = NULL;
    kr_program_json(&json, p);
    printf("%s\n", json);
    assert_contains(json, "\"loaded\": true");
    kr_free(json);
    size_t t = kr_program_find_kernel(p, "tile"), s = kr_program_find_kernel(p, "spill");
    assert_true(kr_program_kernel_attr(p, t, KR_KERNEL_REGISTERS) > 0);
    assert_int_equal(kr_program_kernel_attr(p, t, KR_KERNEL_SHARED_STATIC), 1024);
    assert_int_equal(kr_program_kernel_attr(p, t, KR_KERNEL_MAX_THREADS), 1024);
    assert_int_equal(kr_program_kernel_attr(p, s, KR_KERNEL_MAX_THREADS), 128);
    assert_true(kr_program_kernel_attr(p, s, KR_KERNEL_LOCAL_BYTES) >= 1024);
    kr_program_free(p);
}

/* The parameter list read from the ELF without a GPU equals the driver's. */
static void elf_params_match_driver(void **state)
{
    (void)state;
    kr_context *cpu = test_context(NULL);
    kr_program *on_gpu = NULL, *from_elf = NULL;
    assert_int_equal(kr_compile(&on_gpu, g_ctx, SRC, 0, NULL), KR_OK);
    assert_int_equal(kr_compile(&from_elf, cpu, SRC, 0, NULL), KR_OK);
    for (size_t k = 0; k < kr_program_kernel_count(on_gpu); k++) {
        const char *name = kr_program_kernel_name(on_gpu, k);
        size_t e = kr_program_find_kernel(from_elf, name);
        int64_t n = kr_program_kernel_attr(on_gpu, k, KR_KERNEL_NUM_PARAMS);
        assert_int_equal(n, kr_program_kernel_attr(from_elf, e, KR_KERNEL_NUM_PARAMS));
        for (int64_t i = 0; i < n; i++) {
            uint32_t o1, s1, o2, s2;
            assert_int_equal(kr_program_kernel_param(&o1, &s1, on_gpu, k, (size_t)i), KR_OK);
            assert_int_equal(kr_program_kernel_param(&o2, &s2, from_elf, e, (size_t)i), KR_OK);
            assert_int_equal(o1, o2);
            assert_int_equal(s1, s2);
        }
    }
    kr_program_free(on_gpu);
    kr_program_free(from_elf);
    kr_context_free(cpu);
}

static void device_arch_and_info(void **state)
{
    (void)state;
    const char *arch = kr_context_arch(g_ctx);
    printf("device arch: %s\n", arch);
    assert_true(strncmp(arch, "sm_", 3) == 0);
    char *info = NULL;
    assert_int_equal(kr_context_info_json(&info, g_ctx), KR_OK);
    assert_contains(info, "\"usable\": true");
    assert_contains(info, "\"multiprocessors\"");
    kr_free(info);
}

static void foreign_arch_does_not_load(void **state)
{
    (void)state;
    /* sm_75 code cannot run on a Hopper GPU: the compile succeeds, the
     * program says why it did not load */
    kr_compile_options o;
    kr_compile_options_init(&o, KR_COMPILE_OPTIONS_VERSION);
    o.arch = strcmp(kr_context_arch(g_ctx), "sm_75") == 0 ? "sm_90" : "sm_75";
    kr_program *p = NULL;
    assert_int_equal(kr_compile(&p, g_ctx, SRC, 0, &o), KR_OK);
    char *json = NULL;
    kr_program_json(&json, p);
    assert_contains(json, "\"loaded\": false");
    assert_contains(json, "load_error");
    kr_free(json);
    kr_program_free(p);
}

int main(void)
{
    g_ctx = gpu_context_or_skip();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(resources_are_read),
        cmocka_unit_test(elf_params_match_driver),
        cmocka_unit_test(device_arch_and_info),
        cmocka_unit_test(foreign_arch_does_not_load),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    kr_context_free(g_ctx);
    return rc;
}
