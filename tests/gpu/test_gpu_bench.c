/* gpu: kr_benchmark measures what it should and cannot be fooled easily. */
#include "gpu_test.h"

#include "compile/program_impl.h"
#include "run/engine.h"
#include "bench/baseline_memo.h"

#include <math.h>
#include <stdlib.h>

static kr_context *g_ctx;

#define SPEC(N, bytes, ref_body)                                                               \
    "{\"name\": \"p\", \"dims\": [\"N\"], \"cases\": [{\"N\": " N "}],"                          \
    " \"tensors\": [{\"name\": \"a\", \"dtype\": \"f32\", \"shape\": [\"N\"], \"role\": \"in\"},"  \
    "  {\"name\": \"c\", \"dtype\": \"f32\", \"shape\": [\"N\"], \"role\": \"out\"}],"             \
    " \"bytes\": \"" bytes "\","                                                                 \
    " \"reference\": {\"cuda\": \"// kreward: launch k grid=(cdiv(N,256)) block=(256) args=(a, c, N)\\n" \
    "extern \\\"C\\\" __global__ void k(const float* a, float* c, long long n) {"               \
    " long long i = blockIdx.x * 256ll + threadIdx.x; if (i < n) " ref_body "; }\"}}"

static kr_problem *problem(const char *text)
{
    kr_problem *p = NULL;
    if (kr_problem_parse(&p, g_ctx, text, strlen(text), "p.json", NULL) != KR_OK)
        fail_msg("%s", kr_context_errmsg(g_ctx));
    return p;
}

static kr_report *bench(kr_problem *p, const char *src, const kr_bench_options *o,
                        const kr_baseline *base)
{
    kr_program *prog;
    kr_plan *plan;
    if (kr_compile(&prog, g_ctx, src, 0, NULL) != KR_OK)
        fail_msg("%s\n%s", kr_context_errmsg(g_ctx), kr_context_errdetail(g_ctx));
    assert_int_equal(kr_plan_from_source(&plan, g_ctx, src, 0, "c.cu"), KR_OK);
    kr_report *r = NULL;
    int rc = kr_benchmark((r = test_report()), g_ctx, p, prog, plan, o, base);
    if (rc != KR_OK)
        fail_msg("benchmark: %s", kr_context_errmsg(g_ctx));
    char *json = NULL;
    kr_report_json(&json, r);
    char *t = strstr(json, "\"timing\"");
    printf("%s\n", t ? t : json);
    kr_free(json);
    kr_plan_free(plan);
    kr_program_free(prog);
    return r;
}

static double metric(kr_report *r, const char *key)
{
    double v = NAN;
    if (kr_report_get(&v, r, key) != KR_OK)
        fail_msg("no metric %s", key);
    return v;
}

#define COPY "// kreward: launch k grid=(cdiv(N,256)) block=(256) args=(a, c, N)\n"                 \
    "extern \"C\" __global__ void k(const float* a, float* c, long long n) {\n"                    \
    "  long long i = blockIdx.x * 256ll + threadIdx.x; if (i < n) c[i] = a[i]; }\n"

static void spin_of_known_length(void **state)
{
    (void)state;
    kr_problem *p = problem(SPEC("1024", "8*N", "c[i] = a[i]"));
    const char *spin =
        "// kreward: launch k grid=(1) block=(32) args=(a, c, N)\n"
        "extern \"C\" __global__ void k(const float* a, float* c, long long n) {\n"
        "  long long t0 = clock64(); while (clock64() - t0 < 200000) { }\n"
        "  c[threadIdx.x] = a[threadIdx.x]; }\n";
    kr_bench_options o;
    kr_bench_options_init(&o, KR_BENCH_OPTIONS_VERSION, KR_BENCH_FAST);
    o.flags = KR_BENCH_NO_CHECK;
    kr_report *r = bench(p, spin, &o, NULL);
    double us = metric(r, "time_us"), mhz = metric(r, "sm_clock_mhz");
    double expected = 200000.0 / mhz;
    printf("spin: %.2f us measured, %.2f us expected at %.0f MHz\n", us, expected, mhz);
    assert_true(fabs(us - expected) < 0.05 * expected + 2.0);
    kr_report_free(r);
    kr_problem_free(p);
}

static void flush_makes_reads_cold(void **state)
{
    (void)state;
    /* 2 x 20 MB fits the 60 MB L2: warm reads hit it, flushed ones cannot */
    kr_problem *p = problem(SPEC("5000000", "8*N", "c[i] = a[i]"));
    kr_bench_options o;
    kr_bench_options_init(&o, KR_BENCH_OPTIONS_VERSION, KR_BENCH_FAST);
    o.flags = KR_BENCH_NO_CHECK;
    o.buffer_sets = 1;
    kr_report *cold = bench(p, COPY, &o, NULL);
    o.flags |= KR_BENCH_NO_FLUSH;
    kr_report *warm = bench(p, COPY, &o, NULL);
    double c = metric(cold, "time_us"), w = metric(warm, "time_us");
    printf("copy 20 MB: cold %.2f us, warm %.2f us\n", c, w);
    assert_true(c > 1.2 * w);
    kr_report_free(cold);
    kr_report_free(warm);
    kr_problem_free(p);
}

