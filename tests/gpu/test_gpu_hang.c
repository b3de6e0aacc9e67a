/* gpu: a kernel that never finishes gets verdict "timeout" within the
 * deadline, and the context is marked unusable (only a new process
 * recovers). A process of its own. */
#include "gpu_test.h"

#include "common/clock.h"

#include <unistd.h>


static const char *CANDIDATE =
    "// kreward: launch k grid=(1) block=(32) args=(x, y, N)\n"
    "extern \"C\" __global__ void k(const float* x, volatile float* y, int n) {\n"
    "  while (y[0] != 12345.0f) { }\n}\n";

static void hang_times_out(void **state)
{
    (void)state;
    kr_context *ctx = gpu_context_or_skip();
    kr_problem *p;
    kr_program *prog;
    kr_plan *plan;
    assert_int_equal(kr_problem_parse(&p, ctx, Y_IS_2X, strlen(Y_IS_2X), "p.json", NULL), KR_OK);
    assert_int_equal(kr_compile(&prog, ctx, CANDIDATE, 0, NULL), KR_OK);
    assert_int_equal(kr_plan_from_source(&plan, ctx, CANDIDATE, 0, "c.cu"), KR_OK);
    kr_verify_options o = KR_VERIFY_OPTIONS_INIT;
    o.timeout_s = 1.0;
    kr_report *r = NULL;
    double t0 = kr__now();
    assert_int_equal(kr_verify((r = test_report()), ctx, p, prog, plan, &o), KR_OK);
    double took = kr__now() - t0;
    printf("%s after %.2f s: %s\n", kr_verdict_name(kr_report_verdict(r)), took,
           kr_report_text(r, "message"));
    assert_int_equal(kr_report_verdict(r), KR_VERDICT_TIMEOUT);
    assert_true(took < 5.0);
    kr_report_free(r);
    assert_int_equal(kr_verify((r = test_report()), ctx, p, prog, plan, &o), KR_EPOISONED);
    kr_report_free(r);
    /* freeing must not block on the hung kernel */
    kr_plan_free(plan);
    kr_program_free(prog);
    kr_problem_free(p);
    kr_context_free(ctx);
    _exit(0); /* the driver tears the hung context down with the process */
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(hang_times_out)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
