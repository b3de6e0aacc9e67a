/* gpu: a kernel that faults only on verification's second run (it tells
 * the runs apart by the poison its outputs start with) still gets verdict
 * "fault": the first run, done before it, is judged as far as a poisoned
 * context allows (its guard zones and inputs), never a reference run that
 * cannot happen, which would have made the verdict "error" (unscored). A
 * process of its own: after an illegal address nothing more runs in it. */
#include "gpu_test.h"

/* 0xFFC0FFEE: the second run's poison for f32 outputs (dbuf.c) */
static const char *CANDIDATE =
    "// kreward: launch k grid=(cdiv(N,256)) block=(256) args=(x, y, N)\n"
    "extern \"C\" __global__ void k(const float* x, float* y, int n) {\n"
    "  int i = blockIdx.x * 256 + threadIdx.x;\n"
    "  if (i >= n) return;\n"
    "  if (__float_as_uint(y[i]) == 0xFFC0FFEEu) y[i + (1 << 28)] = 0.f;\n"
    "  else y[i] = 2 * x[i]; }\n";

static void fault_on_the_second_run(void **state)
{
    (void)state;
    kr_context *ctx = gpu_context_or_skip();
    kr_problem *p;
    kr_program *prog;
    kr_plan *plan;
    assert_int_equal(kr_problem_parse(&p, ctx, Y_IS_2X, strlen(Y_IS_2X), "p.json", NULL), KR_OK);
    assert_int_equal(kr_compile(&prog, ctx, CANDIDATE, 0, NULL), KR_OK);
    assert_int_equal(kr_plan_from_source(&plan, ctx, CANDIDATE, 0, "c.cu"), KR_OK);
    kr_report *r = NULL;
    assert_int_equal(kr_verify((r = test_report()), ctx, p, prog, plan, NULL), KR_OK);
    printf("%s: %s\n", kr_verdict_name(kr_report_verdict(r)), kr_report_text(r, "message"));
    assert_int_equal(kr_report_verdict(r), KR_VERDICT_FAULT);
    assert_contains(kr_report_text(r, "message"), "the kernel faulted: ");
    kr_report_free(r);
    kr_plan_free(plan);
    kr_program_free(prog);
    kr_problem_free(p);
    kr_context_free(ctx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(fault_on_the_second_run)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
