/* The pool's throughput on GRPO-like batches (problems x fresh candidates,
 * fast preset), against evaluating the same candidates in this process, one
 * after another; then the same batch with faulting and hanging candidates
 * mixed in (every report present and right, respawn waits), and a soak that
 * watches memory. Prints tables; needs a GPU.
 *
 *   bench_pool [--problems N] [--per-problem M] [--gpus LIST] [--soak K]
 *              [--fault-percent F] [--hang-percent H] [--skip-in-process]
 *              [--scaling] [--hang-timeout S] [--profile]
 *
 * --scaling: also runs the clean batch on a pool of GPU 0 alone and prints
 * the ratio (the all-GPU pool over the one-GPU pool), for the multi-GPU
 * target. --hang-timeout: every job's verification timeout_s (default 2 s),
 * the cap of a run's deadline: verification ends a hang sooner where the
 * reference is fast on the case (verify_deadline.c). --profile: the
 * workers report where their time goes (KR_PROFILE=metrics) and a table
 * per batch prints it, with the batch's floor (issue 34's split). */
#include <kreward/kreward.h>

#include "common/clock.h"
#include "run/gpu_profile.h"

#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *const PROBLEMS[] = {"l1_vector_add", "l1_gelu", "l2_layernorm", "l2_rmsnorm",
                                       "l2_softmax", "l2_sum", "l3_bias_gelu",
                                       "l3_residual_rmsnorm"};
#define NUM_PROBLEMS (sizeof PROBLEMS / sizeof PROBLEMS[0])

static const char *FAULT =
    "// kreward: launch k grid=(264) block=(128) args=(a, b, c, N)\n"
    "extern \"C\" __global__ void k(const float *a, const float *b, float *c, long long n) {\n"
    "  for (long long i = blockIdx.x * 128ll + threadIdx.x; i < n; i += 264ll * 128)\n"
    "    c[i + (1ll << 36)] = a[i] + b[i]; }\n";
static const char *HANG =
    "// kreward: launch k grid=(1) block=(32) args=(a, b, c, N)\n"
    "extern \"C\" __global__ void k(const float *a, const float *b, volatile float *c, long long n) {\n"
    "  while (c[0] != 12345.0f) { } }\n";

typedef struct {
    kr_problem *problems[NUM_PROBLEMS];
    char *sources[NUM_PROBLEMS][3];   /* fast, slow, wrong */
    kr_reward *reward;
    kr_context *ctx;
} corpus;

static char *read_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    rewind(f);
    char *s = malloc((size_t)n + 1);
    if (s && fread(s, 1, (size_t)n, f) == (size_t)n)
        s[n] = '\0';
    fclose(f);
    return s;
}

/* A fresh candidate: one of the problem's three, made unique by a comment
 * (so nothing is shared through the cache or deduplicated). */
static char *fresh(const corpus *c, size_t p, size_t i, unsigned salt, const char **expect)
{
    static const char *const expects[] = {"passed", "passed", "incorrect"};
    size_t kind = i % 3;
    *expect = expects[kind];
    const char *base = c->sources[p][kind];
    size_t n = strlen(base) + 64;
    char *s = malloc(n);
    snprintf(s, n, "%s// variant %u.%zu.%zu\n", base, salt, p, i);
    return s;
}

/* The parts of a GPU worker's evaluation that --profile prints (report
 * metrics of lib/evaluate/evaluate.c's profile), and the phases whose sum is
 * the worker's time for a candidate. */
static const char *const PROF_KEYS[] = {
    "profile_verify_ms", "profile_weak_ms", "profile_bench_ms", "profile_facts_ms",
    "profile_plan_ms", "profile_score_ms", "profile_engine_reference_ms", "profile_engine_wait_ms",
    "profile_engine_alloc_ms", "profile_engine_free_ms", "profile_engine_open_ms",
    "profile_gpu_generate_ms", "profile_gpu_fill_ms", "profile_gpu_checks_ms",
    "profile_gpu_reset_ms", "profile_gpu_reference_ms", "profile_gpu_candidate_ms",
    "profile_gpu_baseline_ms", "profile_generated_mb", "profile_waits", "profile_mem_allocs",
    "profile_mem_frees"};
#define NUM_PROF_KEYS (sizeof PROF_KEYS / sizeof PROF_KEYS[0])
static const char *const PHASE_KEYS[] = {"profile_facts_ms", "profile_compile_ms", "profile_plan_ms",
                                         "profile_verify_ms", "profile_weak_ms", "profile_bench_ms",
                                         "profile_score_ms"};

