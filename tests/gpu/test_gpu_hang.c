/* gpu: a kernel that never finishes gets verdict "timeout" within the
 * deadline, and the context is marked unusable (only a new process
 * recovers). The deadline follows the reference's time on the case
 * (verify_deadline.c): with the default timeout_s (10 s) a hang on a small
 * case ends in a fraction of a second, not after 10 s of a held GPU. A
 * process of its own. */
#include "gpu_test.h"

#include <string.h>
#include <unistd.h>


static const char *CANDIDATE =
    "// kreward: launch k grid=(1) block=(32) args=(x, y, N)\n"
    "extern \"C\" __global__ void k(const float* x, volatile float* y, int n) {\n"
    "  while (y[0] != 12345.0f) { }\n}\n";

static void hang_times_out(void **state)
{
    (void)state;
    kr_context *ctx = gpu_context_or_skip();
    gpu_candidate c;
    gpu_candidate_load(&c, ctx, Y_IS_2X, CANDIDATE);
    /* the reference's timing runs, a compile and the floor of 0.25 s: far from 10 s */
    kr_report *r = gpu_verify_hang(ctx, &c, 4.0);
    assert_non_null(strstr(kr_report_text(r, "message"), "the reference took"));
    kr_report_free(r);
    kr_verify_options o = KR_VERIFY_OPTIONS_INIT;
    assert_int_equal(kr_verify((r = test_report()), ctx, c.p, c.prog, c.plan, &o), KR_EPOISONED);
    kr_report_free(r);
    /* freeing must not block on the hung kernel */
    gpu_candidate_free(&c);
    kr_context_free(ctx);
    _exit(0); /* the driver tears the hung context down with the process */
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(hang_times_out)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
