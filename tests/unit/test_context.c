/* Context, versions, status texts and the capabilities query. */
#include "helpers.h"

#include <jansson.h>

static void versions(void **state)
{
    (void)state;
    assert_string_equal(kr_version(), "0.3.0");
    assert_int_equal(kr_version_number(), 300);
    assert_int_equal(kr_abi_version(), KR_ABI_VERSION);
}

static void status_texts(void **state)
{
    (void)state;
    for (int code = 0; code >= KR_EUNSOUND; code--) {
        assert_string_not_equal(kr_strerror(code), "unknown status code");
        assert_string_not_equal(kr_status_name(code), "KR_UNKNOWN");
    }
    assert_string_equal(kr_strerror(-9999), "unknown status code");
    assert_string_equal(kr_status_name(KR_EPARSE), "KR_EPARSE");
    /* pinned values: these numbers are ABI */
    assert_int_equal(KR_EINVAL, -1);
    assert_int_equal(KR_ECOMPILE, -5);
    assert_int_equal(KR_EFAULT, -19);
    kr_free(NULL);
}

static void options(void **state)
{
    (void)state;
    kr_context_options o;
    assert_int_equal(kr_context_options_init(&o, KR_CONTEXT_OPTIONS_VERSION), KR_OK);
    assert_int_equal(o.version, KR_CONTEXT_OPTIONS_VERSION);
    assert_int_equal(o.cache_memory_bytes, 256u << 20);
    assert_int_equal(kr_context_options_init(&o, 2), KR_EVERSION);
    assert_int_equal(kr_context_options_init(NULL, 1), KR_EINVAL);
    kr_context *ctx = NULL;
    o.version = 7;
    assert_int_equal(kr_context_new(&ctx, &o), KR_EVERSION);
    assert_null(ctx);
    assert_int_equal(kr_context_new(NULL, NULL), KR_EINVAL);
    kr_context_free(NULL);
}

static void no_device_context(void **state)
{
    (void)state;
    kr_context *ctx = test_context(NULL);
    assert_int_equal(kr_context_has_device(ctx), 0);
    assert_string_equal(kr_context_arch(ctx), "sm_90a");
    assert_string_equal(kr_context_errmsg(ctx), "");

    kr_context_options o;
    kr_context_options_init(&o, KR_CONTEXT_OPTIONS_VERSION);
    o.flags = KR_CONTEXT_NO_DEVICE;
    o.default_arch = "sm_80";
    kr_context *c80 = NULL;
    assert_int_equal(kr_context_new(&c80, &o), KR_OK);
    assert_string_equal(kr_context_arch(c80), "sm_80");
    kr_context_free(c80);
    kr_context_free(ctx);
}

static void info_json(void **state)
{
    (void)state;
    kr_context *ctx = test_context(NULL);
    char *text = NULL;
    assert_int_equal(kr_context_info_json(&text, ctx), KR_OK);
    json_error_t err;
    json_t *info = json_loads(text, 0, &err);
    assert_non_null(info);
    assert_string_equal(json_string_value(json_object_get(json_object_get(info, "library"),
                                                          "version")),
                        "0.3.0");
    json_t *dev = json_object_get(info, "device");
    assert_true(json_is_false(json_object_get(dev, "usable")));
    assert_string_equal(json_string_value(json_object_get(dev, "why")),
                        "disabled by KR_CONTEXT_NO_DEVICE");
    json_t *nvrtc = json_object_get(info, "nvrtc");
    assert_true(json_is_true(json_object_get(nvrtc, "loaded")));
    assert_true(json_array_size(json_object_get(nvrtc, "archs")) > 3);
    json_t *driver = json_object_get(info, "driver");
    if (!json_is_true(json_object_get(driver, "loaded")))
        assert_non_null(json_string_value(json_object_get(driver, "why")));
    assert_true(json_is_boolean(json_object_get(json_object_get(info, "cupti"), "loaded")));
    json_decref(info);
    kr_free(text);
    kr_context_free(ctx);
}

static void bad_cuda_home_is_explained(void **state)
{
    (void)state;
    kr_context_options o;
    kr_context_options_init(&o, KR_CONTEXT_OPTIONS_VERSION);
    o.flags = KR_CONTEXT_NO_DEVICE;
    o.cuda_home = "/nonexistent/cuda";
    kr_context *ctx = NULL;
    assert_int_equal(kr_context_new(&ctx, &o), KR_OK);
    kr_program *p = NULL;
    /* NVRTC itself loads from the loader path, but its headers are missing */
    int rc = kr_compile(&p, ctx, "#include <cuda_fp16.h>\n__global__ void k(){}\n", 0, NULL);
    assert_int_equal(rc, KR_ECOMPILE);
    assert_contains(kr_context_errdetail(ctx), "cuda_fp16.h");
    kr_context_free(ctx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(versions),
        cmocka_unit_test(status_texts),
        cmocka_unit_test(options),
        cmocka_unit_test(no_device_context),
        cmocka_unit_test(info_json),
        cmocka_unit_test(bad_cuda_home_is_explained),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