/* --profile per problem: the columns of its tables (the first six, then
 * the GPU's time by category, lib/run/gpu_profile.h, from the fifth). */
static const char *const PROBLEM_KEYS[] = {
    "profile_verify_ms", "profile_bench_ms", "profile_engine_reference_ms", "profile_engine_wait_ms",
    "profile_gpu_generate_ms", "profile_generated_mb", "profile_gpu_fill_ms", "profile_gpu_checks_ms",
    "profile_gpu_reset_ms", "profile_gpu_reference_ms",
    "profile_gpu_candidate_ms", "profile_gpu_baseline_ms"};
#define NUM_PROBLEM_KEYS (sizeof PROBLEM_KEYS / sizeof PROBLEM_KEYS[0])

#define MAX_HOST_KEYS 96

typedef struct {
    double wall;
    size_t total, right, faults, hangs;
    /* where a passed candidate's time goes: sums over passed reports */
    size_t passed;
    double compile_s, bench_s;
    /* --profile: the workers' split (KR_PROFILE=metrics), sums over passed
     * reports, and over every report of the phases' total and GPU waits */
    size_t profiled, profiled_all;
    double prof[NUM_PROF_KEYS], worker_ms_all, wait_ms_all;
    /* the GPU's categories (kr__gpu_names), each as its time, its pairs
     * (kernels or copies, one by one) and the bytes they touched */
    double cat_ms[KR__GPU_N], cat_n[KR__GPU_N], cat_mb[KR__GPU_N];
    /* the same per problem, passed reports (PROBLEM_KEYS) */
    size_t by_problem_n[NUM_PROBLEMS];
    double by_problem[NUM_PROBLEMS][NUM_PROBLEM_KEYS];
    /* every profiled report's wait sites and the worker's time around its
     * evaluations (profile_site_*, profile_worker_*), summed by name */
    size_t num_host;
    char host_key[MAX_HOST_KEYS][96];
    double host_sum[MAX_HOST_KEYS];
} outcome;

static void add_host(outcome *o, const char *key, double v)
{
    size_t i = 0;
    while (i < o->num_host && strcmp(o->host_key[i], key) != 0)
        i++;
    if (i == o->num_host) {
        if (o->num_host == MAX_HOST_KEYS)
            return;
        snprintf(o->host_key[o->num_host++], sizeof o->host_key[0], "%s", key);
    }
    o->host_sum[i] += v;
}

static double host_mean(const outcome *o, const char *key)
{
    for (size_t i = 0; i < o->num_host; i++)
        if (strcmp(o->host_key[i], key) == 0)
            return o->host_sum[i] / (double)o->profiled_all;
    return 0;
}

static void add_problem_profile(outcome *o, const kr_report *r, size_t p)
{
    double v;
    if (p >= NUM_PROBLEMS || kr_report_get(&v, r, "profile_verify_ms") != KR_OK)
        return;
    o->by_problem_n[p]++;
    for (size_t k = 0; k < NUM_PROBLEM_KEYS; k++)
        if (kr_report_get(&v, r, PROBLEM_KEYS[k]) == KR_OK)
            o->by_problem[p][k] += v;
}

static void add_profile(outcome *o, const kr_report *r, int passed)
{
    double v, total = 0;
    if (kr_report_get(&v, r, "profile_verify_ms") != KR_OK)
        return; /* not profiled (a verdict before the worker ran it) */
    for (size_t k = 0; k < sizeof PHASE_KEYS / sizeof PHASE_KEYS[0]; k++)
        if (kr_report_get(&v, r, PHASE_KEYS[k]) == KR_OK)
            total += v;
    o->profiled_all++;
    o->worker_ms_all += total;
    for (size_t i = 0; i < kr_report_metric_count(r); i++) {
        const char *name = kr_report_metric_name(r, i);
        if ((!strncmp(name, "profile_site_", 13) || !strncmp(name, "profile_worker_", 15)) &&
            kr_report_get(&v, r, name) == KR_OK)
            add_host(o, name, v);
    }
    if (kr_report_get(&v, r, "profile_engine_wait_ms") == KR_OK)
        o->wait_ms_all += v;
    if (!passed)
        return;
    o->profiled++;
    for (size_t k = 0; k < NUM_PROF_KEYS; k++)
        if (kr_report_get(&v, r, PROF_KEYS[k]) == KR_OK)
            o->prof[k] += v;
    for (size_t k = 0; k < KR__GPU_N; k++) {
        char key[64];
        snprintf(key, sizeof key, "profile_gpu_%s_ms", kr__gpu_names[k]);
        o->cat_ms[k] += kr_report_get(&v, r, key) == KR_OK ? v : 0;
        snprintf(key, sizeof key, "profile_gpu_%s_n", kr__gpu_names[k]);
        o->cat_n[k] += kr_report_get(&v, r, key) == KR_OK ? v : 0;
        snprintf(key, sizeof key, "profile_gpu_%s_mb", kr__gpu_names[k]);
        o->cat_mb[k] += kr_report_get(&v, r, key) == KR_OK ? v : 0;
    }
}

