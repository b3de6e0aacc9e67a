/* kr_evaluate and kr_evaluate_program: the environment step, one report
 * through compile, plan, verify, benchmark and score. */
#include "kreward/evaluate.h"
#include "common/options.h"
#include "problem/problem_impl.h"
#include "common/strbuf.h"
#include "common/text.h"
#include "compile/compile_impl.h"
#include "evaluate/judge_code.h"
#include "bench/counters.h"
#include "run/engine.h"
#include "run/profile.h"
#include "verify/verify.h"
#include "report/report_impl.h"
#include "reward/reward_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const kr_evaluate_options evaluate_defaults = KR_EVALUATE_OPTIONS_INIT;
static const size_t evaluate_sizes[] = {0, KR__UPTO(kr_evaluate_options, name)};
static const kr__versioned evaluate_version = {"kr_evaluate_options", evaluate_sizes,
                                               KR_EVALUATE_OPTIONS_VERSION,
                                               sizeof(kr_evaluate_options)};

int kr_evaluate_options_init(kr_evaluate_options *o, uint32_t version)
{
    return kr__options_init(&evaluate_version, o, &evaluate_defaults, version);
}

static void compile_metrics(kr_report *r, const kr_program *p)
{
    kr_report_set(r, "compiled", 1);
    kr_report_set(r, "compile_seconds", kr_program_compile_seconds(p));
    kr_report_set(r, "kernels", (double)kr_program_kernel_count(p));
    int64_t regs = -1, local = 0;
    for (size_t k = 0; k < kr_program_kernel_count(p); k++) {
        int64_t v = kr_program_kernel_attr(p, k, KR_KERNEL_REGISTERS);
        regs = v > regs ? v : regs;
        v = kr_program_kernel_attr(p, k, KR_KERNEL_LOCAL_BYTES);
        local = v > local ? v : local;
    }
    if (regs >= 0) {
        kr_report_set(r, "registers", (double)regs);
        kr_report_set(r, "local_bytes", (double)local);
    }
    if (kr_program_log(p)[0])
        kr_report_set_text(r, "compile_log", kr_program_log(p));
}

/* The compile log for a model, bounded, every line marked as quoted: the
 * log echoes the candidate's own source lines, which are its text, not ours. */
static void compile_feedback(kr_context *ctx, kr_report *r)
{
    const char *log = kr_context_errdetail(ctx);
    kr__buf b = KR__BUF_INIT;
    kr__buf_printf(&b, "%s", kr_context_errmsg(ctx));
    char *quoted = log[0] ? kr__quote_lines(log, 3000, "| ") : NULL;
    if (quoted)
        kr__buf_printf(&b, "\n%s", quoted);
    free(quoted);
    kr_report_set_text(r, "feedback", b.data);
    kr_report_set_text(r, "compile_log", log);
    kr__buf_free(&b);
}

static int judged(kr_context *ctx, kr_report *r, int verdict, const char *what)
{
    kr_report_set_verdict(r, verdict);
    kr_report_set_text(r, "message", kr_context_errmsg(ctx));
    if (!kr_report_text(r, "feedback"))
        kr__report_printf(r, "feedback", "%s: %s", what, kr_context_errmsg(ctx));
    kr_report_set(r, "correct", 0);
    return KR_OK;
}

static int environment_error(kr_context *ctx, kr_report *r, int rc)
{
    kr_report_set_verdict(r, KR_VERDICT_ERROR);
    kr_report_set_text(r, "message", kr_context_errmsg(ctx));
    return rc;
}

/* Without a GPU: what can still be checked here, the problem's own
 * reference; the verdict is not_run. */
static int without_device(kr_context *ctx, const kr_problem *problem, kr_report *r)
{
    int rc = kr_problem_check_reference(ctx, problem);
    if (rc != KR_OK) {
        char msg[1100];
        snprintf(msg, sizeof msg, "the problem's reference is broken: %s", kr_context_errmsg(ctx));
        kr_report_set_verdict(r, KR_VERDICT_ERROR);
        kr_report_set_text(r, "message", msg);
        return rc;
    }
    rc = kr__fail(ctx, KR_ENODEVICE, "compiled and checked; verification and timing need an "
                  "NVIDIA GPU (%s)", ctx->device_why);
    kr_report_set_verdict(r, KR_VERDICT_NOT_RUN);
    kr_report_set_text(r, "message", kr_context_errmsg(ctx));
    return rc;
}

