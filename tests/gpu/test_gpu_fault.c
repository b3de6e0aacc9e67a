/* gpu: a kernel that faults gets verdict "fault", and the poisoned context
 * refuses later work with KR_EPOISONED and a clear message. (A process of its
 * own: after an illegal address nothing more runs in this process.) */
#include "gpu_test.h"


static const char *CANDIDATE =
    "// kreward: launch k grid=(cdiv(N,256)) block=(256) args=(x, y, N)\n"
    "extern \"C\" __global__ void k(const float* x, float* y, int n) {\n"
    "  int i = blockIdx.x * 256 + threadIdx.x;\n"
    "  if (i < n) y[i + (1 << 28)] = 2 * x[i]; }\n";

static void fault_then_poisoned(void **state)
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
    /* CUDA_ERROR_ILLEGAL_ADDRESS or, far outside any mapping, INVALID_ADDRESS_SPACE */
    assert_contains(kr_report_text(r, "message"), "the kernel faulted: ");
    assert_contains(kr_report_text(r, "message"), "ADDRESS");
    kr_report_free(r);
    assert_int_equal(kr_verify((r = test_report()), ctx, p, prog, plan, NULL), KR_EPOISONED);
    assert_int_equal(kr_report_verdict(r), KR_VERDICT_ERROR);
    assert_contains(kr_report_text(r, "message"), "unusable after an earlier fault");
    kr_report_free(r);
    kr_plan_free(plan);
    kr_program_free(prog);
    kr_problem_free(p);
    kr_context_free(ctx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(fault_then_poisoned)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
