/* kr_benchmark: time a candidate against a baseline the way nvbench does,
 * hardened against kernels that game the measurement. This file holds the
 * measurement (kr__bench_run), the options, and setting up and tearing
 * down the buffer sets, sides and reference; bench_sample.c takes the
 * samples, bench_cupti.c attributes CUPTI's records, bench_results.c
 * reports; kr_benchmark (bench_entry.c) adds what bench_robust.c measures
 * when asked. */
#include "bench/bench_impl.h"
#include "bench/bench.h"
#include "common/hash.h"
#include "common/options.h"
#include "common/random.h"
#include "compile/program_impl.h"
#include "driver/trace.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct {
    uint32_t min_samples, max_samples, sets;
    double min_time, max_time, noise, check_fraction;
} presets[] = {
    {0, 0, 0, 0, 0, 0, 0},
    {10, 200, 4, 0.002, 0.12, 0.02, 0.1},     /* fast */
    {30, 5000, 6, 0.5, 15.0, 0.005, 0.05},    /* precise */
};

static const kr_bench_options bench_defaults = KR_BENCH_OPTIONS_INIT;
static const size_t bench_sizes[] = {0, KR__UPTO(kr_bench_options, case_index),
                                     KR__UPTO(kr_bench_options, max_call_s)};
static const kr__versioned bench_version = {"kr_bench_options", bench_sizes,
                                            KR_BENCH_OPTIONS_VERSION, sizeof(kr_bench_options)};

static const kr_baseline baseline_defaults = KR_BASELINE_INIT;
static const size_t baseline_sizes[] = {0, KR__UPTO(kr_baseline, name)};
static const kr__versioned baseline_version = {"kr_baseline", baseline_sizes, KR_BASELINE_VERSION,
                                               sizeof(kr_baseline)};

int kr_bench_options_init(kr_bench_options *o, uint32_t version, int preset)
{
    if (preset != KR_BENCH_FAST && preset != KR_BENCH_PRECISE)
        return KR_EINVAL;
    int rc = kr__options_init(&bench_version, o, &bench_defaults, version);
    if (rc == KR_OK)
        o->preset = (uint32_t)preset;
    return rc;
}

int kr__bench_options_read(kr_bench_options *dst, const kr_bench_options *src, char *why,
                           size_t why_size)
{
    return kr__options_read(&bench_version, dst, &bench_defaults, src, why, why_size);
}

int kr_baseline_init(kr_baseline *b, uint32_t version)
{
    return kr__options_init(&baseline_version, b, &baseline_defaults, version);
}

static void fill_defaults(kr_bench_options *o)
{
    uint32_t p = o->preset == KR_BENCH_PRECISE ? 2 : 1;
    o->preset = p;
    o->min_samples = o->min_samples ? o->min_samples : presets[p].min_samples;
    o->max_samples = o->max_samples ? o->max_samples : presets[p].max_samples;
    if (o->max_samples < o->min_samples)
        o->max_samples = o->min_samples;
    o->min_time_s = o->min_time_s > 0 ? o->min_time_s : presets[p].min_time;
    o->max_time_s = o->max_time_s > 0 ? o->max_time_s : presets[p].max_time;
    o->target_noise = o->target_noise > 0 ? o->target_noise : presets[p].noise;
    o->buffer_sets = o->buffer_sets ? o->buffer_sets : presets[p].sets;
    if (o->buffer_sets > KR__BENCH_MAX_SETS)
        o->buffer_sets = KR__BENCH_MAX_SETS;
    o->check_fraction = o->check_fraction > 0 ? o->check_fraction : presets[p].check_fraction;
    o->max_slowdown = o->max_slowdown > 0 ? o->max_slowdown : 50;
    o->max_call_s = o->max_call_s > 0 ? o->max_call_s : 1.0;
}

/* A side that runs a plan: one run per buffer set, bound to it. */
static int bind_side(bstate *b, bside *s, const kr_program *prog, const kr_plan *plan)
{
    int rc = kr__plan_bind(b->ctx, plan, b->p, prog, &s->bp);
    s->bound = 1;
    for (size_t k = 0; k < b->sets && rc == KR_OK; k++) {
        rc = kr__run_prepare(b->ctx, &s->run[k], &s->bp, b->c);
        if (rc == KR_OK)
            kr__run_bind(&s->run[k], &b->set[k], &b->set[k]);
    }
    return rc;
}