/* A problem that can be passed without computing it pays no speed: the
 * report says so (once per problem and context; a check that cannot run
 * leaves the report as it is). */
static void flag_weak_problem(kr_context *ctx, const kr_problem *problem, kr_report *r)
{
    int weak = 0;
    if (kr__problem_weak(ctx, problem, &weak) == KR_OK && weak)
        kr_report_set_flags(r, kr_report_flags(r) | KR_FLAG_WEAK_PROBLEM);
    kr__clear_error(ctx);
}

/* KR_PROFILE: where each evaluation's wall time went (the phases here and
 * the engine's counters, profile.h), as report metrics profile_<part>_ms
 * (so a pool's caller sees its workers' split: bench_pool --profile) and,
 * unless KR_PROFILE=metrics, one line on stderr. */
enum { PH_FACTS, PH_COMPILE, PH_PLAN, PH_VERIFY, PH_WEAK, PH_BENCH, PH_SCORE, PH_N };
static const char *const phase_names[PH_N] = {"facts", "compile", "plan", "verify", "weak",
                                              "bench", "score"};
typedef struct {
    int on, line;
    double start, mark, phase[PH_N], engine0[KR__PROF_N];
    unsigned long waits0, allocs0, frees0;
    double generated0, gpu0[KR__GPU_N], pairs0[KR__GPU_N], bytes0[KR__GPU_N];
    kr__wait_sites sites0;
} profile;

static void profile_begin(profile *pr, kr_context *ctx)
{
    memset(pr, 0, sizeof *pr);
    const char *v = kr__profile_mode();
    pr->on = v != NULL;
    pr->line = pr->on && strcmp(v, "metrics") != 0;
    pr->start = pr->mark = kr__now();
    if (pr->on && kr__engine_of(ctx)) {
        memcpy(pr->engine0, kr__engine_of(ctx)->prof, sizeof pr->engine0);
        pr->waits0 = kr__engine_of(ctx)->waits;
        pr->allocs0 = kr__engine_of(ctx)->mem_allocs;
        pr->frees0 = kr__engine_of(ctx)->mem_frees;
        pr->generated0 = kr__engine_of(ctx)->generated_bytes;
        memcpy(pr->gpu0, kr__engine_of(ctx)->gpu.gpu_s, sizeof pr->gpu0);
        memcpy(pr->pairs0, kr__engine_of(ctx)->gpu.pairs, sizeof pr->pairs0);
        memcpy(pr->bytes0, kr__engine_of(ctx)->gpu.bytes, sizeof pr->bytes0);
        /* the host's time before this evaluation's first wait counts from here */
        kr__engine_of(ctx)->sites.last_end = pr->start;
        pr->sites0 = kr__engine_of(ctx)->sites;
    }
}

/* Each wait site's share of this evaluation (wait_sites.h), and the host's
 * time after the last wait (scoring, facts, the report). */
static void profile_sites(const profile *pr, const kr__engine *e, kr_report *r)
{
    char key[96], slug[40];
    for (size_t i = 0; i < e->sites.num; i++) {
        const kr__wait_site *now = &e->sites.site[i];
        kr__wait_site was = {0};
        if (i < pr->sites0.num)
            was = pr->sites0.site[i];
        if (now->n <= was.n)
            continue;
        kr__wait_site_slug(now->what, slug, sizeof slug);
        snprintf(key, sizeof key, "profile_site_%s_n", slug);
        kr_report_set(r, key, now->n - was.n);
        snprintf(key, sizeof key, "profile_site_%s_wait_ms", slug);
        kr_report_set(r, key, 1e3 * (now->wait_s - was.wait_s));
        snprintf(key, sizeof key, "profile_site_%s_host_ms", slug);
        kr_report_set(r, key, 1e3 * (now->host_s - was.host_s));
    }
    if (e->sites.last_end >= pr->start)
        kr_report_set(r, "profile_site_tail_host_ms", 1e3 * (kr__now() - e->sites.last_end));
}

