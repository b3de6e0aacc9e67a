/* gpu: the pool on real GPU workers: a batch mixing good, faulting,
 * trapping, hanging and out-of-bounds candidates; every report present and
 * right, the caller's own CUDA context untouched, respawns within a second
 * of waiting (the warm spare), no worker left behind. */
#include "gpu_test.h"
#include "../unit/pool_test.h"

#include "common/clock.h"

#include <jansson.h>
#include <signal.h>
#include <unistd.h>

#define BODY(x) "// kreward: launch k grid=(cdiv(N,256)) block=(256) args=(x, y, N)\n" \
                "extern \"C\" __global__ void k(const float* x, float* y, int n) {\n" \
                "  int i = blockIdx.x * 256 + threadIdx.x;\n" x "}\n"

static const struct {
    const char *name, *source, *verdict;
} CASES[] = {
    {"good", BODY("if (i < n) y[i] = 2 * x[i];"), "passed"},
    {"fault", BODY("if (i < n) y[i + (1 << 28)] = 2 * x[i];"), "fault"},
    {"trap", BODY("if (i == 7) __trap(); if (i < n) y[i] = 2 * x[i];"), "fault"},
    {"hang", BODY("while (x[0] != 12345.0f) { } if (i < n) y[i] = 2 * x[i];"), "timeout"},
    {"oob", BODY("if (i <= n) y[i] = i < n ? 2 * x[i] : 0;"), "incorrect"},
    {"wrong", BODY("if (i < n) y[i] = x[i];"), "incorrect"},
    {"good2", BODY("if (i < n) y[i] = x[i] + x[i];"), "passed"},
};

static void mixed_batch(void **state)
{
    (void)state;
    kr_context *ctx = gpu_context_or_skip(); /* the caller's own CUDA context */
    kr_problem *p = NULL;
    assert_int_equal(kr_problem_parse(&p, ctx, Y_IS_2X, strlen(Y_IS_2X), "p.json", NULL), KR_OK);
    kr_pool_options o;
    kr_pool_options_init(&o, KR_POOL_OPTIONS_VERSION);
    o.job_timeout_s = 60;
    kr_pool *pool = NULL;
    char *why = NULL;
    if (kr_pool_new(&pool, &o, &why) != KR_OK)
        fail_msg("pool: %s", why);
    kr_verify_options vo;
    kr_verify_options_init(&vo, KR_VERIFY_OPTIONS_VERSION);
    vo.timeout_s = 2; /* the hang is judged by the worker within this */
    size_t n = sizeof CASES / sizeof CASES[0];
    kr_job jobs[2 * (sizeof CASES / sizeof CASES[0])];
    for (size_t i = 0; i < 2 * n; i++) { /* twice over: respawned workers keep serving */
        kr_job_init(&jobs[i], KR_JOB_VERSION);
        jobs[i].problem = p;
        jobs[i].source = CASES[i % n].source;
        jobs[i].name = CASES[i % n].name;
        jobs[i].verify = &vo;
        jobs[i].flags = KR_EVALUATE_NO_BENCH;
    }
    /* the second round must not be deduplicated away: other seeds */
    kr_verify_options vo2 = vo;
    vo2.seed = 12345;
    for (size_t i = n; i < 2 * n; i++)
        jobs[i].verify = &vo2;
    kr_report *reports[2 * (sizeof CASES / sizeof CASES[0])];
    double t0 = kr__now();
    assert_int_equal(kr_evaluate_batch(reports, pool, jobs, 2 * n), KR_OK);
    printf("%zu jobs in %.1f s; respawns %.0f, respawn wait max %.2f s\n", 2 * n, kr__now() - t0,
           pool_status_number(pool, "respawns"), pool_status_number(pool, "respawn_wait_max_s"));
    for (size_t i = 0; i < 2 * n; i++) {
        assert_non_null(reports[i]);
        printf("  %-6s %-10s %s\n", CASES[i % n].name, kr_verdict_name(kr_report_verdict(reports[i])),
               kr_report_text(reports[i], "message") ? kr_report_text(reports[i], "message") : "");
        assert_string_equal(kr_verdict_name(kr_report_verdict(reports[i])), CASES[i % n].verdict);
        kr_report_free(reports[i]);
    }
    assert_true(pool_status_number(pool, "respawns") >= 6);
    kr_pool_free(pool);
    /* the caller's context works: a verify of a good candidate here */
    kr_program *prog = NULL;
    kr_plan *plan = NULL;
    assert_int_equal(kr_compile(&prog, ctx, CASES[0].source, 0, NULL), KR_OK);
    assert_int_equal(kr_plan_from_source(&plan, ctx, CASES[0].source, 0, "c.cu"), KR_OK);
    kr_report *r = test_report();
    assert_int_equal(kr_verify(r, ctx, p, prog, plan, NULL), KR_OK);
    assert_int_equal(kr_report_verdict(r), KR_VERDICT_PASSED);
    kr_report_free(r);
    kr_plan_free(plan);
    kr_program_free(prog);
    kr_problem_free(p);
    kr_context_free(ctx);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    const struct CMUnitTest tests[] = {cmocka_unit_test(mixed_batch)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