static int capture_graphs(bstate *b, bside *s)
{
    const kr__cuda_api *cu = kr__cuda();
    for (size_t k = 0; k < b->sets; k++) {
        CUgraph graph = NULL;
        size_t failed;
        KR__CU(b->ctx, cu->cuStreamBeginCapture(b->e->stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL),
           "cuStreamBeginCapture");
        int rc = kr__run_launch(b->ctx, &s->run[k], &failed);
        CUresult r = cu->cuStreamEndCapture(b->e->stream, &graph);
        if (rc != KR_OK)
            return rc;
        if (r != CUDA_SUCCESS)
            return kr__cuda_fail(b->ctx, r, "cuStreamEndCapture");
        r = cu->cuGraphInstantiateWithFlags(&s->graph[k], graph, 0);
        cu->cuGraphDestroy(graph);
        if (r != CUDA_SUCCESS)
            return kr__cuda_fail(b->ctx, r, "cuGraphInstantiateWithFlags");
    }
    return KR_OK;
}

static int setup_buffers(bstate *b)
{
    const kr__cuda_api *cu = kr__cuda();
    int rc = KR_OK;
    for (size_t k = 0; k < b->sets && rc == KR_OK; k++)
        rc = kr__tset_alloc(b->ctx, &b->set[k], b->p, b->c, KR__SET_ALL, "benchmark buffer set");
    /* at least twice the L2, so nothing of the last sample survives */
    uint64_t flush = (uint64_t)(b->e->l2_bytes > 0 ? b->e->l2_bytes : 64 << 20) * 2;
    if (rc == KR_OK && !(b->o.flags & KR_BENCH_NO_FLUSH))
        rc = kr__dbuf_alloc(b->ctx, &b->flush, flush, "the L2 flush buffer");
    if (rc != KR_OK)
        return rc;
    for (int i = 0; i < 2; i++) {
        KR__CU(b->ctx, cu->cuEventCreate(&b->ev_start[i], CU_EVENT_DEFAULT), "cuEventCreate");
        KR__CU(b->ctx, cu->cuEventCreate(&b->ev_stop[i], CU_EVENT_DEFAULT), "cuEventCreate");
        KR__CU(b->ctx, cu->cuEventCreate(&b->ev_done[i], CU_EVENT_DISABLE_TIMING), "cuEventCreate");
    }
    /* persisting-L2 windows survive memset flushes: disable and reset them */
    cu->cuCtxSetLimit(CU_LIMIT_PERSISTING_L2_CACHE_SIZE, 0);
    cu->cuCtxResetPersistingL2Cache();
    return KR_OK;
}

/* The reference for timed-output checks (a reference kernel, or the golden
 * callback on the timed calls' inputs), and where its outputs go. */
static int setup_reference(bstate *b)
{
    b->has_ref = 1; /* teardown closes whatever the open left */
    int rc = kr__reference_open_serving(b->ctx, &b->ref, b->p);
    if (rc == KR_OK)
        rc = kr__tset_alloc(b->ctx, &b->want, b->p, b->c, KR__SET_OUTPUTS, "reference copy");
    return rc;
}

static int setup_baseline(bstate *b, const kr_baseline *bl)
{
    bside *s = &b->s[1];
    s->name = bl->name ? bl->name : bl->kind == KR_BASELINE_REFERENCE ? "reference"
                                  : bl->kind == KR_BASELINE_CALLBACK ? "callback" : "baseline";
    if (bl->kind == KR_BASELINE_REFERENCE && b->ref.program) {
        s->active = 1;
        return bind_side(b, s, b->ref.program, b->ref.plan);
    }
    if (bl->kind == KR_BASELINE_PROGRAM) {
        if (!bl->program || !bl->plan)
            return kr__fail(b->ctx, KR_EINVAL, "a program baseline needs a program and a plan");
        if (kr__program_check_owner(b->ctx, bl->program, "the baseline program") != KR_OK)
            return KR_EINVAL;
        s->active = 1;
        return bind_side(b, s, bl->program, bl->plan);
    }
    if (bl->kind == KR_BASELINE_CALLBACK) {
        if (!bl->fn)
            return kr__fail(b->ctx, KR_EINVAL, "a callback baseline needs a function");
        s->active = s->callback = 1;
        s->fn = bl->fn;
        s->user = bl->user;
    }
    return KR_OK;
}