static void profile_phase(profile *pr, int phase)
{
    double now = kr__now();
    pr->phase[phase] += now - pr->mark;
    pr->mark = now;
}

static void profile_metrics(const profile *pr, const kr__engine *e, kr_report *r)
{
    char key[64];
    for (int i = 0; i < PH_N; i++) {
        snprintf(key, sizeof key, "profile_%s_ms", phase_names[i]);
        kr_report_set(r, key, 1e3 * pr->phase[i]);
    }
    for (int i = 0; e && i < KR__PROF_N; i++) {
        snprintf(key, sizeof key, "profile_engine_%s_ms", kr__prof_names[i]);
        kr_report_set(r, key, 1e3 * (e->prof[i] - pr->engine0[i]));
    }
    if (e) {
        kr_report_set(r, "profile_waits", (double)(e->waits - pr->waits0));
        /* device allocations the spares did not serve (each a cuMemAlloc,
         * whose frees may wait for the device) */
        kr_report_set(r, "profile_mem_allocs", (double)(e->mem_allocs - pr->allocs0));
        kr_report_set(r, "profile_mem_frees", (double)(e->mem_frees - pr->frees0));
        kr_report_set(r, "profile_generated_mb", (e->generated_bytes - pr->generated0) / 1e6);
        for (int i = 0; i < KR__GPU_N; i++) {
            snprintf(key, sizeof key, "profile_gpu_%s_ms", kr__gpu_names[i]);
            kr_report_set(r, key, 1e3 * (e->gpu.gpu_s[i] - pr->gpu0[i]));
            snprintf(key, sizeof key, "profile_gpu_%s_n", kr__gpu_names[i]);
            kr_report_set(r, key, e->gpu.pairs[i] - pr->pairs0[i]);
            snprintf(key, sizeof key, "profile_gpu_%s_mb", kr__gpu_names[i]);
            kr_report_set(r, key, (e->gpu.bytes[i] - pr->bytes0[i]) / 1e6);
        }
        if (e->sites.on)
            profile_sites(pr, e, r);
    }
}

static void profile_end(const profile *pr, kr_context *ctx, kr_report *r)
{
    if (!pr->on)
        return;
    profile_metrics(pr, kr__engine_of(ctx), r);
    if (!pr->line)
        return;
    char line[600];
    int n = snprintf(line, sizeof line, "kreward profile: %s %s: total %.1f ms;",
                     kr_verdict_name(kr_report_verdict(r)), kr_report_text(r, "problem") ?
                     kr_report_text(r, "problem") : "?", 1e3 * (kr__now() - pr->start));
    for (int i = 0; i < PH_N && n > 0 && (size_t)n < sizeof line; i++)
        n += snprintf(line + n, sizeof line - (size_t)n, " %s %.1f", phase_names[i],
                      1e3 * pr->phase[i]);
    const kr__engine *e = kr__engine_of(ctx);
    for (int i = 0; e && i < KR__PROF_N && n > 0 && (size_t)n < sizeof line; i++)
        n += snprintf(line + n, sizeof line - (size_t)n, "%s %s %.1f", i ? "," : "; engine:",
                      kr__prof_names[i], 1e3 * (e->prof[i] - pr->engine0[i]));
    if (e && n > 0 && (size_t)n < sizeof line)
        n += snprintf(line + n, sizeof line - (size_t)n, "; %lu waits, %.0f MB generated in %.1f ms "
                      "of GPU time", e->waits - pr->waits0, (e->generated_bytes - pr->generated0) / 1e6,
                      1e3 * (e->gpu.gpu_s[KR__GPU_GENERATE] - pr->gpu0[KR__GPU_GENERATE]));
    fprintf(stderr, "%s (ms)\n", line);
}

