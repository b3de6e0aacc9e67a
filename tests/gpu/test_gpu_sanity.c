/* gpu: problem soundness checks on real references. */
#include "gpu_test.h"

#include <unistd.h>

static kr_context *g_ctx;

static int sanity_of(const char *text, char **summary)
{
    kr_problem *p = NULL;
    if (kr_problem_parse(&p, g_ctx, text, strlen(text), "p.json", NULL) != KR_OK)
        fail_msg("%s", kr_context_errmsg(g_ctx));
    int rc = kr_problem_sanity(summary, g_ctx, p);
    printf("%s\n%s", kr_status_name(rc), *summary ? *summary : kr_context_errmsg(g_ctx));
    kr_problem_free(p);
    return rc;
}

#define SPEC(tol, body)                                                                   \
    "{\"name\": \"p\", \"dims\": [\"N\"], \"cases\": [{\"N\": 1000}, {\"N\": 77777}],"      \
    " \"tensors\": [{\"name\": \"x\", \"dtype\": \"f32\", \"shape\": [\"N\"], \"role\": \"in\"}," \
    "  {\"name\": \"y\", \"dtype\": \"f32\", \"shape\": [\"N\"], \"role\": \"out\", \"tolerance\": " tol "}]," \
    " \"reference\": {\"cuda\": \"// kreward: launch k grid=(cdiv(N,256)) block=(256) args=(x, y, N)\\n" \
    "extern \\\"C\\\" __global__ void k(const float* x, float* y, int n) {"                 \
    " int i = blockIdx.x * 256 + threadIdx.x; if (i < n) y[i] = " body "; }\"}}"

static void sound_problem(void **state)
{
    (void)state;
    char *summary = NULL;
    assert_int_equal(sanity_of(SPEC("{\"rtol\": 1e-5}", "2 * x[i] + 1"), &summary), KR_OK);
    assert_contains(summary, "ok: writing all zeros fails");
    kr_free(summary);
}

static void loose_tolerance_is_unsound(void **state)
{
    (void)state;
    char *summary = NULL;
    /* outputs ~1e-6 with atol 1e-3: all zeros pass (near-constant, loose tolerance) */
    assert_int_equal(sanity_of(SPEC("{\"atol\": 1e-3}", "1e-6f * x[i]"), &summary), KR_EUNSOUND);
    assert_contains(summary, "UNSOUND: writing all zeros passes every case");
    kr_free(summary);
}

static void identity_is_unsound(void **state)
{
    (void)state;
    char *summary = NULL;
    assert_int_equal(sanity_of(SPEC("{\"rtol\": 1e-5}", "x[i]"), &summary), KR_EUNSOUND);
    assert_contains(summary, "UNSOUND: writing a copy of input 'x' passes every case");
    kr_free(summary);
}

static void constant_reference_is_unsound(void **state)
{
    (void)state;
    char *summary = NULL;
    assert_int_equal(sanity_of(SPEC("{\"rtol\": 1e-5}", "3.0f"), &summary), KR_EUNSOUND);
    assert_contains(summary, "nearly) constant in every case");
    kr_free(summary);
}

/* Every bundled example problem: its reference runs on every case, and no
 * do-nothing output passes it. */
static void bundled_examples_are_sound(void **state)
{
    (void)state;
    const char *src = getenv("KR_SOURCE_ROOT");
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "ls -d %s/examples/problems/*/problem.json", src ? src : "..");
    FILE *ls = popen(cmd, "r");
    assert_non_null(ls);
    char path[4096];
    int checked = 0;
    while (fgets(path, sizeof path, ls)) {
        path[strcspn(path, "\n")] = '\0';
        kr_problem *p = NULL;
        if (kr_problem_load(&p, g_ctx, path) != KR_OK)
            fail_msg("%s", kr_context_errmsg(g_ctx));
        char *summary = NULL;
        int rc = kr_problem_sanity(&summary, g_ctx, p);
        if (rc != KR_OK)
            fail_msg("%s: %s\n%s", path, kr_context_errmsg(g_ctx), summary ? summary : "");
        kr_free(summary);
        kr_problem_free(p);
        checked++;
    }
    pclose(ls);
    printf("%d bundled problems are sound\n", checked);
    assert_true(checked >= 12);
}

int main(void)
{
    g_ctx = gpu_context_or_skip();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(sound_problem),
        cmocka_unit_test(loose_tolerance_is_unsound),
        cmocka_unit_test(identity_is_unsound),
        cmocka_unit_test(constant_reference_is_unsound),
        cmocka_unit_test(bundled_examples_are_sound),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    kr_context_free(g_ctx);
    return rc;
}
