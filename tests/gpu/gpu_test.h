/* Shared by the gpu suite: skip (exit 77) with a reason where there is no GPU. */
#ifndef KR_GPU_TEST_H
#define KR_GPU_TEST_H

#include "../unit/helpers.h"

#include <jansson.h>
#include <time.h>

/* y = 2x over N = 1000 floats, with a CUDA reference: the problem of the
 * tests whose candidates break the device (fault, hang). */
static const char *const Y_IS_2X =
    "{\"name\": \"p\", \"dims\": [\"N\"], \"cases\": [{\"N\": 1000}],"
    " \"tensors\": [{\"name\": \"x\", \"dtype\": \"f32\", \"shape\": [\"N\"], \"role\": \"in\"},"
    "  {\"name\": \"y\", \"dtype\": \"f32\", \"shape\": [\"N\"], \"role\": \"out\"}],"
    " \"reference\": {\"cuda\": \"// kreward: launch k grid=(cdiv(N,256)) block=(256) args=(x, y, N)\\n"
    "extern \\\"C\\\" __global__ void k(const float* x, float* y, int n) {"
    " int i = blockIdx.x * 256 + threadIdx.x; if (i < n) y[i] = 2 * x[i]; }\"}}";

/* A problem, and a candidate's program and plan from one source: what the
 * tests of candidates that break the device (fault, hang) start from. */
typedef struct gpu_candidate {
    kr_problem *p;
    kr_program *prog;
    kr_plan *plan;
} gpu_candidate;

static inline void gpu_candidate_load(gpu_candidate *c, kr_context *ctx, const char *problem_json,
                                      const char *source)
{
    assert_int_equal(kr_problem_parse(&c->p, ctx, problem_json, strlen(problem_json), "p.json", NULL),
                     KR_OK);
    assert_int_equal(kr_compile(&c->prog, ctx, source, 0, NULL), KR_OK);
    assert_int_equal(kr_plan_from_source(&c->plan, ctx, source, 0, "c.cu"), KR_OK);
}

static inline void gpu_candidate_free(gpu_candidate *c)
{
    kr_plan_free(c->plan);
    kr_program_free(c->prog);
    kr_problem_free(c->p);
}

/* Verifies a candidate that hangs, with the default timeout (10 s): the
 * verdict must be timeout within max_s (a run's deadline follows the
 * reference's time on the case: verify_deadline.c). The report is returned
 * (the caller frees it); the context runs nothing more. */
static inline kr_report *gpu_verify_hang(kr_context *ctx, const gpu_candidate *c, double max_s)
{
    kr_verify_options o = KR_VERIFY_OPTIONS_INIT;
    kr_report *r = test_report();
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    assert_int_equal(kr_verify(r, ctx, c->p, c->prog, c->plan, &o), KR_OK);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double took = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    printf("%s after %.2f s: %s\n", kr_verdict_name(kr_report_verdict(r)), took,
           kr_report_text(r, "message"));
    assert_int_equal(kr_report_verdict(r), KR_VERDICT_TIMEOUT);
    assert_true(took < max_s);
    return r;
}

/* A context on GPU 0, or exit 77 saying why there is none. */
static inline kr_context *gpu_context_or_skip(void)
{
    kr_context *ctx = NULL;
    if (kr_context_new(&ctx, NULL) != KR_OK)
        exit(99);
    if (!kr_context_has_device(ctx)) {
        char *info = NULL;
        kr_context_info_json(&info, ctx);
        json_t *root = json_loads(info ? info : "{}", 0, NULL);
        const char *why = json_string_value(json_object_get(json_object_get(root, "device"), "why"));
        fprintf(stderr, "SKIP: no usable GPU: %s\n", why ? why : "unknown reason");
        json_decref(root);
        kr_free(info);
        kr_context_free(ctx);
        exit(77);
    }
    return ctx;
}

#endif