static const char *verdict(const kr_report *r)
{
    return kr_verdict_name(kr_report_verdict(r));
}

static double hang_timeout_s = 2;

static void run_pool(kr_pool *pool, const corpus *c, size_t problems, size_t per, unsigned salt,
                     int fault_pct, int hang_pct, outcome *o)
{
    size_t n = problems * per;
    kr_job *jobs = calloc(n, sizeof *jobs);
    char **srcs = calloc(n, sizeof *srcs);
    const char **expect = calloc(n, sizeof *expect);
    kr_report **reports = calloc(n, sizeof *reports);
    size_t *problem_of = calloc(n, sizeof *problem_of);
    kr_bench_options bo;
    kr_bench_options_init(&bo, KR_BENCH_OPTIONS_VERSION, KR_BENCH_FAST);
    kr_verify_options vo;
    kr_verify_options_init(&vo, KR_VERIFY_OPTIONS_VERSION);
    vo.timeout_s = hang_timeout_s;
    memset(o, 0, sizeof *o);
    for (size_t i = 0; i < n; i++) {
        size_t p = i % problems;
        unsigned r = (unsigned)(i * 2654435761u + salt) % 100;
        if ((int)r < fault_pct) {
            srcs[i] = strdup(FAULT);
            expect[i] = "fault";
            p = 0; /* vector_add's arguments */
            o->faults++;
        } else if ((int)r < fault_pct + hang_pct) {
            srcs[i] = strdup(HANG);
            expect[i] = "timeout";
            p = 0;
            o->hangs++;
        } else {
            srcs[i] = fresh(c, p, i / problems, salt, &expect[i]);
        }
        kr_job_init(&jobs[i], KR_JOB_VERSION);
        problem_of[i] = p;
        jobs[i].problem = c->problems[p];
        jobs[i].source = srcs[i];
        jobs[i].bench = &bo;
        jobs[i].verify = &vo;
        jobs[i].reward = c->reward;
        jobs[i].name = "candidate.cu";
    }
    double t0 = kr__now();
    kr_evaluate_batch(reports, pool, jobs, n);
    o->wall = kr__now() - t0;
    /* progress on stderr: a batch that takes minutes says so as it goes */
    fprintf(stderr, "  batch of %zu (salt %u): %.1f s\n", n, salt, o->wall);
    for (size_t i = 0; i < n; i++) {
        o->total += reports[i] != NULL;
        int ok = reports[i] && strcmp(verdict(reports[i]), expect[i]) == 0;
        if (!ok && reports[i])
            fprintf(stderr, "  unexpected: %s, expected %s: %.200s\n", verdict(reports[i]), expect[i],
                    kr_report_text(reports[i], "message") ? kr_report_text(reports[i], "message") : "");
        o->right += ok;
        double v;
        if (reports[i])
            add_profile(o, reports[i], kr_report_verdict(reports[i]) == KR_VERDICT_PASSED);
        if (reports[i] && kr_report_verdict(reports[i]) == KR_VERDICT_PASSED) {
            o->passed++;
            add_problem_profile(o, reports[i], problem_of[i]);
            if (kr_report_get(&v, reports[i], "compile_seconds") == KR_OK)
                o->compile_s += v;
            if (kr_report_get(&v, reports[i], "bench_wall_s") == KR_OK)
                o->bench_s += v;
        }
        kr_report_free(reports[i]);
        free(srcs[i]);
    }
    free(jobs);
    free(srcs);
    free(expect);
    free(reports);
    free(problem_of);
}

