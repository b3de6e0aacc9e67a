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
 * written. So a candidate judged against it is within 1.25 tolerances of
 * the reference where it passes (docs/problem-format.md). Where it does not
 * build, does not agree or is turned off, the reference serves as before
 * and the report says why. */
#include "run/reference.h"
#include "common/random.h"
#include "run/checks.h"
#include "run/engine.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FAST_TOLERANCE_SHARE 0.25

static const kr__fast_entry *find(const kr__engine *e, const char *hash)
{
    for (size_t i = 0; i < e->num_fast; i++)
        if (strcmp(e->fast[i].hash, hash) == 0)
            return &e->fast[i];
    return NULL;
}

static void remember(kr__engine *e, const char *hash, int agreed, const char *why)
{
    kr__fast_entry *grown = realloc(e->fast, (e->num_fast + 1) * sizeof *grown);
    if (!grown)
        return; /* checked again next time */
    e->fast = grown;
    kr__fast_entry *x = &grown[e->num_fast++];
    snprintf(x->hash, sizeof x->hash, "%s", hash);
    x->agreed = agreed;
    snprintf(x->why, sizeof x->why, "%s", why ? why : "");
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

/* Runs both on case c at seed and compares every output on the device;
 * why is set when they disagree. An error only where the context broke. */
static int compare_case(kr_context *ctx, kr__reference *ref, size_t c, uint64_t seed, char *why,
                        size_t why_size)
{
    const kr_problem *p = ref->p;
    kr__tset want, got;
    memset(&want, 0, sizeof want);
    memset(&got, 0, sizeof got);
    int rc = kr__tset_alloc(ctx, &want, p, c, KR__SET_OUTPUTS, "reference output");
    if (rc == KR_OK)
        rc = kr__tset_alloc(ctx, &got, p, c, KR__SET_OUTPUTS, "fast reference output");
    ref->use_fast = 0;
    if (rc == KR_OK)
        rc = kr__reference_run(ctx, ref, c, seed, &want);
    ref->use_fast = 1;
    if (rc == KR_OK && (rc = kr__reference_run(ctx, ref, c, seed, &got)) != KR_OK &&
        !ctx->poisoned) {
        snprintf(why, why_size, "it failed in case '%s': %s", p->cases[c].name,
                 kr_context_errmsg(ctx));
        rc = KR_OK;
    }
    kr__check *checks = calloc(p->num_tensors ? p->num_tensors : 1, sizeof *checks);
    size_t num = 0;
    if (rc == KR_OK && !checks)
        rc = kr__fail(ctx, KR_ENOMEM, "out of memory");
    if (rc == KR_OK && !why[0])
        rc = kr__checks_begin(ctx);
    for (size_t t = 0; rc == KR_OK && !why[0] && t < p->num_tensors; t++) {
        if (!kr__is_output(&p->tensors[t]))
            continue;
        kr__tensor tight = p->tensors[t];
        tight.rtol *= FAST_TOLERANCE_SHARE;
        tight.atol *= FAST_TOLERANCE_SHARE;
        rc = kr__check_compare(ctx, &got.buf[t], &want.buf[t], &tight,
                               kr__output_poison(&p->tensors[t], 0), &checks[num++]);
    }
    if (rc == KR_OK && !why[0])
        rc = kr__checks_fetch(ctx);
    num = 0;
    for (size_t t = 0; rc == KR_OK && !why[0] && t < p->num_tensors; t++) {
        if (!kr__is_output(&p->tensors[t]))
            continue;
        kr__cmp_stats s;
        kr__check_stats(ctx, checks[num++], &s);
        if (s.mismatches || s.unwritten || s.nan_mismatch)
            snprintf(why, why_size, "it disagrees with the reference in case '%s', output '%s': "
                     "%llu of its elements outside a quarter of the tolerance (%llu unwritten, "
                     "%llu NaN where the reference has none or the reverse), the first at flat "
                     "index %llu", p->cases[c].name, p->tensors[t].name, s.mismatches, s.unwritten,
                     s.nan_mismatch, s.first_bad);
    }
    free(checks);
    kr__tset_free(ctx, &want);
    kr__tset_free(ctx, &got);
    return rc;
}

static int check(kr_context *ctx, kr__reference *ref, char *why, size_t why_size)
{
    int rc = build(ctx, ref);
    if (rc != KR_OK) {
        snprintf(why, why_size, "it does not build: %s", kr_context_errmsg(ctx));
        return ctx->poisoned ? rc : KR_OK;
    }
    uint64_t seed = kr__random64();
    for (size_t c = 0; rc == KR_OK && !why[0] && c < ref->p->num_cases; c++)
        rc = compare_case(ctx, ref, c, kr_problem_case_seed(seed, c), why, why_size);
    return rc;
}

int kr__fast_reference_open(kr_context *ctx, kr__reference *ref)
{
    const kr_problem *p = ref->p;
    ref->use_fast = 0;
    const char *env = getenv("KR_FAST_REFERENCE");
    if (env && strcmp(env, "0") == 0) {
        snprintf(ref->fast_why, sizeof ref->fast_why, "turned off ($KR_FAST_REFERENCE=0)");
        return KR_OK;
    }
    kr__engine *e = kr__engine_of(ctx);
    const kr__fast_entry *known = find(e, p->hash);
    if (known && !known->agreed) {
        snprintf(ref->fast_why, sizeof ref->fast_why, "%s", known->why);
        return KR_OK;
    }
    if (known) {
        int rc = build(ctx, ref);
        ref->use_fast = rc == KR_OK;
        if (rc != KR_OK) /* built before in this context: only the context can have changed */
            return rc;
        return KR_OK;
    }
    char why[sizeof ref->fast_why] = "";
    int rc = check(ctx, ref, why, sizeof why);
    if (rc != KR_OK)
        return rc;
    kr__clear_error(ctx);
    remember(e, p->hash, !why[0], why);
    ref->use_fast = !why[0];
    snprintf(ref->fast_why, sizeof ref->fast_why, "%s", why);
    return KR_OK;
}
