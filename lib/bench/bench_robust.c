/* What a benchmark adds when asked, after its measurement and on runs of
 * its own: hardware counters (KR_BENCH_COUNTERS, counters.c) and the
 * robust speedup (KR_BENCH_ROBUST): the benchmark again, whole, under
 * each perturbed condition, each into a scratch report whose speedup is
 * kept:
 *   - the other L2 state: warm (no flush between samples) when the
 *     measurement flushed, cold when it did not;
 *   - co_running: a kernel holding a quarter of the SMs (one block per SM
 *     that takes all its shared memory and half its threads) spins for the
 *     whole measurement, as another job's kernel would; timed with events,
 *     since that kernel is the engine's own spin kernel to CUPTI;
 *   - case_<name>: up to two other cases of the problem (other shapes).
 * A condition whose timed outputs come out wrong, or that faults, fails
 * the candidate as the measurement itself would. The default path never
 * comes here. */
#include "bench/bench_impl.h"
#include "common/clock.h"
#include "driver/trace.h"
#include "bench/counters.h"
#include "bench/robust.h"

#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_CASES 2
#define MAX_CONDS (3 + MAX_CASES)
#define OCCUPY_SHARE 4 /* one SM in this many (bench_occupy.c holds them) */

static double metric(const kr_report *r, const char *key)
{
    double v;
    return kr_report_get(&v, r, key) == KR_OK ? v : NAN;
}

static void keep(kr__robust_cond *c, const kr_report *r)
{
    c->speedup = metric(r, "speedup");
    c->speedup_low = metric(r, "speedup_low");
    c->speedup_high = metric(r, "speedup_high");
    c->time_us = metric(r, "time_us");
    c->baseline_us = metric(r, "baseline_us");
    if (isnan(c->speedup) && !c->why[0])
        snprintf(c->why, sizeof c->why, "no speedup: the benchmark had no baseline");
}

/* A condition's failure that is the candidate's becomes the report's. */
static int fails_candidate(kr_report *r, const kr_report *sub, const char *cond)
{
    int v = kr_report_verdict(sub);
    if (v == KR_VERDICT_PASSED || v == KR_VERDICT_NONE)
        return 0;
    kr_report_set_verdict(r, v);
    kr_report_set_flags(r, kr_report_flags(r) | kr_report_flags(sub));
    kr_report_set(r, "correct", 0);
    const char *msg = kr_report_text(sub, "message") ? kr_report_text(sub, "message") : "";
    kr__report_printf(r, "message", "under the robust condition %s: %s", cond, msg);
    const char *fb = kr_report_text(sub, "feedback") ? kr_report_text(sub, "feedback") : msg;
    kr__report_printf(r, "feedback", "under the robust condition %s: %s", cond, fb);
    return 1;
}

typedef struct rctx {
    kr_report *r;
    kr_context *ctx;
    const kr_problem *p;
    const kr_program *cand;
    const kr_plan *plan;
    const kr_baseline *bl;
    int failed;            /* a condition failed the candidate */
} rctx;

/* One condition: the benchmark again with these options. */
static int measure(rctx *x, kr__robust_cond *c, const kr_bench_options *o, unsigned occupy)
{
    kr_report *sub = NULL;
    if (kr_report_new(&sub) != KR_OK)
        return kr__fail(x->ctx, KR_ENOMEM, "out of memory");
    int rc = kr__bench_run(sub, x->ctx, x->p, x->cand, x->plan, o, x->bl, occupy, NULL);
    if (rc == KR_OK && fails_candidate(x->r, sub, c->name))
        x->failed = 1;
    else if (rc == KR_OK)
        keep(c, sub);
    else
        snprintf(c->why, sizeof c->why, "%s", kr_context_errmsg(x->ctx));
    c->source = (o->flags & KR_BENCH_EVENTS_ONLY) || !kr__trace_active() ? "events" : "cupti";
    kr_report_free(sub);
    /* a condition the environment could not measure is left out (its why
     * says so); a context that cannot go on ends them all */
    return x->ctx->poisoned ? rc : KR_OK;
}

static kr__robust_cond *add(kr__robust_cond *c, size_t *n, const char *name)
{
    kr__robust_cond *k = &c[(*n)++];
    memset(k, 0, sizeof *k);
    snprintf(k->name, sizeof k->name, "%s", name);
    k->speedup = k->speedup_low = k->speedup_high = k->time_us = k->baseline_us = NAN;
    return k;
}