static void run_in_process(const corpus *c, size_t problems, size_t per, unsigned salt, outcome *o)
{
    kr_evaluate_options eo = KR_EVALUATE_OPTIONS_INIT;
    eo.reward = c->reward;
    memset(o, 0, sizeof *o);
    double t0 = kr__now();
    for (size_t i = 0; i < problems * per; i++) {
        size_t p = i % problems;
        const char *expect;
        char *src = fresh(c, p, i / problems, salt, &expect);
        kr_report *r = NULL;
        kr_report_new(&r);
        kr_evaluate(r, c->ctx, c->problems[p], src, 0, &eo);
        o->total++;
        o->right += strcmp(verdict(r), expect) == 0;
        kr_report_free(r);
        free(src);
    }
    o->wall = kr__now() - t0;
    fprintf(stderr, "  in process: %zu in %.1f s\n", problems * per, o->wall);
}

static long rss_kb(pid_t pid)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    long kb = -1;
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, "VmRSS:", 6) == 0)
            kb = atol(line + 6);
    if (f)
        fclose(f);
    return kb;
}

static long workers_rss_kb(kr_pool *pool)
{
    char *text = NULL;
    kr_pool_status_json(&text, pool);
    json_t *o = json_loads(text ? text : "{}", 0, NULL), *w;
    size_t i;
    long total = 0;
    json_array_foreach(json_object_get(o, "workers"), i, w) {
        json_int_t pid = json_integer_value(json_object_get(w, "pid"));
        if (pid > 0)
            total += rss_kb((pid_t)pid) > 0 ? rss_kb((pid_t)pid) : 0;
    }
    json_decref(o);
    kr_free(text);
    return total;
}

/* Device memory in use on every GPU, in MiB (nvidia-smi: the workers' CUDA
 * contexts are in other processes, so this process's cuMemGetInfo would
 * see them only as "used" on the device anyway). -1 when unavailable. */
static long gpu_used_mib(void)
{
    FILE *p = popen("nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits 2>/dev/null",
                    "r");
    if (!p)
        return -1;
    long total = 0, v;
    int n = 0;
    while (fscanf(p, "%ld", &v) == 1) {
        total += v;
        n++;
    }
    pclose(p);
    return n ? total : -1;
}

static void print_phases(const char *what, const outcome *o)
{
    if (!o->passed)
        return;
    printf("  %s: per candidate %.1f ms of batch wall; passed candidates' mean compile %.1f ms, "
           "benchmark %.1f ms\n", what, 1e3 * o->wall / (double)o->total,
           1e3 * o->compile_s / (double)o->passed, 1e3 * o->bench_s / (double)o->passed);
}

/* --profile: the engine's waits by call site over every profiled report
 * (lib/run/wait_sites.h): the host's own time before each is GPU idle, so
 * this names what to overlap or remove; then the worker's time around an
 * evaluation (its wait for the next job, reading it, sending the result). */
static void print_sites(const char *what, const outcome *o)
{
    if (!o->profiled_all)
        return;
    printf("\n| %s: waits by site, a candidate (mean of %zu reports) | waits | waiting ms | host ms "
           "before it |\n|---|---|---|---|\n", what, o->profiled_all);
    double host = 0;
    for (size_t i = 0; i < o->num_host; i++) {
        const char *k = o->host_key[i];
        size_t len = strlen(k);
        if (strncmp(k, "profile_site_", 13) != 0 || len < 21 || strcmp(k + len - 8, "_host_ms") != 0)
            continue;
        char base[96], key[128];
        snprintf(base, sizeof base, "%.*s", (int)(len - 8), k);
        snprintf(key, sizeof key, "%s_n", base);
        double n = host_mean(o, key);
        snprintf(key, sizeof key, "%s_wait_ms", base);
        double wait = host_mean(o, key), h = o->host_sum[i] / (double)o->profiled_all;
        host += h;
        printf("| %s | %.1f | %.2f | %.2f |\n", base + 13, n, wait, h);
    }
    printf("  host work between the engine's waits %.1f ms a candidate; the worker: waiting for its "
           "next job %.2f ms, reading it %.2f ms, sending a result %.2f ms\n", host,
           host_mean(o, "profile_worker_idle_ms"), host_mean(o, "profile_worker_load_ms"),
           host_mean(o, "profile_worker_send_ms"));
}