/* The next sample's values are made behind the current call (bench_sample.c)
 * and the flush still runs after them: reads stay as cold as when each
 * sample made its own values right before its call (KR_BENCH_AHEAD=0), on
 * four sets (the fast preset's), and colder than warm reads by as much as
 * flush_makes_reads_cold finds. */
static void values_made_ahead_stay_cold(void **state)
{
    (void)state;
    kr_problem *p = problem(SPEC("5000000", "8*N", "c[i] = a[i]"));
    kr_bench_options o;
    kr_bench_options_init(&o, KR_BENCH_OPTIONS_VERSION, KR_BENCH_FAST);
    o.flags = KR_BENCH_NO_CHECK;
    kr_report *ahead = bench(p, COPY, &o, NULL);
    setenv("KR_BENCH_AHEAD", "0", 1);
    kr_report *own = bench(p, COPY, &o, NULL);
    unsetenv("KR_BENCH_AHEAD");
    o.flags |= KR_BENCH_NO_FLUSH;
    kr_report *warm = bench(p, COPY, &o, NULL);
    double a = metric(ahead, "time_us"), c = metric(own, "time_us"), w = metric(warm, "time_us");
    printf("copy 20 MB on 4 sets: made ahead %.2f us, made before the call %.2f us, warm %.2f us\n",
           a, c, w);
    assert_true(a > 0.95 * c && a < 1.05 * c);
    assert_true(a > 1.2 * w);
    kr_report_free(ahead);
    kr_report_free(own);
    kr_report_free(warm);
    kr_problem_free(p);
}

static void kernel_against_itself(void **state)
{
    (void)state;
    kr_problem *p = problem(SPEC("4000000", "8*N", "c[i] = a[i]"));
    kr_bench_options o;
    kr_bench_options_init(&o, KR_BENCH_OPTIONS_VERSION, KR_BENCH_PRECISE);
    o.max_time_s = 2;
    kr_program *same;
    kr_plan *plan;
    assert_int_equal(kr_compile(&same, g_ctx, COPY, 0, NULL), KR_OK);
    assert_int_equal(kr_plan_from_source(&plan, g_ctx, COPY, 0, "c.cu"), KR_OK);
    kr_baseline base = KR_BASELINE_INIT;
    base.kind = KR_BASELINE_PROGRAM;
    base.program = same;
    base.plan = plan;
    base.name = "itself";
    kr_report *r = bench(p, COPY, &o, &base);
    double s = metric(r, "speedup"), lo = metric(r, "speedup_low"), hi = metric(r, "speedup_high");
    printf("self speedup %.4f [%.4f, %.4f]\n", s, lo, hi);
    assert_true(lo <= 1.0 && hi >= 1.0);
    assert_true(fabs(s - 1) < 0.05);
    assert_true(metric(r, "timed_checks") >= 1);
    assert_false(kr_report_flags(r) & KR_FLAG_TIMED_OUTPUT_WRONG);
    kr_report_free(r);
    kr_plan_free(plan);
    kr_program_free(same);
    kr_problem_free(p);
}

/* A golden problem (outputs from a callback) benchmarked unchecked and
 * against no reference kernel needs no callback: nothing opens the
 * reference (bench_timing's problems). Checked, it still asks for one. */
static void golden_problem_timed_unchecked(void **state)
{
    (void)state;
    const char *spec = "{\"name\": \"g\", \"dims\": [\"N\"], \"cases\": [{\"N\": 1048576}],"
                       " \"tensors\": [{\"name\": \"a\", \"dtype\": \"f32\", \"shape\": [\"N\"], \"role\": \"in\"},"
                       "  {\"name\": \"c\", \"dtype\": \"f32\", \"shape\": [\"N\"], \"role\": \"out\"}],"
                       " \"reference\": {\"golden\": true}}";
    kr_problem *p = problem(spec);
    kr_bench_options o;
    kr_bench_options_init(&o, KR_BENCH_OPTIONS_VERSION, KR_BENCH_FAST);
    o.flags = KR_BENCH_NO_CHECK;
    kr_report *r = bench(p, COPY, &o, NULL);
    assert_true(metric(r, "time_us") > 0);
    kr_report_free(r);
    kr_program *prog;
    kr_plan *plan;
    assert_int_equal(kr_compile(&prog, g_ctx, COPY, 0, NULL), KR_OK);
    assert_int_equal(kr_plan_from_source(&plan, g_ctx, COPY, 0, "c.cu"), KR_OK);
    kr_bench_options_init(&o, KR_BENCH_OPTIONS_VERSION, KR_BENCH_FAST);
    kr_report *checked = test_report();
    assert_int_not_equal(kr_benchmark(checked, g_ctx, p, prog, plan, &o, NULL), KR_OK);
    assert_contains(kr_context_errmsg(g_ctx), "golden callback");
    kr_report_free(checked);
    kr_plan_free(plan);
    kr_program_free(prog);
    kr_problem_free(p);
}