static int robust(kr_report *r, kr_context *ctx, const kr_problem *p, const kr_program *cand,
                  const kr_plan *plan, const kr_bench_options *o, const kr_baseline *bl, size_t c)
{
    double t0 = kr__now();
    rctx x = {r, ctx, p, cand, plan, bl, 0};
    kr__robust_cond conds[MAX_CONDS];
    size_t n = 0;
    kr_bench_options sub = *o;
    sub.flags &= ~(KR_BENCH_COUNTERS | KR_BENCH_ROBUST);
    sub.case_index = (int64_t)c;
    int flushed = !(o->flags & KR_BENCH_NO_FLUSH);
    /* the measurement itself is the first condition */
    kr__robust_cond *first = add(conds, &n, flushed ? "cold_l2" : "warm_l2");
    keep(first, r);
    first->source = "benchmark";
    kr_bench_options other = sub;
    other.flags ^= KR_BENCH_NO_FLUSH;
    int rc = measure(&x, add(conds, &n, flushed ? "warm_l2" : "cold_l2"), &other, 0);
    kr__engine *e = kr__engine_of(ctx);
    unsigned occupy = e && e->sm_count >= OCCUPY_SHARE ? (unsigned)(e->sm_count / OCCUPY_SHARE) : 1;
    kr__robust_cond *co = add(conds, &n, "co_running");
    if (bl->kind == KR_BASELINE_CALLBACK) {
        /* its sample synchronizes the device, which would wait for the
         * co-running kernel to give up */
        snprintf(co->why, sizeof co->why, "not measured: a callback baseline synchronizes the "
                 "device");
    } else if (rc == KR_OK && !x.failed) {
        kr_bench_options busy = sub;
        busy.flags |= KR_BENCH_EVENTS_ONLY;
        rc = measure(&x, co, &busy, occupy);
    }
    for (size_t k = 0, used = 0; k < p->num_cases && used < MAX_CASES && rc == KR_OK && !x.failed;
         k++) {
        if (k == c)
            continue;
        char name[64];
        kr__robust_key(name, sizeof name, "case_", p->cases[k].name);
        kr_bench_options shape = sub;
        shape.case_index = (int64_t)k;
        rc = measure(&x, add(conds, &n, name), &shape, 0);
        used++;
    }
    if (rc == KR_OK && !x.failed)
        kr__robust_report(r, conds, n, kr__now() - t0, (int)occupy);
    return rc;
}

/* A fault or hang on a counters run is the candidate's, as in timing. */
static int judge(kr_report *r, kr_context *ctx, int rc)
{
    int verdict = rc == KR_EFAULT ? KR_VERDICT_FAULT : rc == KR_ETIMEOUT ? KR_VERDICT_TIMEOUT : 0;
    if (!verdict)
        return rc;
    kr_report_set_verdict(r, verdict);
    kr_report_set(r, "correct", 0);
    kr_report_set_text(r, "message", kr_context_errmsg(ctx));
    kr__report_printf(r, "feedback", "while collecting counters: %s", kr_context_errmsg(ctx));
    return KR_OK;
}

int kr__bench_extras(kr_report *r, kr_context *ctx, const kr_problem *p, const kr_program *cand,
                     const kr_plan *plan, const kr_bench_options *o, const kr_baseline *bl,
                     size_t c)
{
    int v = kr_report_verdict(r);
    if (v != KR_VERDICT_PASSED && v != KR_VERDICT_NONE)
        return KR_OK; /* judged already: nothing to profile */
    if (kr_report_flags(r) & KR_FLAG_SLOW) {
        /* a candidate stopped as too slow would take passes x its time */
        if (o->flags & KR_BENCH_COUNTERS) {
            kr_report_set(r, "counters_available", 0);
            kr_report_set_text(r, "counters_why", "not collected: the candidate was stopped as slow");
        }
        return KR_OK;
    }
    int rc = KR_OK;
    if (o->flags & KR_BENCH_ROBUST)
        rc = robust(r, ctx, p, cand, plan, o, bl, c);
    v = kr_report_verdict(r);
    if (rc == KR_OK && (o->flags & KR_BENCH_COUNTERS) &&
        (v == KR_VERDICT_PASSED || v == KR_VERDICT_NONE))
        rc = judge(r, ctx, kr__counters_collect(r, ctx, p, cand, plan, c));
    return rc;
}