/* --profile: where a GPU worker's time goes per passed candidate, and the
 * batch's floor: one GPU worker cannot do better than its own time per
 * candidate, nor the GPU than its waits (the engine waiting on the device:
 * an estimate of the GPU's busy time, host work overlapped away). */
static void print_profile(const char *what, const outcome *o)
{
    if (!o->profiled)
        return;
    printf("\n| %s: a passed candidate's GPU-worker time (mean of %zu) | ms |\n|---|---|\n", what,
           o->profiled);
    for (size_t k = 0; k < NUM_PROF_KEYS; k++)
        printf("| %s | %.2f |\n", PROF_KEYS[k] + 8, o->prof[k] / (double)o->profiled);
    /* GB/s far below the memory's means launch gaps or slow kernels; us
     * per pair near a launch's few means many small pieces of work */
    printf("\n| %s: GPU category, a passed candidate | ms | pairs | MB touched | GB/s | us a pair |\n"
           "|---|---|---|---|---|---|\n", what);
    for (size_t k = 0; k < KR__GPU_N; k++) {
        double n = (double)o->profiled, ms = o->cat_ms[k] / n, pairs = o->cat_n[k] / n;
        double mb = o->cat_mb[k] / n;
        printf("| %s | %.2f | %.1f | ", kr__gpu_names[k], ms, pairs);
        if (mb > 0)
            printf("%.0f | %.0f | ", mb, ms > 0 ? mb / ms : 0);
        else
            printf("n/a | n/a | ");
        printf("%.1f |\n", pairs > 0 ? 1e3 * ms / pairs : 0);
    }
    double per = o->worker_ms_all / (double)o->profiled_all, wait = o->wait_ms_all / (double)o->profiled_all;
    printf("  %s, every profiled report (%zu): worker %.1f ms a candidate (at most %.1f candidates/s "
           "with one GPU worker), GPU waits %.1f ms (floor: %.1f candidates/s if all host work "
           "overlapped); measured %.1f ms of batch wall a candidate (%.2f/s)\n",
           what, o->profiled_all, per, per > 0 ? 1e3 / per : 0, wait, wait > 0 ? 1e3 / wait : 0,
           1e3 * o->wall / (double)o->total, (double)o->total / o->wall);
    printf("\n| %s, per problem (passed, means) | n | verify ms | bench ms | reference ms | "
           "GPU waits ms | generator's GPU ms | generated MB |\n|---|---|---|---|---|---|---|---|\n",
           what);
    for (size_t p = 0; p < NUM_PROBLEMS; p++) {
        if (!o->by_problem_n[p])
            continue;
        double n = (double)o->by_problem_n[p];
        printf("| %s | %zu | %.1f | %.1f | %.1f | %.1f | %.1f | %.0f |\n", PROBLEMS[p],
               o->by_problem_n[p], o->by_problem[p][0] / n, o->by_problem[p][1] / n,
               o->by_problem[p][2] / n, o->by_problem[p][3] / n, o->by_problem[p][4] / n,
               o->by_problem[p][5] / n);
    }
    /* the GPU's own time by category; what the waits saw beyond it is the
     * GPU idle between the host's steps (round trips, host work) */
    static const int gpu_cols[] = {4, 6, 7, 8, 9, 10, 11};
    printf("\n| %s, per problem: GPU time by category (passed, ms) | waits | generate | fill | checks "
           "| reset | reference | candidate | baseline | idle in waits |\n"
           "|---|---|---|---|---|---|---|---|---|---|\n", what);
    for (size_t p = 0; p < NUM_PROBLEMS; p++) {
        if (!o->by_problem_n[p])
            continue;
        double n = (double)o->by_problem_n[p], busy = 0;
        printf("| %s | %.1f", PROBLEMS[p], o->by_problem[p][3] / n);
        for (size_t k = 0; k < sizeof gpu_cols / sizeof gpu_cols[0]; k++) {
            busy += o->by_problem[p][gpu_cols[k]] / n;
            printf(" | %.1f", o->by_problem[p][gpu_cols[k]] / n);
        }
        printf(" | %.1f |\n", o->by_problem[p][3] / n - busy);
    }
    print_sites(what, o);
}

static double status(kr_pool *pool, const char *key)
{
    char *text = NULL;
    kr_pool_status_json(&text, pool);
    json_t *o = json_loads(text ? text : "{}", 0, NULL);
    double v = json_number_value(json_object_get(o, key));
    json_decref(o);
    kr_free(text);
    return v;
}