/* Candidates of one problem share the reference baseline's samples
 * (bench/baseline_memo.h): the second benchmark takes fewer fresh ones and
 * the speedup stays honest; a benchmark whose candidate failed its timed
 * checks adds nothing to the memo (the cheat that would poison it: a wrong
 * candidate whose run disturbed the baseline); KR_BENCH_NO_SHARE and the
 * precise preset share nothing. */
#define WRONG "// kreward: launch k grid=(cdiv(N,256)) block=(256) args=(a, c, N)\n"                \
    "extern \"C\" __global__ void k(const float* a, float* c, long long n) {\n"                   \
    "  long long i = blockIdx.x * 256ll + threadIdx.x; if (i < n) c[i] = a[i] + 1.0f; }\n"

static void baseline_samples_are_shared(void **state)
{
    (void)state;
    /* a size of its own: no other test filled this problem's memo */
    kr_problem *p = problem(SPEC("3000017", "8*N", "c[i] = a[i]"));
    kr_bench_options o;
    kr_bench_options_init(&o, KR_BENCH_OPTIONS_VERSION, KR_BENCH_FAST);
    kr_report *first = bench(p, COPY, &o, NULL);
    double fresh1 = metric(first, "baseline_samples");
    assert_true(metric(first, "baseline_shared_samples") == 0);
    kr_report *second = bench(p, COPY, &o, NULL);
    double shared2 = metric(second, "baseline_shared_samples");
    double s2 = metric(second, "speedup");
    double agreed = metric(second, "baseline_memo_agreed_at");
    printf("first: %.0f baseline samples; second: %.0f of %.0f shared, the memo agreed at fresh "
           "sample %.0f, speedup %.4f\n", fresh1, shared2, metric(second, "baseline_samples"),
           agreed, s2);
    /* the first benchmark's samples, all of them (fewer than the memo holds) */
    assert_true(shared2 == (fresh1 < KR__MEMO_SAMPLES ? fresh1 : KR__MEMO_SAMPLES));
    /* the fresh samples until the memo agreed (one here, or up to
     * min_samples where the first ones missed it by chance) and no more: no warm-up, no
     * periodic ones once they agreed (the candidate's rounds give them
     * their turns) */
    /* moments after the first: a young memo, one fresh sample to compare */
    assert_true(agreed >= KR__MEMO_FRESH_YOUNG && agreed <= 10); /* the fast preset's min_samples */
    assert_true(metric(second, "baseline_samples") - shared2 == agreed);
    assert_true(fabs(s2 - 1) < 0.05); /* the reference's own code against it */
    kr_report *wrong = bench(p, WRONG, &o, NULL);
    assert_true(kr_report_flags(wrong) & KR_FLAG_TIMED_OUTPUT_WRONG);
    kr_report *third = bench(p, COPY, &o, NULL);
    double want = fresh1 + (metric(second, "baseline_samples") - shared2);
    printf("after a wrong candidate: %.0f shared (want %.0f: its samples left out)\n",
           metric(third, "baseline_shared_samples"), want);
    assert_true(metric(third, "baseline_shared_samples") == (want < KR__MEMO_SAMPLES ? want : KR__MEMO_SAMPLES));
    o.flags = KR_BENCH_NO_SHARE;
    kr_report *alone = bench(p, COPY, &o, NULL);
    assert_true(metric(alone, "baseline_shared_samples") == 0);
    kr_bench_options precise;
    kr_bench_options_init(&precise, KR_BENCH_OPTIONS_VERSION, KR_BENCH_PRECISE);
    precise.max_time_s = 1;
    kr_report *prec = bench(p, COPY, &precise, NULL);
    assert_true(metric(prec, "baseline_shared_samples") == 0);
    kr_report_free(first);
    kr_report_free(second);
    kr_report_free(wrong);
    kr_report_free(third);
    kr_report_free(alone);
    kr_report_free(prec);
    kr_problem_free(p);
}

/* The callback launches the real work (a ~1 ms spin) on a side stream and a
 * tiny kernel on the given one: events on the given stream would see
 * microseconds; CUPTI sees the side stream. */
typedef struct {
    CUfunction spin, tiny;
    CUstream side;
} cheat;

