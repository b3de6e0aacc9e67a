/* A problem's fast reference (reference.fast): a tuned kernel of the same
 * function, whose outputs verification and the timed-output checks may
 * compare against instead of the naive reference's. The naive reference
 * runs several times per candidate for those (each verified case and seed,
 * each checked timed call): on large cases that was most of the GPU's time
 * per candidate (issue 34). It stays the definition of the function and the
 * baseline a benchmark times.
 *
 * Trusted only after it agrees: once per problem and context, both run on
 * every case at a fresh seed and the fast kernel's outputs must lie within
 * a quarter of each output's tolerance of the reference's, every element
 * written. A candidate is then judged against it with three quarters of
 * the tolerance, so what passes lies within the tolerance of the reference
 * (at the checked seed, up to a second-order 0.1875 x rtol of it), never in
 * a wider band a cheaper precision could use; what fails is judged again
 * against the reference itself with all of it (verify.c and bench_check.c,
 * rejudge), so an honest kernel near the tolerance passes as it would
 * without the fast kernel (docs/problem-format.md). Where it does not
 * build, disagrees, fails on a later seed or is turned off, the reference
 * serves and the report says why. One that breaks the GPU context is the
 * problem's fault, as a faulting reference is: an error that names it. */
#include "run/reference.h"
#include "common/options.h"
#include "common/random.h"
#include "run/checks.h"
#include "run/engine.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define AGREEMENT_SHARE 0.25 /* of the tolerance, fast against the reference */
#define JUDGED_SHARE 0.75    /* of the tolerance, a candidate against the fast kernel */

double kr__reference_tolerance_share(const kr__reference *ref)
{
    return ref->use_fast ? JUDGED_SHARE : 1.0;
}

static int build(kr_context *ctx, kr__reference *ref)
{
    const kr_problem *p = ref->p;
    int rc = kr__reference_build(ctx, p, 1, &ref->fast_program, &ref->fast_plan);
    if (rc == KR_OK) {
        rc = kr__plan_bind(ctx, ref->fast_plan, p, ref->fast_program, &ref->fast_bp);
        ref->fast_bound = 1;
    }
    if (rc == KR_OK && !(ref->fast_runs = calloc(p->num_cases, sizeof *ref->fast_runs)))
        rc = kr__fail(ctx, KR_ENOMEM, "out of memory");
    return rc;
}

/* Where the check stands: agreed, disagreed (why says where), not judged
 * (the check itself could not run: nothing is remembered), or broken (the
 * fast kernel broke the GPU context: an error that names it). */
enum { CHECK_AGREED, CHECK_DISAGREED, CHECK_NOT_JUDGED, CHECK_BROKE };

/* The comparison of every output of got (fast) with want (reference). */
static int compare_outputs(kr_context *ctx, const kr_problem *p, size_t c, const kr__tset *got,
                           const kr__tset *want, char *why, size_t why_size)
{
    kr__check *checks = calloc(p->num_tensors ? p->num_tensors : 1, sizeof *checks);
    if (!checks)
        return kr__fail(ctx, KR_ENOMEM, "out of memory");
    int rc = kr__checks_begin(ctx);
    for (size_t t = 0; t < p->num_tensors && rc == KR_OK; t++)
        if (kr__is_output(&p->tensors[t]))
            rc = kr__check_compare(ctx, &got->buf[t], &want->buf[t], &p->tensors[t],
                                   AGREEMENT_SHARE, kr__output_poison(&p->tensors[t], 0),
                                   &checks[t]);
    if (rc == KR_OK)
        rc = kr__checks_fetch(ctx);
    for (size_t t = 0; t < p->num_tensors && rc == KR_OK && !why[0]; t++) {
        if (!kr__is_output(&p->tensors[t]))
            continue;
        kr__cmp_stats s;
        kr__check_stats(ctx, checks[t], &s);
        if (s.mismatches || s.unwritten || s.nan_mismatch)
            snprintf(why, why_size, "it disagrees with the reference in case '%s', output '%s': "
                     "%llu of its elements outside a quarter of the tolerance (%llu unwritten, "
                     "%llu NaN where the reference has none or the reverse), the first at flat "
                     "index %llu", p->cases[c].name, p->tensors[t].name, s.mismatches, s.unwritten,
                     s.nan_mismatch, s.first_bad);
    }
    free(checks);
    return rc;
}

/* Both kernels on case c at seed. A failure of the reference is an error
 * (returned); of the fast kernel, a disagreement while the context lives. */