/* The compiled program's code, read once: its size and, given the plan,
 * whether its kernels are the reference's. */
static void judge_code(kr_context *ctx, kr_report *r, const kr_problem *problem,
                       const kr_program *prog, const kr_plan *plan, const kr_evaluate_options *o)
{
    kr__ptx_code code;
    int has_code = kr__program_read_code(prog, &code) == 0;
    kr__judge_size(r, prog, has_code ? &code : NULL);
    if (plan)
        kr__judge_compiled_copy(ctx, problem, prog, has_code ? &code : NULL, plan, o->compile, r);
    if (has_code)
        kr__ptx_code_free(&code);
}

/* A ready program and its plan: judge its code (size, copy of the
 * reference: decided here, before anything runs, so a compile worker and a
 * GPU worker say the same), check, verify, benchmark. */
static int run_program(kr_report *r, kr_context *ctx, const kr_problem *problem,
                       const kr_program *prog, const kr_plan *plan, const kr_evaluate_options *o,
                       profile *pr)
{
    compile_metrics(r, prog);
    judge_code(ctx, r, problem, prog, plan, o);
    profile_phase(pr, PH_FACTS);
    int rc = kr__program_admissible(ctx, prog);
    if (rc == KR_ECOMPILE) {
        kr_report_set(r, "compiled", 0);
        return judged(ctx, r, KR_VERDICT_COMPILE_ERROR, "not accepted");
    }
    rc = kr_plan_check(ctx, plan, problem, prog);
    if (rc == KR_EPLAN || rc == KR_ENOTFOUND)
        return judged(ctx, r, KR_VERDICT_INVALID_PLAN, "launch plan");
    if (rc != KR_OK)
        return environment_error(ctx, r, rc);
    if (!kr_context_has_device(ctx))
        return without_device(ctx, problem, r);
    profile_phase(pr, PH_PLAN);
    rc = kr_verify(r, ctx, problem, prog, plan, o->verify);
    profile_phase(pr, PH_VERIFY);
    if (rc != KR_OK || kr_report_verdict(r) != KR_VERDICT_PASSED)
        return rc;
    flag_weak_problem(ctx, problem, r);
    profile_phase(pr, PH_WEAK);
    if (o->flags & KR_EVALUATE_NO_BENCH)
        return rc;
    rc = kr_benchmark(r, ctx, problem, prog, plan, o->bench, o->baseline);
    profile_phase(pr, PH_BENCH);
    double s;
    if (rc == KR_OK && kr_report_verdict(r) == KR_VERDICT_PASSED &&
        kr_report_get(&s, r, "speedup") == KR_OK) {
        char text[1200];
        snprintf(text, sizeof text, "%s; %.2fx the baseline's speed", kr_report_text(r, "feedback"), s);
        kr_report_set_text(r, "feedback", text);
    }
    if (rc == KR_OK && kr_report_verdict(r) == KR_VERDICT_PASSED)
        kr__bench_feedback(r); /* robust conditions and counters, when asked for */
    return rc;
}

/* Source: compile (a compile error is a verdict), read the plan, run. */
static int run_source(kr_report *r, kr_context *ctx, const kr_problem *problem, const char *source,
                      size_t len, const kr_evaluate_options *o, profile *pr)
{
    /* the source's own size (feedback), and the cheap check for a copy of
     * the reference; the compiled code is judged in run_program */
    kr__judge_source_size(r, source, len);
    kr__judge_source_copy(problem, source, len, r);
    profile_phase(pr, PH_FACTS);
    kr_compile_options co;
    int rc = kr__compile_options_read(ctx, &co, o->compile);
    if (rc != KR_OK)
        return environment_error(ctx, r, rc);
    if (!co.name)
        co.name = o->name ? o->name : "candidate.cu";
    kr_program *prog = NULL;
    kr_plan *plan = NULL;
    rc = kr_compile(&prog, ctx, source, len, &co);
    profile_phase(pr, PH_COMPILE);
    if (rc == KR_ECOMPILE || rc == KR_ETIMEOUT || rc == KR_EPARSE || rc == KR_ETOOBIG) {
        kr_report_set(r, "compiled", 0);
        compile_feedback(ctx, r);
        return judged(ctx, r, KR_VERDICT_COMPILE_ERROR, "compile error");
    }
    if (rc != KR_OK)
        return environment_error(ctx, r, rc);
    rc = kr_plan_from_source(&plan, ctx, source, len, co.name);
    if (rc == KR_OK) {
        rc = run_program(r, ctx, problem, prog, plan, o, pr);
    } else if (rc == KR_EPLAN || rc == KR_ENOTFOUND) {
        compile_metrics(r, prog);
        judge_code(ctx, r, problem, prog, NULL, o);
        rc = judged(ctx, r, KR_VERDICT_INVALID_PLAN, "launch plan");
    } else {
        rc = environment_error(ctx, r, rc);
    }
    kr_plan_free(plan);
    kr_program_free(prog);
    return rc;
}