static int setup(bstate *b, const kr_program *cand, const kr_plan *plan, const kr_baseline *bl)
{
    int rc = kr__engine_get(b->ctx, &b->e);
    if (rc == KR_OK)
        rc = setup_buffers(b);
    if (rc != KR_OK)
        return rc;
    b->s[0].active = 1;
    b->s[0].name = "candidate";
    if ((rc = bind_side(b, &b->s[0], cand, plan)) != KR_OK) {
        b->candidate_failed = 1; /* its plan, or scratch that does not fit */
        return rc;
    }
    /* the reference serves the timed-output checks and a reference
     * baseline; a benchmark with neither opens none (a golden problem timed
     * unchecked needs no callback) */
    int need_ref = !(b->o.flags & KR_BENCH_NO_CHECK) ||
                   (bl->kind == KR_BASELINE_REFERENCE && b->p->reference_kind != KR_REFERENCE_GOLDEN);
    if (need_ref && (rc = setup_reference(b)) != KR_OK)
        return rc;
    rc = setup_baseline(b, bl);
    if (rc == KR_OK && (b->o.flags & KR_BENCH_GRAPH))
        for (int w = 0; w < 2 && rc == KR_OK; w++)
            if (b->s[w].active && !b->s[w].callback)
                rc = capture_graphs(b, &b->s[w]);
    return rc;
}

static void teardown(bstate *b)
{
    const kr__cuda_api *cu = kr__cuda();
    int alive = !b->ctx->poisoned && b->e;
    for (int w = 0; w < 2; w++) {
        bside *s = &b->s[w];
        for (size_t k = 0; k < KR__BENCH_MAX_SETS; k++) {
            if (s->graph[k] && alive)
                cu->cuGraphExecDestroy(s->graph[k]);
            kr__run_free(b->ctx, &s->run[k]);
        }
        if (s->bound)
            kr__plan_unbind(&s->bp);
        free(s->event_us);
        free(s->clock_mhz);
    }
    for (size_t k = 0; k < KR__BENCH_MAX_SETS; k++)
        kr__tset_free(b->ctx, &b->set[k]);
    kr__tset_free(b->ctx, &b->want);
    kr__dbuf_free(b->ctx, &b->flush);
    if (b->has_ref)
        kr__reference_close(b->ctx, &b->ref);
    for (int i = 0; i < 2; i++) {
        if (alive && b->ev_start[i])
            cu->cuEventDestroy(b->ev_start[i]);
        if (alive && b->ev_stop[i])
            cu->cuEventDestroy(b->ev_stop[i]);
        if (alive && b->ev_done[i])
            cu->cuEventDestroy(b->ev_done[i]);
    }
    free(b->order);
}

uint64_t kr__bench_memo_key(const bstate *b, const kr_baseline *bl)
{
    if (bl->kind != KR_BASELINE_REFERENCE || !b->ref.program || b->occupy || !b->p->hash[0] ||
        b->o.preset == KR_BENCH_PRECISE || (b->o.flags & KR_BENCH_NO_SHARE))
        return 0; /* (an empty hash: its hashing failed; problems must not share one key) */
    /* what the baseline's samples depend on: the problem (its reference and
     * plan are part of its hash), the case, the options that change how a
     * sample is taken, the device */
    kr__hasher h;
    if (kr__hasher_init(&h) != 0)
        return 0;
    kr__hasher_str(&h, b->p->hash);
    kr__hasher_u64(&h, b->c);
    kr__hasher_u64(&h, b->o.flags & (KR_BENCH_NO_FLUSH | KR_BENCH_GRAPH | KR_BENCH_EVENTS_ONLY));
    kr__hasher_u64(&h, b->sets);
    kr__hasher_u64(&h, (uint64_t)b->ctx->device_ordinal);
    kr__hash128 k = kr__hasher_final(&h);
    return k.lo ? k.lo : 1;
}

