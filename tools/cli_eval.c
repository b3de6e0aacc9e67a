/* Options shared by `kreward evaluate` and `kreward suite`, and summaries. */
#include "cli_eval.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

const char *eval_options_help(void)
{
    return "  --preset fast|precise  timing budget (default fast: RL; precise: leaderboards)\n"
           "  --reward NAME|FILE     reward preset (makora, kernelgym, kernelgym_default,\n"
           "                         kernelgym_tiers, cuda_agent, kevin, fast_p) or a JSON\n"
           "                         configuration file (default makora)\n"
           "  --seed N               fixed evaluation seed (default: fresh from the OS)\n"
           "  --no-bench             verify only\n"
           "  --counters             hardware counters of the candidate's kernels on an extra\n"
           "                         run after the timing, and profile feedback (docs/counters.md)\n"
           "  --robust               the speedup again under perturbed conditions (warm/cold L2,\n"
           "                         a co-running kernel, other cases): minimum and geomean\n"
           "  --cache-dir DIR        on-disk compile cache (default $KREWARD_CACHE_DIR)\n"
           "  --require-gpu          exit 3 when there is no GPU to verify on\n"
           "  --json                 print the report(s) as JSON\n"
           "  --gpus LIST            GPUs for the worker processes, e.g. 0,1 (default: all visible)\n"
           "  --jobs N               compile worker processes (default: one per two CPUs)\n"
           "  --in-process           run the candidate in this process, without workers or\n"
           "                         sandbox (trusted code only: a fault ends the process)\n";
}

enum {
    OPT_PRESET = CLI_OPT_SHARED,
    OPT_REWARD,
    OPT_SEED,
    OPT_NO_BENCH,
    OPT_CACHE_DIR,
    OPT_REQUIRE_GPU,
    OPT_JSON,
    OPT_GPUS,
    OPT_JOBS,
    OPT_IN_PROCESS,
    OPT_COUNTERS,
    OPT_ROBUST,
    OPT_EVAL_END, /* one past the last */
};

const struct option eval_options[] = {
    {"preset", required_argument, NULL, OPT_PRESET},
    {"reward", required_argument, NULL, OPT_REWARD},
    {"seed", required_argument, NULL, OPT_SEED},
    {"no-bench", no_argument, NULL, OPT_NO_BENCH},
    {"cache-dir", required_argument, NULL, OPT_CACHE_DIR},
    {"require-gpu", no_argument, NULL, OPT_REQUIRE_GPU},
    {"json", no_argument, NULL, OPT_JSON},
    {"gpus", required_argument, NULL, OPT_GPUS},
    {"jobs", required_argument, NULL, OPT_JOBS},
    {"in-process", no_argument, NULL, OPT_IN_PROCESS},
    {"counters", no_argument, NULL, OPT_COUNTERS},
    {"robust", no_argument, NULL, OPT_ROBUST},
    {NULL, 0, NULL, 0},
};

/* Keeps one evaluation option: 0, or CLI_BAD for a value it refuses. */
static int eval_keep(cli_parser *p, int id, const char *v, eval_args *a)
{
    char *end;
    switch (id) {
    case OPT_PRESET:
        if (strcmp(v, "fast") && strcmp(v, "precise"))
            return cli_bad(p, "--preset is fast or precise, not '%s'", v);
        a->preset = v;
        break;
    case OPT_REWARD:
        a->reward = v;
        break;
    case OPT_SEED:
        errno = 0;
        a->seed = strtoull(v, &end, 0);
        if (*end || !a->seed || errno)
            return cli_bad(p, "--seed takes a non-zero integer, not '%s'", v);
        break;
    case OPT_NO_BENCH:
        a->no_bench = 1;
        break;
    case OPT_CACHE_DIR:
        a->cache_dir = v;
        break;
    case OPT_REQUIRE_GPU:
        a->require_gpu = 1;
        break;
    case OPT_JSON:
        a->json = 1;
        break;
    case OPT_GPUS:
        a->gpus = v;
        break;
    case OPT_JOBS:
        errno = 0;
        a->jobs = (unsigned)strtoul(v, &end, 10);
        if (*end || !a->jobs || errno || a->jobs > 256)
            return cli_bad(p, "--jobs takes a number of worker processes (1 to 256), not '%s'", v);
        break;
    case OPT_IN_PROCESS:
        a->in_process = 1;
        break;
    case OPT_COUNTERS:
        a->bench_flags |= KR_BENCH_COUNTERS;
        break;
    case OPT_ROBUST:
        a->bench_flags |= KR_BENCH_ROBUST;
        break;
    }
    return 0;
}

