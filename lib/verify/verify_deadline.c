/* How long one run of the candidate may take before it is a hang.
 *
 * A hanging kernel holds the GPU (and the worker) until its deadline, and
 * the caller's timeout_s (10 s by default) is sized for the slowest honest
 * run of any problem: in a batch with a few hanging candidates those
 * seconds were most of the GPU's time. A run may instead take a multiple of
 * what the problem's own reference took on the same case
 * (KR__DEADLINE_FACTOR, at least KR__DEADLINE_FLOOR_S: verify_impl.h),
 * never more than timeout_s. On a small case the reference is a launch
 * of a few microseconds, and a run 10^5 times that (a third of a second)
 * is a hang, whatever the kernel meant; on a large case the factor reaches
 * timeout_s, so a correct but hopelessly slow kernel (one thread walking
 * the vector) is still judged, and flagged slow by the benchmark.
 *
 * The reference is timed once per problem and case in a context, before
 * the first unit of the case, on seeds of its own (its outputs answer no
 * input a candidate sees, and are scrubbed before any candidate runs). A
 * golden reference (the caller's host code) has no GPU time, and a
 * candidate that calls device printf waits on the host: timeout_s. */
#include "verify/verify_impl.h"
#include "common/random.h"
#include "compile/program_impl.h"
#include "run/workspace.h"

#include <stdlib.h>
#include <string.h>

double kr__vdeadline_rule(double reference_s, double timeout_s)
{
    if (!(reference_s > 0))
        return timeout_s;
    double d = KR__DEADLINE_FACTOR * reference_s;
    if (d < KR__DEADLINE_FLOOR_S)
        d = KR__DEADLINE_FLOOR_S;
    return d < timeout_s ? d : timeout_s;
}

static kr__ref_time_entry *entry(kr__engine *e, const kr_problem *p)
{
    for (size_t i = 0; i < e->num_ref_times; i++)
        if (strcmp(e->ref_times[i].hash, p->hash) == 0 && e->ref_times[i].num_cases == p->num_cases)
            return &e->ref_times[i];
    double *seconds = calloc(p->num_cases ? p->num_cases : 1, sizeof *seconds);
    kr__ref_time_entry *grown = seconds ? realloc(e->ref_times, (e->num_ref_times + 1) * sizeof *grown)
                                        : NULL;
    if (!grown) {
        free(seconds);
        return NULL; /* timed again next time */
    }
    e->ref_times = grown;
    kr__ref_time_entry *x = &grown[e->num_ref_times++];
    memset(x, 0, sizeof *x);
    memcpy(x->hash, p->hash, sizeof x->hash);
    x->hash[sizeof x->hash - 1] = 0;
    x->num_cases = p->num_cases;
    x->seconds = seconds;
    return x;
}

/* The reference's time on case c: the reference itself (not a fast kernel
 * that may serve the expected outputs: the deadline is the reference's
 * multiple, as the benchmark's baseline is the reference), its launches
 * alone (an event pair in reference.c), the faster of two runs on fresh
 * seeds (the first may load its module: lazy loading adds a first launch's
 * milliseconds, which times 10^5 would reach any timeout). 0 where the
 * time could not be read (no event pair): the deadline is then timeout_s. */
static int time_reference(vstate *v, size_t c, double *seconds)
{
    kr_context *ctx = v->ctx;
    kr__tset out;
    int rc = kr__tset_alloc(ctx, &out, v->p, c, KR__SET_OUTPUTS, "reference timing output");
    int prepared = v->ref.runs[c].bp != NULL;
    double best = 0;
    v->ref.time_launch = 1;
    for (int run = 0; run < 2 && rc == KR_OK; run++) {
        v->ref.last_launch_s = 0;
        rc = kr__reference_run_kernel(ctx, &v->ref, c, kr_problem_case_seed(kr__random64(), c), &out, 0);
        double t = v->ref.last_launch_s;
        if (rc == KR_OK && t > 0 && (best == 0 || t < best))
            best = t;
    }
    v->ref.time_launch = 0;
    /* where the fast kernel serves, the reference's run for this case is
     * not kept (its scratch) for a context that does not run it again */
    if (!prepared && v->ref.use_fast && !ctx->poisoned)
        kr__run_free(ctx, &v->ref.runs[c]);
    kr__tset_free(ctx, &out); /* scrubbed on the way out (dbuf.c) */
    *seconds = best;
    return rc;
}

int kr__vdeadline(vstate *v, size_t c, double *deadline, double *reference_s)
{
    kr__engine *e = kr__engine_of(v->ctx);
    *deadline = v->o.timeout_s;
    *reference_s = 0;
    /* device printf: the run's wall follows the host draining its buffer
     * (an honest kernel's debugging print from every thread took 0.35 s on
     * a one-element case, 10^5 times the reference) */
    const kr_program *prog = v->cand.program;
    if (v->ref.golden || !e || !v->p->hash[0] || c >= v->p->num_cases ||
        (prog && prog->facts.uses_printf))
        return KR_OK;
    kr__ref_time_entry *x = entry(e, v->p);
    double t = x ? x->seconds[c] : 0;
    if (!(t > 0)) {
        int rc = time_reference(v, c, &t);
        if (rc != KR_OK)
            return rc;
        if (x)
            x->seconds[c] = t;
    }
    *reference_s = t;
    *deadline = kr__vdeadline_rule(t, v->o.timeout_s);
    return KR_OK;
}