int main(int argc, char **argv)
{
    signal(SIGPIPE, SIG_IGN);
    setvbuf(stdout, NULL, _IOLBF, 0); /* a timeout's kill must not lose the tables */
    size_t problems = NUM_PROBLEMS, per = 16, soak = 0;
    int fault_pct = 10, hang_pct = 5, skip_in_process = 0, scaling = 0;
    const char *gpus = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--problems") && i + 1 < argc)
            problems = (size_t)atoi(argv[++i]);
        else if (!strcmp(argv[i], "--per-problem") && i + 1 < argc)
            per = (size_t)atoi(argv[++i]);
        else if (!strcmp(argv[i], "--gpus") && i + 1 < argc)
            gpus = argv[++i];
        else if (!strcmp(argv[i], "--soak") && i + 1 < argc)
            soak = (size_t)atoi(argv[++i]);
        else if (!strcmp(argv[i], "--fault-percent") && i + 1 < argc)
            fault_pct = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--hang-percent") && i + 1 < argc)
            hang_pct = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--skip-in-process"))
            skip_in_process = 1;
        else if (!strcmp(argv[i], "--scaling"))
            scaling = 1;
        else if (!strcmp(argv[i], "--profile"))
            setenv("KR_PROFILE", "metrics", 1); /* the workers inherit it (lib/pool/spawn.c) */
        else if (!strcmp(argv[i], "--hang-timeout") && i + 1 < argc)
            hang_timeout_s = atof(argv[++i]);
    }
    problems = problems > NUM_PROBLEMS ? NUM_PROBLEMS : problems;
    const char *root = getenv("KR_SOURCE_ROOT") ? getenv("KR_SOURCE_ROOT") : ".";
    corpus c;
    memset(&c, 0, sizeof c);
    if (kr_context_new(&c.ctx, NULL) != KR_OK || !kr_context_has_device(c.ctx)) {
        printf("bench_pool: needs a GPU (skipped)\n");
        return 0;
    }
    kr_reward_preset(&c.reward, c.ctx, "makora");
    const char *kinds[] = {"fast", "slow", "wrong"};
    for (size_t p = 0; p < problems; p++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/examples/problems/%s/problem.json", root, PROBLEMS[p]);
        if (kr_problem_load(&c.problems[p], c.ctx, path) != KR_OK) {
            printf("bench_pool: %s: %s\n", path, kr_context_errmsg(c.ctx));
            return 1;
        }
        for (int k = 0; k < 3; k++) {
            snprintf(path, sizeof path, "%s/examples/problems/%s/candidates/%s.cu", root,
                     PROBLEMS[p], kinds[k]);
            c.sources[p][k] = read_file(path);
        }
    }
    kr_pool_options po;
    kr_pool_options_init(&po, KR_POOL_OPTIONS_VERSION);
    po.gpus = gpus;
    kr_pool *pool = NULL;
    char *why = NULL;
    double t0 = kr__now();
    if (kr_pool_new(&pool, &po, &why) != KR_OK) {
        printf("bench_pool: the pool did not start: %s\n", why);
        return 1;
    }
    double start = kr__now() - t0;
    outcome warm, clean, mixed, inproc;
    run_pool(pool, &c, problems, 2, 1, 0, 0, &warm); /* references, builtins, caches */
    run_pool(pool, &c, problems, per, 2, 0, 0, &clean);
    double respawns0 = status(pool, "respawns");
    run_pool(pool, &c, problems, per, 3, fault_pct, hang_pct, &mixed);
    double respawns = status(pool, "respawns") - respawns0;
    if (!skip_in_process)
        run_in_process(&c, problems, per, 4, &inproc);
    printf("\n| batch (%zu problems x %zu fresh candidates, fast preset, gpus %s) | candidates | "
           "right | wall s | candidates/s | vs in-process |\n|---|---|---|---|---|---|\n",
           problems, per, gpus ? gpus : "all");
    double base = skip_in_process ? 0 : (double)inproc.total / inproc.wall;
    if (!skip_in_process)
        printf("| in this process, one after another (kr_evaluate) | %zu | %zu | %.1f | %.2f | 1.00 |\n",
               inproc.total, inproc.right, inproc.wall, base);
    printf("| pool | %zu | %zu | %.1f | %.2f | %.2f |\n", clean.total, clean.right, clean.wall,
           (double)clean.total / clean.wall, base ? (double)clean.total / clean.wall / base : 0);
    printf("| pool, %d %% faulting + %d %% hanging | %zu (%zu faults, %zu hangs) | %zu | %.1f | "
           "%.2f | %.2f |\n", fault_pct, hang_pct, mixed.total, mixed.faults, mixed.hangs,
           mixed.right, mixed.wall, (double)mixed.total / mixed.wall,
           base ? (double)mixed.total / mixed.wall / base : 0);
    print_phases("pool", &clean);
    if (!skip_in_process)
        print_phases("in this process", &inproc);
    print_profile("pool", &clean);
    print_profile("pool, faulting + hanging", &mixed);
    if (!skip_in_process)
        print_profile("in this process", &inproc);
    if (scaling) {
        kr_pool_options po1 = po;
        po1.gpus = "0";
        kr_pool *one = NULL;
        char *why1 = NULL;
        if (kr_pool_new(&one, &po1, &why1) != KR_OK) {
            printf("bench_pool: the one-GPU pool did not start: %s\n", why1);
            kr_free(why1);
        } else {
            outcome w1, c1;
            run_pool(one, &c, problems, 2, 5, 0, 0, &w1);
            run_pool(one, &c, problems, per, 6, 0, 0, &c1);
            double all = (double)clean.total / clean.wall, single = (double)c1.total / c1.wall;
            printf("\n| scaling | candidates | right | wall s | candidates/s |\n|---|---|---|---|---|\n"
                   "| GPU 0 alone | %zu | %zu | %.1f | %.2f |\n| gpus %s | %zu | %zu | %.1f | %.2f |\n"
                   "scaling: %.2fx one GPU (target >= 1.9x on two)\n", c1.total, c1.right, c1.wall,
                   single, gpus ? gpus : "all", clean.total, clean.right, clean.wall, all,
                   all / single);
            kr_pool_free(one);
        }
    }
    printf("\npool start %.2f s; respawns in the mixed batch %.0f; a replacement worker's start: "
           "mean %.3f s, p50 %.3f s, p99 %.3f s, max %.3f s (a warm spare takes over meanwhile)\n",
           start, respawns, status(pool, "respawn_wait_mean_s"), status(pool, "respawn_wait_p50_s"),
           status(pool, "respawn_wait_p99_s"), status(pool, "respawn_wait_max_s"));
    if (soak) {
        long rss0 = rss_kb(getpid()), wrss0 = workers_rss_kb(pool), gpu0 = gpu_used_mib();
        size_t done = 0, right = 0, reports = 0;
        double ts = kr__now();
        while (done < soak) {
            outcome o;
            run_pool(pool, &c, problems, per, 100 + (unsigned)done, fault_pct, hang_pct, &o);
            size_t before = done;
            done += problems * per;
            reports += o.total;
            right += o.right;
            if (done / 1000 != before / 1000) /* memory along the way, not only at the ends */
                printf("soak: %zu evaluations, %.0f s, %zu reports, %zu as expected; caller RSS %ld "
                       "MB, workers' RSS %ld MB, GPU memory used %ld MiB; %.0f respawns, start "
                       "p50 %.3f s, p99 %.3f s\n", done, kr__now() - ts, reports, right,
                       rss_kb(getpid()) / 1024, workers_rss_kb(pool) / 1024, gpu_used_mib(),
                       status(pool, "respawns"), status(pool, "respawn_wait_p50_s"),
                       status(pool, "respawn_wait_p99_s"));
        }
        long rss1 = rss_kb(getpid()), wrss1 = workers_rss_kb(pool), gpu1 = gpu_used_mib();
        printf("\nsoak: %zu evaluations in %.0f s, %zu reports (%zu lost), %zu with the expected "
               "verdict; caller RSS %ld -> %ld MB, workers' RSS %ld -> %ld MB, GPU memory used %ld "
               "-> %ld MiB\n", done, kr__now() - ts, reports, done - reports, right, rss0 / 1024,
               rss1 / 1024, wrss0 / 1024, wrss1 / 1024, gpu0, gpu1);
    }
    kr_pool_free(pool);
    for (size_t p = 0; p < problems; p++) {
        kr_problem_free(c.problems[p]);
        for (int k = 0; k < 3; k++)
            free(c.sources[p][k]);
    }
    kr_reward_free(c.reward);
    kr_context_free(c.ctx);
    return 0;
}