int eval_next(cli_parser *p, int argc, char **argv, const char **value, eval_args *a)
{
    for (;;) {
        int id = cli_next(p, argc, argv, value);
        if (id < CLI_OPT_SHARED || id >= OPT_EVAL_END)
            return id;
        if (eval_keep(p, id, *value, a) != 0)
            return CLI_BAD;
    }
}

int eval_prepare(kr_context *ctx, const eval_args *a, eval_setup *s)
{
    memset(s, 0, sizeof *s);
    kr_evaluate_options_init(&s->eval, KR_EVALUATE_OPTIONS_VERSION);
    kr_verify_options_init(&s->verify, KR_VERIFY_OPTIONS_VERSION);
    s->verify.seed = a->seed;
    kr_bench_options_init(&s->bench, KR_BENCH_OPTIONS_VERSION,
                          a->preset && !strcmp(a->preset, "precise") ? KR_BENCH_PRECISE : KR_BENCH_FAST);
    s->bench.seed = a->seed;
    s->bench.flags |= a->bench_flags;
    s->eval.verify = &s->verify;
    s->eval.bench = &s->bench;
    s->eval.flags = a->no_bench ? KR_EVALUATE_NO_BENCH : 0;
    const char *reward = a->reward ? a->reward : "makora";
    int rc;
    int is_preset = 0;
    for (const char *const *p = kr_reward_presets(); *p; p++)
        is_preset |= strcmp(*p, reward) == 0;
    if (is_preset) {
        rc = kr_reward_preset(&s->reward, ctx, reward);
    } else if (access(reward, F_OK) != 0) {
        /* neither a preset nor a file: most often a mistyped preset */
        fprintf(stderr, "kreward: --reward %s: not a preset (", reward);
        for (const char *const *p = kr_reward_presets(); *p; p++)
            fprintf(stderr, "%s%s", p == kr_reward_presets() ? "" : ", ", *p);
        fprintf(stderr, ") and no such file\n");
        return -1;
    } else {
        size_t len;
        char *text = cli_read_file(reward, &len);
        if (!text)
            return -1;
        rc = kr_reward_from_json(&s->reward, ctx, text, len);
        free(text);
    }
    if (rc != KR_OK) {
        cli_report_error(ctx, "reward", rc);
        return -1;
    }
    snprintf(s->reward_name, sizeof s->reward_name, "%s", reward);
    s->eval.reward = s->reward;
    return 0;
}

kr_pool *eval_pool(const eval_args *a, int *no_gpu)
{
    kr_pool_options o;
    kr_pool_options_init(&o, KR_POOL_OPTIONS_VERSION);
    o.gpus = a->gpus;
    o.compile_workers = a->jobs;
    o.cache_dir = a->cache_dir ? a->cache_dir : getenv("KREWARD_CACHE_DIR");
    kr_pool *pool = NULL;
    char *why = NULL;
    *no_gpu = 0;
    int rc = kr_pool_new(&pool, &o, &why);
    if (rc == KR_ENODEVICE && !a->gpus) {
        *no_gpu = 1;
        if (a->require_gpu) {
            fprintf(stderr, "kreward: %s\n", why);
            kr_free(why);
            return NULL;
        }
        fprintf(stderr, "kreward: %s: compile checks only (verification and timing need an "
                        "NVIDIA GPU)\n", why);
        kr_free(why);
        why = NULL;
        o.gpus = "none";
        rc = kr_pool_new(&pool, &o, &why);
    }
    if (rc != KR_OK)
        fprintf(stderr, "kreward: cannot start the worker pool: %s\n", why ? why : kr_strerror(rc));
    kr_free(why);
    return pool;
}

