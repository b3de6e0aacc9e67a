/* bench/verify: what verification costs beyond the kernels' own GPU time,
 * per problem size (goal: <= 20 ms for tensors up to 64 MB per case).
 * One case, one seed: a reference run and two candidate runs, each with its
 * fresh buffers, canaries, hashes and comparisons. */
#include <kreward/kreward.h>

#include "common/clock.h"

#include <stdio.h>
#include <string.h>

static const char *SRC =
    "// kreward: launch k grid=(cdiv(N,256)) block=(256) args=(a, b, c, N)\n"
    "extern \"C\" __global__ void k(const float* a, const float* b, float* c, long long n) {\n"
    "  long long i = blockIdx.x * 256ll + threadIdx.x; if (i < n) c[i] = a[i] + b[i]; }\n";

int main(void)
{
    kr_context *ctx;
    if (kr_context_new(&ctx, NULL) != KR_OK || !kr_context_has_device(ctx)) {
        printf("bench_verify: needs a GPU (skipped)\n");
        return 0;
    }
    printf("Verify overhead (vector add, 3 tensors; 1 case x 1 seed = reference + 2 candidate runs)\n\n");
    printf("| MB per tensor | verify wall (ms) | kernels (ms) | overhead (ms) | with 2 seeds (ms) |\n");
    printf("|---|---|---|---|---|\n");
    const long long sizes[] = {262144, 4194304, 16777216};
    for (size_t i = 0; i < 3; i++) {
        char spec[1024];
        snprintf(spec, sizeof spec,
                 "{\"name\": \"vadd\", \"dims\": [\"N\"], \"cases\": [{\"N\": %lld}],"
                 " \"tensors\": [{\"name\": \"a\", \"dtype\": \"f32\", \"shape\": [\"N\"], \"role\": \"in\"},"
                 " {\"name\": \"b\", \"dtype\": \"f32\", \"shape\": [\"N\"], \"role\": \"in\"},"
                 " {\"name\": \"c\", \"dtype\": \"f32\", \"shape\": [\"N\"], \"role\": \"out\"}],"
                 " \"reference\": {\"cuda\": \"// kreward: launch k grid=(cdiv(N,256)) block=(256) args=(a, b, c, N)\\n"
                 "extern \\\"C\\\" __global__ void k(const float* a, const float* b, float* c, long long n) {"
                 " long long i = blockIdx.x * 256ll + threadIdx.x; if (i < n) c[i] = a[i] + b[i]; }\"}}",
                 sizes[i]);
        kr_problem *p;
        kr_program *prog;
        kr_plan *plan;
        if (kr_problem_parse(&p, ctx, spec, strlen(spec), "p.json", NULL) != KR_OK ||
            kr_compile(&prog, ctx, SRC, 0, NULL) != KR_OK ||
            kr_plan_from_source(&plan, ctx, SRC, 0, "c.cu") != KR_OK) {
            printf("setup failed: %s\n", kr_context_errmsg(ctx));
            return 1;
        }
        kr_verify_options vo = KR_VERIFY_OPTIONS_INIT;
        vo.seeds_per_case = 1;
        kr_report *r = NULL;
        kr_report_new(&r);
        kr_verify(r, ctx, p, prog, plan, &vo); /* warm: builtins, reference compile */
        kr_report_free(r);
        double best = 1e9, best2 = 1e9;
        for (int rep = 0; rep < 5; rep++) {
            double t0 = kr__now();
            kr_report_new(&r);
            kr_verify(r, ctx, p, prog, plan, &vo);
            double dt = kr__now() - t0;
            best = dt < best ? dt : best;
            kr_report_free(r);
        }
        vo.seeds_per_case = 2;
        for (int rep = 0; rep < 3; rep++) {
            double t0 = kr__now();
            kr_report_new(&r);
            kr_verify(r, ctx, p, prog, plan, &vo);
            double dt = kr__now() - t0;
            best2 = dt < best2 ? dt : best2;
            kr_report_free(r);
        }
        kr_bench_options bo;
        kr_bench_options_init(&bo, KR_BENCH_OPTIONS_VERSION, KR_BENCH_FAST);
        bo.flags = KR_BENCH_NO_CHECK;
        kr_report_new(&r); /* a fresh report: kr_benchmark adds to an existing one */
        kr_benchmark(r, ctx, p, prog, plan, &bo, NULL);
        double cand = 0, ref = 0;
        kr_report_get(&cand, r, "time_us");
        kr_report_get(&ref, r, "baseline_us");
        kr_report_free(r);
        double kernels = (2 * cand + ref) * 1e-3;
        printf("| %.0f | %.2f | %.3f | %.2f | %.2f |\n", sizes[i] * 4 / 1048576.0, best * 1e3,
               kernels, best * 1e3 - kernels, best2 * 1e3);
        kr_plan_free(plan);
        kr_program_free(prog);
        kr_problem_free(p);
    }
    kr_context_free(ctx);
    return 0;
}