static int check_case(kr_context *ctx, kr__reference *ref, size_t c, uint64_t seed, int *state,
                      char *why, size_t why_size)
{
    const kr_problem *p = ref->p;
    kr__tset want, got;
    memset(&want, 0, sizeof want);
    memset(&got, 0, sizeof got);
    int rc = kr__tset_alloc(ctx, &want, p, c, KR__SET_OUTPUTS, "reference output");
    if (rc == KR_OK)
        rc = kr__tset_alloc(ctx, &got, p, c, KR__SET_OUTPUTS, "fast reference output");
    if (rc != KR_OK) {
        snprintf(why, why_size, "it could not be checked: %s", kr_context_errmsg(ctx));
        *state = CHECK_NOT_JUDGED;
        rc = ctx->poisoned ? rc : KR_OK;
    } else if ((rc = kr__reference_run_kernel(ctx, ref, c, seed, &want, 0)) == KR_OK) {
        if ((rc = kr__reference_run_kernel(ctx, ref, c, seed, &got, 1)) != KR_OK) {
            snprintf(why, why_size, "it %s in case '%s': %s",
                     rc == KR_ENOMEM ? "could not be checked" : "failed", p->cases[c].name,
                     kr_context_errmsg(ctx));
            *state = ctx->poisoned ? CHECK_BROKE
                   : rc == KR_ENOMEM ? CHECK_NOT_JUDGED : CHECK_DISAGREED;
            rc = ctx->poisoned ? rc : KR_OK;
        } else if ((rc = compare_outputs(ctx, p, c, &got, &want, why, why_size)) != KR_OK) {
            snprintf(why, why_size, "it could not be checked: %s", kr_context_errmsg(ctx));
            *state = CHECK_NOT_JUDGED;
            rc = ctx->poisoned ? rc : KR_OK;
        } else if (why[0]) {
            *state = CHECK_DISAGREED;
        }
    }
    kr__tset_free(ctx, &want);
    kr__tset_free(ctx, &got);
    return rc;
}

static int check(kr_context *ctx, kr__reference *ref, int *state, char *why, size_t why_size)
{
    *state = CHECK_AGREED;
    uint64_t seed = kr__random64();
    int rc = KR_OK;
    for (size_t c = 0; rc == KR_OK && *state == CHECK_AGREED && c < ref->p->num_cases; c++)
        rc = check_case(ctx, ref, c, kr_problem_case_seed(seed, c), state, why, why_size);
    /* the reference's runs (their scratch, scrubbed) are not kept beside the
     * fast kernel's: prepared again only if it is dropped */
    for (size_t c = 0; rc == KR_OK && *state == CHECK_AGREED && c < ref->p->num_cases; c++)
        kr__run_free(ctx, &ref->runs[c]);
    return rc;
}

/* The fast kernel built, or why not (an error only where the context broke). */
static int built(kr_context *ctx, kr__reference *ref, int *state, char *why, size_t why_size)
{
    int rc = build(ctx, ref);
    if (rc != KR_OK) {
        snprintf(why, why_size, "it %s: %s",
                 rc == KR_ENOMEM ? "could not be built" : "does not build", kr_context_errmsg(ctx));
        *state = ctx->poisoned ? CHECK_BROKE : rc == KR_ENOMEM ? CHECK_NOT_JUDGED : CHECK_DISAGREED;
    }
    return ctx->poisoned ? rc : KR_OK;
}

int kr__fast_reference_open(kr_context *ctx, kr__reference *ref)
{
    const kr_problem *p = ref->p;
    ref->use_fast = 0;
    ref->fast_why[0] = '\0';
    if (kr__knob_off("KR_FAST_REFERENCE")) {
        snprintf(ref->fast_why, sizeof ref->fast_why, "turned off ($KR_FAST_REFERENCE=0)");
        return KR_OK;
    }
    if (!p->hash[0]) { /* problems must not share one remembered answer */
        snprintf(ref->fast_why, sizeof ref->fast_why, "the problem has no hash to remember "
                 "the check by");
        return KR_OK;
    }
    kr__engine *e = kr__engine_of(ctx);
    const kr__fast_entry *known = kr__fast_memo_find(e, p->hash);
    if (known && !known->agreed) {
        snprintf(ref->fast_why, sizeof ref->fast_why, "%s", known->why);
        return KR_OK;
    }
    char why[sizeof ref->fast_why] = "";
    int state = CHECK_AGREED, rc = built(ctx, ref, &state, why, sizeof why);
    if (rc == KR_OK && !why[0] && !known)
        rc = check(ctx, ref, &state, why, sizeof why);
    if (rc != KR_OK && state == CHECK_BROKE)
        return kr__fail(ctx, rc, "%s: the problem's fast reference (reference.fast) broke the GPU "
                        "context while checked against its reference (fix it, remove it, or set "
                        "KR_FAST_REFERENCE=0): %s", p->name, why);
    if (rc != KR_OK) /* the reference's own failure, as it said */
        return rc;
    kr__clear_error(ctx);
    if (!known && state != CHECK_NOT_JUDGED)
        kr__fast_memo_remember(e, p->hash, !why[0], why);
    ref->use_fast = !why[0];
    snprintf(ref->fast_why, sizeof ref->fast_why, "%s", why);
    return KR_OK;
}

int kr__reference_open_serving(kr_context *ctx, kr__reference *ref, const kr_problem *p)
{
    int rc = kr__reference_open(ctx, ref, p);
    return rc == KR_OK && p->fast_source && !ref->golden ? kr__fast_reference_open(ctx, ref) : rc;
}