kr_job eval_job(const eval_setup *s, const kr_problem *p, const char *src, size_t len,
                const char *name)
{
    kr_job job;
    kr_job_init(&job, KR_JOB_VERSION);
    job.flags = s->eval.flags;
    job.problem = p;
    job.source = src;
    job.len = len;
    job.name = name;
    job.verify = &s->verify;
    job.bench = &s->bench;
    job.reward = s->reward;
    return job;
}

void eval_release(eval_setup *s)
{
    kr_reward_free(s->reward);
    s->reward = NULL;
}

static double get(const kr_report *r, const char *key)
{
    double v = NAN;
    kr_report_get(&v, r, key);
    return v;
}

void eval_print(FILE *to, const kr_report *r, const char *reward_name)
{
    const char *problem = kr_report_text(r, "problem"), *cand = kr_report_text(r, "candidate");
    fprintf(to, "%s / %s: %s\n", problem ? problem : "?", cand ? cand : "candidate",
            kr_verdict_name(kr_report_verdict(r)));
    uint64_t flags = kr_report_flags(r);
    if (flags) {
        fprintf(to, "  flags:");
        for (int i = 0; i < 64; i++)
            if (flags & (1ull << i))
                fprintf(to, " %s", kr_flag_name(1ull << i));
        fprintf(to, "\n");
    }
    const char *fb = kr_report_text(r, "feedback"), *msg = kr_report_text(r, "message");
    if (fb)
        fprintf(to, "  %s\n", fb);
    else if (msg)
        fprintf(to, "  %s\n", msg);
    double t = get(r, "time_us");
    if (!isnan(t)) {
        fprintf(to, "  time %.2f us (p10 %.2f, p90 %.2f; %.0f samples)", t, get(r, "time_p10_us"),
                get(r, "time_p90_us"), get(r, "time_samples"));
        if (!isnan(get(r, "baseline_us")))
            fprintf(to, ", baseline %.2f us", get(r, "baseline_us"));
        fprintf(to, "\n");
        if (!isnan(get(r, "speedup")))
            fprintf(to, "  speedup %.3fx [%.3f, %.3f]", get(r, "speedup"), get(r, "speedup_low"),
                    get(r, "speedup_high"));
        if (!isnan(get(r, "achieved_gbps")))
            fprintf(to, "; %.0f GB/s, %.0f %% of the roofline floor", get(r, "achieved_gbps"),
                    100 * get(r, "roofline_fraction"));
        fprintf(to, "\n");
    }
    if (kr_report_term_count(r)) {
        fprintf(to, "  reward %.4g (%s):", kr_report_reward(r), reward_name);
        for (size_t i = 0; i < kr_report_term_count(r); i++)
            fprintf(to, "%s %s %.4g%s", i ? "," : "", kr_report_term_name(r, i),
                    kr_report_term_value(r, i), kr_report_term_counted(r, i) ? "" : " (gated)");
        fprintf(to, "\n");
    }
}

int eval_exit_code(const kr_report *r, int require_gpu)
{
    switch (kr_report_verdict(r)) {
    case KR_VERDICT_PASSED:
        return EXIT_OK;
    case KR_VERDICT_NOT_RUN:
        return require_gpu ? EXIT_ENVIRONMENT : EXIT_OK;
    case KR_VERDICT_ERROR:
    case KR_VERDICT_NONE:
        return EXIT_INTERNAL;
    default:
        return EXIT_CANDIDATE;
    }
}