static int side_stream_baseline(void *user, void *stream, const uint64_t *tensors, size_t n,
                                char *err, size_t err_size)
{
    (void)n;
    (void)err;
    (void)err_size;
    cheat *c = user;
    long long cycles = 2000000;
    CUdeviceptr a = tensors[0], out = tensors[1];
    void *spin_params[] = {&cycles, &a};
    void *tiny_params[] = {&a, &out};
    kr__cuda()->cuLaunchKernel(c->spin, 1, 1, 1, 32, 1, 1, 0, c->side, spin_params, NULL);
    kr__cuda()->cuLaunchKernel(c->tiny, 1, 1, 1, 32, 1, 1, 0, (CUstream)stream, tiny_params, NULL);
    return 0;
}

static void side_stream_work_is_seen(void **state)
{
    (void)state;
    kr_problem *p = problem(SPEC("1024", "8*N", "c[i] = a[i]"));
    kr_program *helpers;
    assert_int_equal(kr_compile(&helpers, g_ctx,
        "extern \"C\" __global__ void spin(long long cycles, float* a) {\n"
        "  long long t0 = clock64(); while (clock64() - t0 < cycles) { } if (a[0] == 12345.f) a[1] = 0; }\n"
        "extern \"C\" __global__ void tiny(const float* a, float* c) { c[threadIdx.x] = a[threadIdx.x]; }\n",
        0, NULL), KR_OK);
    cheat c;
    c.spin = helpers->kernels[kr_program_find_kernel(helpers, "spin")].fn;
    c.tiny = helpers->kernels[kr_program_find_kernel(helpers, "tiny")].fn;
    assert_int_equal(kr__cuda()->cuStreamCreate(&c.side, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    kr_baseline base = KR_BASELINE_INIT;
    base.kind = KR_BASELINE_CALLBACK;
    base.fn = side_stream_baseline;
    base.user = &c;
    base.name = "hides work on a side stream";
    kr_bench_options o;
    kr_bench_options_init(&o, KR_BENCH_OPTIONS_VERSION, KR_BENCH_FAST);
    o.flags = KR_BENCH_NO_CHECK;
    kr_report *r = bench(p, COPY, &o, &base);
    double base_us = metric(r, "baseline_us"), ev = metric(r, "baseline_event_us");
    printf("side-stream baseline: %.1f us (its events on the given stream: %.1f us), flags 0x%llx\n",
           base_us, ev, (unsigned long long)kr_report_flags(r));
    assert_true(kr_report_flags(r) & KR_FLAG_SIDE_STREAM);
    assert_true(base_us > 500); /* the hidden millisecond is counted */
    kr_report_free(r);
    kr__cuda()->cuStreamDestroy(c.side);
    kr_program_free(helpers);
    kr_problem_free(p);
}

static void skipping_reads_is_implausible(void **state)
{
    (void)state;
    /* the problem says 6 GiB must move; the kernel writes 1 GiB only */
    kr_problem *p = problem(SPEC("268435456", "24*N", "c[i] = a[i]"));
    const char *lazy =
        "// kreward: launch k grid=(cdiv(N,256)) block=(256) args=(a, c, N)\n"
        "extern \"C\" __global__ void k(const float* a, float* c, long long n) {\n"
        "  long long i = blockIdx.x * 256ll + threadIdx.x; if (i < n) c[i] = 1.0f; }\n";
    kr_bench_options o;
    kr_bench_options_init(&o, KR_BENCH_OPTIONS_VERSION, KR_BENCH_FAST);
    o.flags = KR_BENCH_NO_CHECK;
    o.buffer_sets = 1;
    kr_report *r = bench(p, lazy, &o, NULL);
    printf("lazy: %.1f us, %.0f GB/s claimed vs peak %.0f GB/s\n", metric(r, "time_us"),
           metric(r, "achieved_gbps"), metric(r, "peak_gbps"));
    assert_true(kr_report_flags(r) & KR_FLAG_IMPLAUSIBLE_SPEED);
    kr_report_free(r);
    kr_problem_free(p);
}

static void graph_mode_and_timed_checks(void **state)
{
    (void)state;
    kr_problem *p = problem(SPEC("100003", "8*N", "c[i] = a[i]"));
    kr_bench_options o;
    kr_bench_options_init(&o, KR_BENCH_OPTIONS_VERSION, KR_BENCH_FAST);
    o.flags = KR_BENCH_GRAPH;
    o.check_fraction = 1.0;
    kr_report *r = bench(p, COPY, &o, NULL);
    assert_false(kr_report_flags(r) & KR_FLAG_TIMED_OUTPUT_WRONG);
    assert_true(metric(r, "timed_checks") >= metric(r, "time_samples"));
    kr_report_free(r);
    /* a kernel that is wrong on its timed calls (here: on every call, and
     * kr_benchmark alone verifies nothing first): caught while timed */
    const char *wrong =
        "// kreward: launch k grid=(cdiv(N,256)) block=(256) args=(a, c, N)\n"
        "extern \"C\" __global__ void k(const float* a, float* c, long long n) {\n"
        "  long long i = blockIdx.x * 256ll + threadIdx.x; if (i < n) c[i] = 2 * a[i]; }\n";
    o.flags = 0;
    r = bench(p, wrong, &o, NULL);
    assert_true(kr_report_flags(r) & KR_FLAG_TIMED_OUTPUT_WRONG);
    assert_int_equal(kr_report_verdict(r), KR_VERDICT_INCORRECT);
    kr_report_free(r);
    /* a kernel that would be wrong on every other call, by a __device__
     * counter: every call starts from the module's state at load, so the
     * counter is 0 on every call and it is never wrong */
    const char *sneaky =
        "// kreward: launch k grid=(cdiv(N,256)) block=(256) args=(a, c, N)\n"
        "// kreward: launch tick grid=(1) block=(1) args=()\n"
        "__device__ unsigned calls;\n"
        "extern \"C\" __global__ void k(const float* a, float* c, long long n) {\n"
        "  long long i = blockIdx.x * 256ll + threadIdx.x;\n"
        "  if (i < n) c[i] = (calls & 1) ? 0.f : a[i]; }\n"
        "extern \"C\" __global__ void tick() { calls++; }\n";
    r = bench(p, sneaky, &o, NULL);
    assert_false(kr_report_flags(r) & KR_FLAG_TIMED_OUTPUT_WRONG);
    assert_true(metric(r, "timed_checks") >= 3);
    kr_report_free(r);
    kr_problem_free(p);
}

/* A timed call that changes its inputs is caught by the checked calls: the
 * inputs' hash after the call against the hash of the same seed's inputs as
 * the reference regenerates them (nothing is hashed before any call). The
 * honest copy beside it is not flagged: the two hashes agree bit for bit. */
static void timed_calls_that_write_inputs(void **state)
{
    (void)state;
    kr_problem *p = problem(SPEC("100003", "8*N", "c[i] = a[i]"));
    kr_bench_options o;
    kr_bench_options_init(&o, KR_BENCH_OPTIONS_VERSION, KR_BENCH_FAST);
    kr_report *r = bench(p, COPY, &o, NULL);
    assert_false(kr_report_flags(r) & (KR_FLAG_INPUT_MUTATED | KR_FLAG_TIMED_OUTPUT_WRONG));
    assert_true(metric(r, "timed_checks") >= 3);
    kr_report_free(r);
    const char *writer =
        "// kreward: launch k grid=(cdiv(N,256)) block=(256) args=(a, c, N)\n"
        "extern \"C\" __global__ void k(float* a, float* c, long long n) {\n"
        "  long long i = blockIdx.x * 256ll + threadIdx.x;\n"
        "  if (i < n) { c[i] = a[i]; a[i] = a[i] + 1.0f; } }\n";
    r = bench(p, writer, &o, NULL);
    assert_true(kr_report_flags(r) & KR_FLAG_INPUT_MUTATED);
    assert_false(kr_report_flags(r) & KR_FLAG_TIMED_OUTPUT_WRONG);
    assert_int_equal(kr_report_verdict(r), KR_VERDICT_INCORRECT);
    kr_report_free(r);
    kr_problem_free(p);
}

/* State outside the module's globals: a __constant__ written through its
 * generic address, and shared memory, which keeps what the last block on
 * an SM left. Each kernel below is wrong on every other call when its
 * channel carries a counter from call to call; with the constant banks
 * restored and shared memory scrubbed before every call, never. */
static void no_state_in_constants_or_shared_memory(void **state)
{
    (void)state;
    kr_problem *p = problem(SPEC("100003", "8*N", "c[i] = a[i]"));
    kr_bench_options o;
    kr_bench_options_init(&o, KR_BENCH_OPTIONS_VERSION, KR_BENCH_FAST);
    o.check_fraction = 1.0;
    const char *constant_bank =
        "// kreward: launch k grid=(cdiv(N,256)) block=(256) args=(a, c, N)\n"
        "// kreward: launch tick grid=(1) block=(1) args=()\n"
        "__constant__ unsigned calls;\n"
        "extern \"C\" __global__ void k(const float* a, float* c, long long n) {\n"
        "  long long i = blockIdx.x * 256ll + threadIdx.x;\n"
        "  if (i < n) c[i] = (calls & 1) ? 0.f : a[i]; }\n"
        "extern \"C\" __global__ void tick() {\n"
        "  unsigned long long q; asm(\"cvta.const.u64 %0, calls;\" : \"=l\"(q));\n"
        "  asm volatile(\"st.global.u32 [%0], %1;\" :: \"l\"(q), \"r\"(calls + 1) : \"memory\"); }\n";
    kr_report *r = bench(p, constant_bank, &o, NULL);
    assert_false(kr_report_flags(r) & KR_FLAG_TIMED_OUTPUT_WRONG);
    assert_true(metric(r, "timed_checks") >= 3);
    kr_report_free(r);
    /* every block leaves a magic word and a count behind in shared memory;
     * a block that finds the magic word with an odd count writes zeros */
    const char *shared_residue =
        "// kreward: launch k grid=(cdiv(N,256)) block=(256) smem=4096 args=(a, c, N)\n"
        "extern \"C\" __global__ void k(const float* a, float* c, long long n) {\n"
        "  extern __shared__ unsigned s[]; __shared__ unsigned seen;\n"
        "  if (threadIdx.x == 0) { seen = s[1022] == 0x5eedc0deu ? s[1023] : 0;\n"
        "    s[1022] = 0x5eedc0deu; s[1023] = seen + 1; }\n"
        "  __syncthreads();\n"
        "  long long i = blockIdx.x * 256ll + threadIdx.x;\n"
        "  if (i < n) c[i] = (seen & 1) ? 0.f : a[i]; }\n";
    r = bench(p, shared_residue, &o, NULL);
    assert_false(kr_report_flags(r) & KR_FLAG_TIMED_OUTPUT_WRONG);
    assert_true(metric(r, "timed_checks") >= 3);
    kr_report_free(r);
    kr_problem_free(p);
}

/* Bytes past a global, inside its section: a one-element __device__ array
 * whose c[32] keeps a count (128 bytes in: the alignment padding before
 * `after`, the next 256-byte-aligned variable of its section, in no
 * symbol), and a __constant__ whose generic address plus 64 bytes keeps
 * another (its bank's padding before `later`); the symbols themselves never
 * change. Wrong on every other call when either count survives a call; the
 * module's sections are restored whole before every call, so never. What
 * still escapes, and is not tested here: a write beyond the module's
 * sections (c[64] here would be past the 260-byte section: padding between
 * sections, or another module's data, which no restore may touch). */
#define SLACK_COUNTER                                                                         \
    "// kreward: launch k grid=(cdiv(N,256)) block=(256) args=(a, c, N)\n"                     \
    "// kreward: launch tick grid=(1) block=(1) args=()\n"                                     \
    "__device__ __align__(256) unsigned c[1];\n"                                              \
    "__device__ __align__(256) unsigned after[1];\n"                                          \
    "__constant__ __align__(256) unsigned calls;\n"                                           \
    "__constant__ __align__(256) unsigned later = 2;\n"                                       \
    "__device__ volatile unsigned *past_calls() {\n"                                          \
    "  unsigned long long q; asm(\"cvta.const.u64 %0, calls;\" : \"=l\"(q));\n"               \
    "  return (volatile unsigned *)q + 16; }\n"                                               \
    "extern \"C\" __global__ void k(const float* a, float* c_out, long long n) {\n"           \
    "  long long i = blockIdx.x * 256ll + threadIdx.x;\n"                                     \
    "  unsigned odd = (((volatile unsigned *)c)[32] | *past_calls() | after[0] | later) & 1;\n" \
    "  if (i < n) c_out[i] = odd ? 0.f : a[i]; }\n"                                           \
    "extern \"C\" __global__ void tick() {\n"                                                 \
    "  ((volatile unsigned *)c)[32] += 1; *past_calls() += 1; }\n"

/* A word of device memory, read by a kernel: the H200's driver refuses
 * copies from a section's padding (it registers each variable alone), and
 * a kernel's load reaches it as a candidate's does. */
static unsigned read_u32(CUdeviceptr at)
{
    static kr_program *peek;
    const kr__cuda_api *cu = kr__cuda();
    if (!peek)
        assert_int_equal(kr_compile(&peek, g_ctx,
                                    "extern \"C\" __global__ void peek(const volatile unsigned *p, "
                                    "unsigned *out) { *out = *p; }\n",
                                    0, NULL),
                         KR_OK);
    CUdeviceptr out = 0;
    unsigned v = 0;
    assert_int_equal(cu->cuMemAlloc(&out, sizeof v), CUDA_SUCCESS);
    void *params[] = {&at, &out};
    CUresult r = cu->cuLaunchKernel(peek->kernels[kr_program_find_kernel(peek, "peek")].fn, 1, 1,
                                    1, 1, 1, 1, 0, NULL, params, NULL);
    if (r == CUDA_SUCCESS)
        r = cu->cuMemcpyDtoH(&v, out, sizeof v);
    cu->cuMemFree(out);
    if (r != CUDA_SUCCESS)
        fail_msg("reading 0x%llx: CUresult %d", (unsigned long long)at, (int)r);
    return v;
}

/* the global `name` of prog's image */
static const kr__image_global *image_global(const kr_program *prog, const char *name)
{
    for (size_t i = 0; i < prog->facts.num_globals; i++)
        if (!strcmp(prog->facts.globals[i].name, name))
            return &prog->facts.globals[i];
    fail_msg("no global '%s' in the image", name);
    return NULL;
}

/* bytes `delta` past the start of `name` are in its section and in no
 * symbol of it, as the image lays the section out */
static void expect_padding_after(const kr_program *prog, const char *name, uint64_t delta)
{
    const kr__image_global *g = image_global(prog, name);
    uint64_t at = g->offset + delta, size = 0;
    for (size_t i = 0; i < prog->facts.num_groups; i++)
        if (prog->facts.groups[i].id == g->group)
            size = prog->facts.groups[i].size;
    if (at + 4 > size)
        fail_msg("%s + %llu is past its %llu-byte section", name, (unsigned long long)delta,
                 (unsigned long long)size);
    for (size_t i = 0; i < prog->facts.num_globals; i++) {
        const kr__image_global *o = &prog->facts.globals[i];
        if (o->group == g->group && o->offset < at + 4 && at < o->offset + o->size)
            fail_msg("%s + %llu is in '%s'", name, (unsigned long long)delta, o->name);
    }
}

static void tick_once(const kr_program *prog)
{
    const kr__cuda_api *cu = kr__cuda();
    CUfunction tick = prog->kernels[kr_program_find_kernel(prog, "tick")].fn;
    assert_int_equal(cu->cuLaunchKernel(tick, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL), CUDA_SUCCESS);
    assert_int_equal(cu->cuCtxSynchronize(), CUDA_SUCCESS);
}

static void no_state_past_a_global(void **state)
{
    (void)state;
    const kr__cuda_api *cu = kr__cuda();
    kr__engine *engine; /* its kernel writes what the driver's copies refuse */
    assert_int_equal(kr__engine_get(g_ctx, &engine), KR_OK);
    /* first by hand: where the counts land, what the driver says, a tick, a
     * restore */
    kr_program *prog;
    assert_int_equal(kr_compile(&prog, g_ctx, SLACK_COUNTER, 0, NULL), KR_OK);
    assert_int_equal(kr__program_admissible(g_ctx, prog), KR_OK);
    assert_int_equal(prog->kind, KR_BINARY_CUBIN); /* the section layout is known */
    expect_padding_after(prog, "c", 128);
    expect_padding_after(prog, "calls", 64);
    CUdeviceptr c = 0, calls = 0;
    size_t bytes = 0;
    assert_int_equal(cu->cuModuleGetGlobal(&c, &bytes, prog->module, "c"), CUDA_SUCCESS);
    assert_int_equal(cu->cuModuleGetGlobal(&calls, &bytes, prog->module, "calls"), CUDA_SUCCESS);
    for (size_t i = 0; i < prog->num_regions; i++)
        printf("region 0x%llx + %zu (%zu nonzero spans)\n",
               (unsigned long long)prog->regions[i].addr, prog->regions[i].bytes,
               prog->regions[i].initial ? prog->regions[i].initial->num_spans : 0);
    CUdeviceptr at[2] = {c + 128, calls + 64};
    for (int i = 0; i < 2; i++) {
        CUdeviceptr base = 0;
        size_t size = 0;
        CUresult r = cu->cuMemGetAddressRange(&base, &size, at[i]);
        printf("%s: 0x%llx, in allocation 0x%llx + %zu (CUresult %d)\n",
               i ? "calls + 64" : "c + 128", (unsigned long long)at[i],
               (unsigned long long)base, size, (int)r);
    }
    tick_once(prog);
    assert_int_equal(read_u32(at[0]), 1);
    assert_int_equal(read_u32(at[1]), 1);
    assert_int_equal(kr__program_restore_globals(g_ctx, prog, NULL), KR_OK);
    assert_int_equal(cu->cuCtxSynchronize(), CUDA_SUCCESS);
    assert_int_equal(read_u32(at[0]), 0);
    assert_int_equal(read_u32(at[1]), 0);
    /* another module, loaded after prog's snapshot: restoring prog touches
     * none of its bytes, neither the state its kernel left nor the data it
     * loaded with (whether or not the driver pools modules' data in one
     * allocation: the regions are each module's own sections) */
    kr_program *other;
    assert_int_equal(kr_compile(&other, g_ctx, SLACK_COUNTER "// another module\n", 0, NULL), KR_OK);
    for (size_t i = 0; i < prog->num_regions; i++)
        for (size_t j = 0; j < other->num_regions; j++) {
            const kr__global_region *x = &prog->regions[i], *y = &other->regions[j];
            if (x->addr < y->addr + y->bytes && y->addr < x->addr + x->bytes)
                fail_msg("two modules' regions overlap: 0x%llx + %zu and 0x%llx + %zu",
                         (unsigned long long)x->addr, x->bytes, (unsigned long long)y->addr,
                         y->bytes);
        }
    CUdeviceptr oc = 0, ocalls = 0, olater = 0;
    assert_int_equal(cu->cuModuleGetGlobal(&oc, &bytes, other->module, "c"), CUDA_SUCCESS);
    assert_int_equal(cu->cuModuleGetGlobal(&ocalls, &bytes, other->module, "calls"), CUDA_SUCCESS);
    assert_int_equal(cu->cuModuleGetGlobal(&olater, &bytes, other->module, "later"), CUDA_SUCCESS);
    tick_once(other);
    tick_once(prog);
    assert_int_equal(kr__program_restore_globals(g_ctx, prog, NULL), KR_OK);
    assert_int_equal(cu->cuCtxSynchronize(), CUDA_SUCCESS);
    assert_int_equal(read_u32(at[0]), 0);
    assert_int_equal(read_u32(oc + 128), 1);
    assert_int_equal(read_u32(ocalls + 64), 1);
    assert_int_equal(read_u32(olater), 2);
    kr_program_free(other);
    kr_program_free(prog);

    /* then as a candidate, every call checked */
    kr_problem *p = problem(SPEC("100003", "8*N", "c[i] = a[i]"));
    kr_bench_options o;
    kr_bench_options_init(&o, KR_BENCH_OPTIONS_VERSION, KR_BENCH_FAST);
    o.check_fraction = 1.0;
    kr_report *r = bench(p, SLACK_COUNTER, &o, NULL);
    assert_false(kr_report_flags(r) & KR_FLAG_TIMED_OUTPUT_WRONG);
    assert_true(metric(r, "timed_checks") >= 3);
    kr_report_free(r);
    kr_problem_free(p);
}

/* An honest program with a lone `static __constant__` table (internal
 * linkage, alone in its bank: the driver may not find it by name, and no
 * other symbol places it): admitted, and right on every call. */
static void lone_static_constant_is_admitted(void **state)
{
    (void)state;
    const char *honest =
        "// kreward: launch k grid=(cdiv(N,256)) block=(256) args=(a, c, N)\n"
        "static __constant__ float twice[4] = {2.f, 2.f, 2.f, 2.f};\n"
        "extern \"C\" __global__ void k(const float* a, float* c, long long n) {\n"
        "  long long i = blockIdx.x * 256ll + threadIdx.x; if (i < n) c[i] = twice[i & 3] * a[i]; }\n";
    kr_program *prog;
    assert_int_equal(kr_compile(&prog, g_ctx, honest, 0, NULL), KR_OK);
    if (kr__program_admissible(g_ctx, prog) != KR_OK)
        fail_msg("refused: %s", kr_context_errmsg(g_ctx));
    kr_program_free(prog);
    kr_problem *p = problem(SPEC("100003", "8*N", "c[i] = 2.0f * a[i]"));
    kr_bench_options o;
    kr_bench_options_init(&o, KR_BENCH_OPTIONS_VERSION, KR_BENCH_FAST);
    o.check_fraction = 1.0;
    kr_report *r = bench(p, honest, &o, NULL);
    assert_false(kr_report_flags(r) & KR_FLAG_TIMED_OUTPUT_WRONG);
    assert_int_not_equal(kr_report_verdict(r), KR_VERDICT_INCORRECT);
    assert_true(metric(r, "timed_checks") >= 3);
    kr_report_free(r);
    kr_problem_free(p);
}

int main(void)
{
    g_ctx = gpu_context_or_skip();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(spin_of_known_length),
        cmocka_unit_test(flush_makes_reads_cold),
        cmocka_unit_test(values_made_ahead_stay_cold),
        cmocka_unit_test(kernel_against_itself),
        cmocka_unit_test(side_stream_work_is_seen),
        cmocka_unit_test(baseline_samples_are_shared),
        cmocka_unit_test(skipping_reads_is_implausible),
        cmocka_unit_test(graph_mode_and_timed_checks),
        cmocka_unit_test(timed_calls_that_write_inputs),
        cmocka_unit_test(no_state_in_constants_or_shared_memory),
        cmocka_unit_test(golden_problem_timed_unchecked),
        cmocka_unit_test(lone_static_constant_is_admitted),
        /* last: its kernels write past their symbols (inside their
         * sections, as the image lays them out; a driver laying them out
         * otherwise may fault and poison the context) */
        cmocka_unit_test(no_state_past_a_global),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    kr_context_free(g_ctx);
    return rc;
}
