/* gpu: a kernel that faults gets verdict "fault", and the poisoned context
 * refuses later work with KR_EPOISONED and a clear message. With the
 * argument "late" (gpu_fault_late), the kernel faults only on
 * verification's second run (it tells the runs apart by the poison its
 * outputs start with) and still gets "fault": the first run is judged as
 * far as a poisoned context allows (its guard zones and inputs), never by a
 * reference run that cannot happen, which made the verdict "error"
 * (unscored). With "reference" (gpu_fault_reference), the problem's
 * reference faults in the run that verification queues behind an honest
 * candidate's runs (a candidate calling printf: its deadline needs no
 * timed reference run before): met at the wait for the reference and its
 * comparison, it is the library's error, never the candidate's verdict or a
 * pass. A process per case: after an illegal address nothing more runs in
 * a process. */
#include "gpu_test.h"

static const char *ALWAYS =
    "// kreward: launch k grid=(cdiv(N,256)) block=(256) args=(x, y, N)\n"
    "extern \"C\" __global__ void k(const float* x, float* y, int n) {\n"
    "  int i = blockIdx.x * 256 + threadIdx.x;\n"
    "  if (i < n) y[i + (1 << 28)] = 2 * x[i]; }\n";

/* 0xFFC0FFEE: the second run's poison for f32 outputs (dbuf.c) */
static const char *LATE =
    "// kreward: launch k grid=(cdiv(N,256)) block=(256) args=(x, y, N)\n"
    "extern \"C\" __global__ void k(const float* x, float* y, int n) {\n"
    "  int i = blockIdx.x * 256 + threadIdx.x;\n"
    "  if (i >= n) return;\n"
    "  if (__float_as_uint(y[i]) == 0xFFC0FFEEu) y[i + (1 << 28)] = 0.f;\n"
    "  else y[i] = 2 * x[i]; }\n";

/* Y_IS_2X with a reference that writes far outside its output */
static const char *FAULTING_REFERENCE =
    "{\"name\": \"p\", \"dims\": [\"N\"], \"cases\": [{\"N\": 1000}],"
    " \"tensors\": [{\"name\": \"x\", \"dtype\": \"f32\", \"shape\": [\"N\"], \"role\": \"in\"},"
    "  {\"name\": \"y\", \"dtype\": \"f32\", \"shape\": [\"N\"], \"role\": \"out\"}],"
    " \"reference\": {\"cuda\": \"// kreward: launch k grid=(cdiv(N,256)) block=(256) args=(x, y, N)\\n"
    "extern \\\"C\\\" __global__ void k(const float* x, float* y, int n) {"
    " int i = blockIdx.x * 256 + threadIdx.x; if (i < n) y[i + (1 << 28)] = 2 * x[i]; }\"}}";

/* right, and a printf that never prints */
static const char *HONEST_PRINTF =
    "// kreward: launch k grid=(cdiv(N,256)) block=(256) args=(x, y, N)\n"
    "extern \"C\" __global__ void k(const float* x, float* y, int n) {\n"
    "  int i = blockIdx.x * 256 + threadIdx.x;\n"
    "  if (i == n + 256) printf(\"never\\n\");\n"
    "  if (i < n) y[i] = 2 * x[i]; }\n";

static const char *g_candidate;

static void reference_fault_is_the_librarys(void **state)
{
    (void)state;
    kr_context *ctx = gpu_context_or_skip();
    gpu_candidate c;
    gpu_candidate_load(&c, ctx, FAULTING_REFERENCE, HONEST_PRINTF);
    kr_report *r = test_report();
    int rc = kr_verify(r, ctx, c.p, c.prog, c.plan, NULL);
    printf("rc %d, %s: %s\n", rc, kr_verdict_name(kr_report_verdict(r)), kr_report_text(r, "message"));
    assert_int_not_equal(rc, KR_OK);
    assert_int_equal(kr_report_verdict(r), KR_VERDICT_ERROR);
    assert_contains(kr_report_text(r, "message"), "the reference and the checks against it");
    kr_report_free(r);
    gpu_candidate_free(&c);
    kr_context_free(ctx);
}

static void fault_then_poisoned(void **state)
{
    (void)state;
    kr_context *ctx = gpu_context_or_skip();
    gpu_candidate c;
    gpu_candidate_load(&c, ctx, Y_IS_2X, g_candidate);
    kr_report *r = NULL;
    assert_int_equal(kr_verify((r = test_report()), ctx, c.p, c.prog, c.plan, NULL), KR_OK);
    printf("%s: %s\n", kr_verdict_name(kr_report_verdict(r)), kr_report_text(r, "message"));
    assert_int_equal(kr_report_verdict(r), KR_VERDICT_FAULT);
    /* CUDA_ERROR_ILLEGAL_ADDRESS or, far outside any mapping, INVALID_ADDRESS_SPACE */
    assert_contains(kr_report_text(r, "message"), "the kernel faulted: ");
    assert_contains(kr_report_text(r, "message"), "ADDRESS");
    kr_report_free(r);
    assert_int_equal(kr_verify((r = test_report()), ctx, c.p, c.prog, c.plan, NULL), KR_EPOISONED);
    assert_int_equal(kr_report_verdict(r), KR_VERDICT_ERROR);
    assert_contains(kr_report_text(r, "message"), "unusable after an earlier fault");
    kr_report_free(r);
    gpu_candidate_free(&c);
    kr_context_free(ctx);
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "reference") == 0) {
        const struct CMUnitTest tests[] = {cmocka_unit_test(reference_fault_is_the_librarys)};
        return cmocka_run_group_tests(tests, NULL, NULL);
    }
    g_candidate = argc > 1 && strcmp(argv[1], "late") == 0 ? LATE : ALWAYS;
    const struct CMUnitTest tests[] = {cmocka_unit_test(fault_then_poisoned)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