static int read_options(bstate *b, const kr_bench_options *opts, const kr_baseline *base,
                        kr_baseline *bl)
{
    char why[256];
    if (kr__options_read(&bench_version, &b->o, &bench_defaults, opts, why, sizeof why) != KR_OK ||
        kr__options_read(&baseline_version, bl, &baseline_defaults, base, why, sizeof why) != KR_OK)
        return kr__fail(b->ctx, KR_EVERSION, "%s", why);
    fill_defaults(&b->o);
    b->c = b->o.case_index < 0 ? b->p->timing_case : (size_t)b->o.case_index;
    if (b->c >= b->p->num_cases)
        return kr__fail(b->ctx, KR_EINVAL, "case %lld does not exist", (long long)b->o.case_index);
    b->sets = b->o.buffer_sets;
    /* KR_BENCH_AHEAD=0: each sample makes its own set's values after the
     * call before it is done (as before the samples overlapped), for
     * comparisons. Warm-L2 timing (no flush) makes them right before its
     * call: a checked call's work, queued after the next set's values,
     * would have taken their place in the cache */
    b->ahead = !kr__knob_off("KR_BENCH_AHEAD") && !(b->o.flags & KR_BENCH_NO_FLUSH);
    /* KR_BENCH_PAIR=0: each sample read before the next is queued */
    b->pair = !kr__knob_off("KR_BENCH_PAIR");
    b->seeds = b->o.seed ? b->o.seed : kr__random64();
    b->key = b->key ? b->key : kr__random64();
    return KR_OK;
}

/* A failure the candidate caused is its verdict, and the benchmark returns
 * KR_OK (judged): a fault or hang during timing, a program that may not run
 * as a candidate, a plan or scratch that does not fit, a refused launch.
 * Anything else is the environment's (KR_VERDICT_ERROR stays for that),
 * a timed call's check that failed after the call itself was waited for
 * among it. */
static int judge_failure(bstate *b, kr_report *r, int rc)
{
    int verdict = b->library_failed ? KR_VERDICT_NONE
                : rc == KR_EFAULT ? KR_VERDICT_FAULT
                : rc == KR_ETIMEOUT ? KR_VERDICT_TIMEOUT
                : rc == KR_ECOMPILE ? KR_VERDICT_COMPILE_ERROR
                : !b->candidate_failed ? KR_VERDICT_NONE
                : rc == KR_EPLAN || rc == KR_ENOMEM ? KR_VERDICT_INVALID_PLAN
                : rc == KR_ECUDA ? KR_VERDICT_LAUNCH_ERROR : KR_VERDICT_NONE;
    kr_report_set_text(r, "message", kr_context_errmsg(b->ctx));
    if (verdict == KR_VERDICT_NONE)
        return rc;
    kr_report_set_verdict(r, verdict);
    kr_report_set(r, "correct", 0);
    kr__report_printf(r, "feedback", "while timing: %s", kr_context_errmsg(b->ctx));
    return KR_OK;
}

int kr__bench_run(kr_report *r, kr_context *ctx, const kr_problem *problem,
                  const kr_program *cand, const kr_plan *plan, const kr_bench_options *opts,
                  const kr_baseline *baseline, unsigned occupy, kr__bench_used *used)
{
    if (used)
        memset(used, 0, sizeof *used);
    if (!r)
        return KR_EINVAL;
    if (!ctx || !problem || !cand || !plan) {
        kr_report_set_text(r, "message", "kr_benchmark needs a context, problem, program and plan");
        return kr__fail(ctx, KR_EINVAL, "kr_benchmark needs a context, problem, program and plan");
    }
    kr__clear_error(ctx);
    bstate *b = calloc(1, sizeof *b);
    if (!b)
        return kr__fail(ctx, KR_ENOMEM, "out of memory");
    b->ctx = ctx;
    b->p = problem;
    b->occupy = occupy;
    kr_baseline bl;
    int rc = kr__program_check_owner(ctx, cand, "the candidate");
    if (rc == KR_OK)
        rc = kr__program_admissible(ctx, cand);
    if (rc == KR_OK)
        rc = read_options(b, opts, baseline, &bl);
    double wall = 0;
    if (rc == KR_OK)
        rc = setup(b, cand, plan, &bl);
    if (rc == KR_OK)
        b->memo_key = kr__bench_memo_key(b, &bl);
    if (rc == KR_OK) {
        /* CUPTI's records are process-wide: one measurement at a time */
        kr__trace_lock();
        rc = b->occupy ? kr__bench_occupy_start(b) : KR_OK;
        if (rc == KR_OK)
            rc = kr__bench_measure(b, &wall);
        if (b->occupy)
            kr__bench_occupy_stop(b);
        if (rc == KR_OK)
            rc = kr__bench_results(b, r, wall);
        kr__trace_unlock();
    }
    if (rc != KR_OK)
        rc = judge_failure(b, r, rc);
    teardown(b);
    if (used && rc == KR_OK && b->o.version) {
        used->o = b->o;
        used->bl = bl;
        used->c = b->c;
        used->read = 1;
    }
    free(b);
    return rc;
}
