/* bench/timing: libkreward's benchmark against the alternatives, in one run.
 *
 * For kernels from about 1 us to 10 ms (copy, row reduction, fp32 GEMM) each
 * row gives: kr_benchmark's median (fast preset), the CUPTI kernel duration
 * of plain launches under the same cold-L2 conditions (the ground truth), a
 * plain per-call event pair around one launch, and the error of both against
 * CUPTI; the run-to-run coefficient of variation of kr's median over 10
 * benchmark calls; and the wall time of one fast candidate+baseline call.
 * Then the L2 flush effect on a kernel reading 40 MB twice.
 * (triton.testing.do_bench is compared in bench/timing_vs_do_bench.py.) */
#include <kreward/kreward.h>

#include "common/clock.h"
#include "run/engine.h"
#include "compile/program_impl.h"
#include "common/stats.h"
#include "driver/trace.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static kr_context *ctx;

typedef struct {
    const char *label, *problem, *source;
} row;

#define P1(N, extra)                                                                          \
    "{\"name\": \"p\", \"dims\": [\"N\"], \"cases\": [{\"N\": " N "}],"                         \
    " \"tensors\": [{\"name\": \"a\", \"dtype\": \"f32\", \"shape\": [\"N\"], \"role\": \"in\"}," \
    "  {\"name\": \"c\", \"dtype\": \"f32\", \"shape\": [\"N\"], \"role\": \"out\"}]," extra     \
    " \"reference\": {\"golden\": true}}"
#define COPY "// kreward: launch k grid=(cdiv(N,256)) block=(256) args=(a, c, N)\n"              \
    "extern \"C\" __global__ void k(const float* a, float* c, long long n) {\n"                \
    "  long long i = blockIdx.x * 256ll + threadIdx.x; if (i < n) c[i] = a[i]; }\n"
#define ROWS "{\"name\": \"r\", \"dims\": [\"R\", \"C\"], \"cases\": [{\"R\": 4096, \"C\": 1024}]," \
    " \"tensors\": [{\"name\": \"x\", \"dtype\": \"f32\", \"shape\": [\"R\", \"C\"], \"role\": \"in\"}," \
    "  {\"name\": \"y\", \"dtype\": \"f32\", \"shape\": [\"R\"], \"role\": \"out\"}], \"reference\": {\"golden\": true}}"
#define ROWSUM "// kreward: launch k grid=(R) block=(256) args=(x, y, C)\n"                       \
    "extern \"C\" __global__ void k(const float* x, float* y, int c) {\n"                        \
    "  __shared__ float s[256]; float t = 0;\n"                                                  \
    "  for (int j = threadIdx.x; j < c; j += 256) t += x[(long long)blockIdx.x * c + j];\n"      \
    "  s[threadIdx.x] = t; __syncthreads();\n"                                                   \
    "  for (int w = 128; w; w >>= 1) { if (threadIdx.x < w) s[threadIdx.x] += s[threadIdx.x + w]; __syncthreads(); }\n" \
    "  if (!threadIdx.x) y[blockIdx.x] = s[0]; }\n"
#define GEMM(n) "{\"name\": \"g\", \"dims\": [\"N\"], \"cases\": [{\"N\": " n "}],"               \
    " \"tensors\": [{\"name\": \"a\", \"dtype\": \"f32\", \"shape\": [\"N\", \"N\"], \"role\": \"in\"}," \
    "  {\"name\": \"b\", \"dtype\": \"f32\", \"shape\": [\"N\", \"N\"], \"role\": \"in\"},"        \
    "  {\"name\": \"c\", \"dtype\": \"f32\", \"shape\": [\"N\", \"N\"], \"role\": \"out\"}], \"reference\": {\"golden\": true}}"
#define TILED "// kreward: launch k grid=(cdiv(N,16), cdiv(N,16)) block=(16, 16) args=(a, b, c, N)\n" \
    "extern \"C\" __global__ void k(const float* a, const float* b, float* c, int n) {\n"         \
    "  __shared__ float As[16][16], Bs[16][16];\n"                                                \
    "  int r = blockIdx.y * 16 + threadIdx.y, col = blockIdx.x * 16 + threadIdx.x; float acc = 0;\n" \
    "  for (int t = 0; t < n; t += 16) {\n"                                                       \
    "    As[threadIdx.y][threadIdx.x] = (r < n && t + threadIdx.x < n) ? a[(long long)r * n + t + threadIdx.x] : 0.f;\n" \
    "    Bs[threadIdx.y][threadIdx.x] = (col < n && t + threadIdx.y < n) ? b[(long long)(t + threadIdx.y) * n + col] : 0.f;\n" \
    "    __syncthreads();\n"                                                                      \
    "    for (int k = 0; k < 16; k++) acc += As[threadIdx.y][k] * Bs[k][threadIdx.x];\n"          \
    "    __syncthreads(); }\n"                                                                    \
    "  if (r < n && col < n) c[(long long)r * n + col] = acc; }\n"