/* Common start of both entry points: arguments, options, names. */
static int begin(kr_report *r, kr_context *ctx, const kr_problem *problem,
                 const kr_evaluate_options *opts, kr_evaluate_options *o)
{
    kr__clear_error(ctx);
    char why[256];
    if (kr__options_read(&evaluate_version, o, &evaluate_defaults, opts, why, sizeof why) != KR_OK)
        return environment_error(ctx, r, kr__fail(ctx, KR_EVERSION, "%s", why));
    if (o->reward && kr__reward_check_owner(ctx, o->reward) != KR_OK)
        return environment_error(ctx, r, KR_EINVAL);
    kr_report_set_text(r, "problem", kr_problem_name(problem));
    if (o->name)
        kr_report_set_text(r, "candidate", o->name);
    return KR_OK;
}

static int score(kr_context *ctx, const kr_evaluate_options *o, kr_report *r, int rc,
                 profile *pr)
{
    if (rc == KR_OK && o->reward) {
        rc = kr_reward_score(NULL, o->reward, r);
        if (rc != KR_OK)
            kr_report_set_text(r, "message", kr_context_errmsg(ctx));
    }
    profile_phase(pr, PH_SCORE);
    profile_end(pr, ctx, r);
    return rc;
}

int kr_evaluate(kr_report *r, kr_context *ctx, const kr_problem *problem, const char *source,
                size_t len, const kr_evaluate_options *opts)
{
    if (!r)
        return KR_EINVAL;
    if (!ctx || !problem || !source) {
        kr_report_set_verdict(r, KR_VERDICT_ERROR);
        kr_report_set_text(r, "message", "kr_evaluate needs a context, a problem and a source");
        return KR_EINVAL;
    }
    kr_evaluate_options o;
    profile pr;
    profile_begin(&pr, ctx);
    int rc = begin(r, ctx, problem, opts, &o);
    if (rc != KR_OK)
        return rc;
    rc = run_source(r, ctx, problem, source, len ? len : strlen(source), &o, &pr);
    return score(ctx, &o, r, rc, &pr);
}

int kr_evaluate_program(kr_report *r, kr_context *ctx, const kr_problem *problem,
                        const kr_program *program, const kr_plan *plan,
                        const kr_evaluate_options *opts)
{
    if (!r)
        return KR_EINVAL;
    if (!ctx || !problem || !program || !plan) {
        kr_report_set_verdict(r, KR_VERDICT_ERROR);
        kr_report_set_text(r, "message",
                           "kr_evaluate_program needs a context, a problem, a program and a plan");
        return KR_EINVAL;
    }
    kr_evaluate_options o;
    profile pr;
    profile_begin(&pr, ctx);
    int rc = begin(r, ctx, problem, opts, &o);
    if (rc != KR_OK)
        return rc;
    if (kr__program_check_owner(ctx, program, "the program") != KR_OK)
        return environment_error(ctx, r, KR_EINVAL);
    rc = run_program(r, ctx, problem, program, plan, &o, &pr);
    return score(ctx, &o, r, rc, &pr);
}