/* two passes over the input, nothing written: all of it can sit in L2 */
#define TWICE "// kreward: launch k grid=(cdiv(N,256)) block=(256) args=(a, c, N)\n"             \
    "extern \"C\" __global__ void k(const float* a, float* c, long long n) {\n"                \
    "  long long i = blockIdx.x * 256ll + threadIdx.x;\n"                                         \
    "  long long h = n >> 1;\n"                                                                  \
    "  if (i < n) { float v = a[i] + a[i < h ? i + h : i - h]; if (v == 12345.f) c[0] = v; } }\n"

static const row rows[] = {
    {"copy 1K floats", P1("1024", ""), COPY},
    {"copy 256K floats", P1("262144", ""), COPY},
    {"copy 4M floats", P1("4194304", ""), COPY},
    {"row sum 4096x1024", ROWS, ROWSUM},
    {"copy 64M floats", P1("67108864", ""), COPY},
    {"fp32 GEMM 1024", GEMM("1024"), TILED},
    {"fp32 GEMM 2048", GEMM("2048"), TILED},
};

typedef struct {
    kr_problem *p;
    kr_program *prog;
    kr_plan *plan;
} item;

static int load(const row *r, item *it)
{
    if (kr_problem_parse(&it->p, ctx, r->problem, strlen(r->problem), "p.json", NULL) != KR_OK ||
        kr_compile(&it->prog, ctx, r->source, 0, NULL) != KR_OK ||
        kr_plan_from_source(&it->plan, ctx, r->source, 0, "c.cu") != KR_OK) {
        fprintf(stderr, "%s: %s\n", r->label, kr_context_errmsg(ctx));
        return -1;
    }
    return 0;
}

static int failures; /* benchmarks that gave no time, rows that did not load: exit 1 */

static double kr_median(item *it, uint32_t preset, uint32_t flags, double *wall, uint32_t sets)
{
    kr_bench_options o;
    kr_bench_options_init(&o, KR_BENCH_OPTIONS_VERSION, preset);
    o.flags = flags | KR_BENCH_NO_CHECK;
    o.buffer_sets = sets;
    kr_report *r = NULL;
    kr_report_new(&r);
    double t0 = kr__now();
    int rc = kr_benchmark(r, ctx, it->p, it->prog, it->plan, &o, NULL);
    if (wall)
        *wall = kr__now() - t0;
    double v = NAN;
    if (rc == KR_OK)
        kr_report_get(&v, r, "time_us");
    else
        fprintf(stderr, "benchmark: %s\n", kr_context_errmsg(ctx));
    if (!(v > 0)) /* a table of nan is no measurement (it was, from 1aee979 to 90d25b7) */
        failures++;
    kr_report_free(r);
    return v;
}

/* Plain launches on cold L2: per launch a CUPTI duration and an event pair. */
static void plain(item *it, double *cupti_us, double *event_us)
{
    enum { REPS = 50 };
    const kr__cuda_api *cu = kr__cuda();
    kr__engine *g = kr__engine_of(ctx);
    const kr_problem *p = it->p;
    CUdeviceptr bufs[8] = {0}, flush;
    size_t nt = kr_problem_tensor_count(p);
    for (size_t t = 0; t < nt; t++) {
        cu->cuMemAlloc(&bufs[t], kr_problem_tensor_bytes(p, t, 0));
        cu->cuMemsetD32(bufs[t], 0x3f800000u, kr_problem_tensor_bytes(p, t, 0) / 4);
    }
    size_t flush_bytes = (size_t)g->l2_bytes * 2;
    cu->cuMemAlloc(&flush, flush_bytes);
    /* the plan's single launch, by hand */
    kr_plan_check(ctx, it->plan, p, it->prog);
    const kr__kernel *k = &it->prog->kernels[0];
    int64_t dims[2] = {kr_problem_case_dim(p, 0, 0), kr_problem_dim_count(p) > 1 ? kr_problem_case_dim(p, 0, 1) : 0};
    long long n64 = dims[0];
    int n32 = (int)(kr_problem_dim_count(p) > 1 ? dims[1] : dims[0]);
    void *params[4];
    unsigned grid[2] = {1, 1}, block[2] = {256, 1};
    if (nt == 2 && kr_problem_dim_count(p) == 1) {
        params[0] = &bufs[0]; params[1] = &bufs[1]; params[2] = &n64;
        grid[0] = (unsigned)((n64 + 255) / 256);
    } else if (nt == 2) {
        params[0] = &bufs[0]; params[1] = &bufs[1]; params[2] = &n32;
        grid[0] = (unsigned)dims[0];
    } else {
        n32 = (int)dims[0];
        params[0] = &bufs[0]; params[1] = &bufs[1]; params[2] = &bufs[2]; params[3] = &n32;
        grid[0] = grid[1] = (unsigned)((n32 + 15) / 16);
        block[0] = block[1] = 16;
    }
    CUevent e0, e1;
    cu->cuEventCreate(&e0, 0);
    cu->cuEventCreate(&e1, 0);
    double ev[REPS];
    kr__trace_discard();
    for (int i = 0; i < REPS; i++) {
        cu->cuMemsetD32Async(flush, (unsigned)i, flush_bytes / 4, g->stream);
        cu->cuStreamSynchronize(g->stream);
        cu->cuEventRecord(e0, g->stream);
        cu->cuLaunchKernel(k->fn, grid[0], grid[1], 1, block[0], block[1], 1, 0, g->stream, params, NULL);
        cu->cuEventRecord(e1, g->stream);
        cu->cuStreamSynchronize(g->stream);
        float ms;
        cu->cuEventElapsedTime(&ms, e0, e1);
        ev[i] = ms * 1e3;
    }
    kr__kernel_record *recs;
    size_t nrec;
    double dur[REPS];
    size_t nd = 0;
    if (kr__trace_collect(&recs, &nrec) == 0) {
        for (size_t i = 0; i < nrec && nd < REPS; i++)
            if (recs[i].marker == 0)
                dur[nd++] = (double)(recs[i].end - recs[i].start) * 1e-3;
        free(recs);
    }
    kr__summary s;
    kr__summarize(ev, REPS, &s);
    *event_us = s.median;
    kr__summarize(dur, nd, &s);
    *cupti_us = s.median;
    for (size_t t = 0; t < nt; t++)
        cu->cuMemFree(bufs[t]);
    cu->cuMemFree(flush);
    cu->cuEventDestroy(e0);
    cu->cuEventDestroy(e1);
}

int main(void)
{
    if (kr_context_new(&ctx, NULL) != KR_OK || !kr_context_has_device(ctx)) {
        printf("bench_timing: needs a GPU (skipped)\n");
        return 0;
    }
    kr__engine *g;
    if (kr__engine_get(ctx, &g) != KR_OK || !kr__trace_active()) {
        printf("bench_timing: needs CUPTI tracing (%s)\n", ctx->trace_why);
        return 1;
    }
    printf("Timing accuracy and cost (cold L2; medians in us; errors against the CUPTI duration)\n\n");
    printf("| kernel | CUPTI | kr fast | kr err | event pair | event err | kr CV (10 calls) | fast wall (ms) |\n");
    printf("|---|---|---|---|---|---|---|---|\n");
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        item it = {0};
        if (load(&rows[i], &it) != 0) {
            failures++;
            continue;
        }
        double cupti, event, wall = 0;
        plain(&it, &cupti, &event);
        double meds[10];
        for (int rep = 0; rep < 10; rep++) {
            double w;
            meds[rep] = kr_median(&it, KR_BENCH_FAST, 0, &w, 0);
            wall += w;
        }
        kr__summary s;
        double copy[10];
        memcpy(copy, meds, sizeof meds);
        kr__summarize(copy, 10, &s);
        printf("| %s | %.2f | %.2f | %+.2f | %.2f | %+.2f | %.2f %% | %.1f |\n", rows[i].label, cupti,
               s.median, s.median - cupti, event, event - cupti, 100 * s.noise, wall / 10 * 1e3);
        kr_plan_free(it.plan);
        kr_program_free(it.prog);
        kr_problem_free(it.p);
    }
    /* L2 flush effect: a kernel reading 40 MB (10M floats) twice. Its output
     * is one float, so preparing a sample (regenerating the input, poisoning
     * the output) leaves the input in L2 unless the flush evicts it. */
    item it = {0};
    row twice = {"read 40 MB twice",
                 "{\"name\": \"p\", \"dims\": [\"N\"], \"cases\": [{\"N\": 10000000}],"
                 " \"tensors\": [{\"name\": \"a\", \"dtype\": \"f32\", \"shape\": [\"N\"], \"role\": \"in\"},"
                 "  {\"name\": \"c\", \"dtype\": \"f32\", \"shape\": [1], \"role\": \"out\"}],"
                 " \"reference\": {\"golden\": true}}",
                 TWICE};
    if (load(&twice, &it) == 0) {
        /* one buffer set, so a warm run finds its own input in L2 */
        double cold = kr_median(&it, KR_BENCH_FAST, 0, NULL, 1);
        double warm = kr_median(&it, KR_BENCH_FAST, KR_BENCH_NO_FLUSH, NULL, 1);
        printf("\nL2 flush effect, kernel reading 40 MB twice: cold %.2f us, warm %.2f us "
               "(warm is %.0f %% faster)\n", cold, warm, 100 * (cold / warm - 1));
        kr_plan_free(it.plan);
        kr_program_free(it.prog);
        kr_problem_free(it.p);
    } else {
        failures++;
    }
    kr_context_free(ctx);
    if (failures)
        fprintf(stderr, "bench_timing: %d measurement(s) failed\n", failures);
    return failures ? 1 : 0;
}
