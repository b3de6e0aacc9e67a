/* Timed-output checks: some timed calls of the candidate, drawn at random
 * from the OS per call (with a floor per benchmark), are checked like a
 * verification run: the inputs' keyed hash after the call against the hash
 * of the same seed's inputs regenerated for the reference, every guard
 * zone, and the outputs against the reference run on those regenerated
 * inputs (never on what the candidate left). A checked call looks like any
 * other to the candidate, before and during it: the same buffers, the same
 * kinds of values, the same work queued ahead of it (nothing is hashed
 * before a call: everything a check does comes after), no state surviving
 * from one call to the next. */
#include "bench/bench_impl.h"
#include "common/random.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int kr__bench_draw_check(const bstate *b)
{
    size_t call = b->s[SIDE_CANDIDATE].n;
    if (call < 64 && (b->floor_checks >> call & 1))
        return 1;
    return (double)(kr__random64() >> 11) * 0x1.0p-53 < b->o.check_fraction;
}

/* The floor used to be met after the timed calls, by untimed checked calls
 * (a whole sample and a reference run each, most benchmarks two of them).
 * Two of its three now sit among the first timed calls, where they cost
 * nothing more, and a candidate cannot tell which (the OS draws them per
 * benchmark); the third stays after the last timed call (unless that call
 * was checked), so a kernel that behaves for its first calls and cheats
 * later (given a way to count them) meets a check too. */
uint64_t kr__bench_pick_floor(const bstate *b)
{
    uint64_t span = b->o.min_samples < 64 ? b->o.min_samples : 64, mask = 0;
    if (span <= KR__BENCH_EARLY_CHECKS)
        return span == 64 ? ~0ull : (1ull << span) - 1;
    for (int picked = 0; picked < KR__BENCH_EARLY_CHECKS;) {
        uint64_t call = kr__random64() % span; /* bias of 2^-58 at most: none that matters */
        if (!(mask >> call & 1)) {
            mask |= 1ull << call;
            picked++;
        }
    }
    return mask;
}

int kr__bench_check_begin(bstate *b, size_t k, bcheck *c)
{
    const kr_problem *p = b->p;
    memset(c, 0, sizeof *c);
    size_t n = p->num_tensors ? p->num_tensors : 1;
    c->pre = calloc(n, sizeof *c->pre);
    c->post = calloc(n, sizeof *c->post);
    c->guards = calloc(n, sizeof *c->guards);
    c->cmp = calloc(n, sizeof *c->cmp);
    c->scratch = calloc(b->s[0].run[k].num_scratch + 1, sizeof *c->scratch);
    if (!c->pre || !c->post || !c->guards || !c->cmp || !c->scratch)
        return kr__fail(b->ctx, KR_ENOMEM, "out of memory");
    return KR_OK;
}

void kr__bench_check_free(bcheck *c)
{
    free(c->pre);
    free(c->post);
    free(c->guards);
    free(c->cmp);
    free(c->scratch);
    memset(c, 0, sizeof *c);
}

static void failed(bstate *b, uint64_t flag, const char *what)
{
    b->check_flags |= flag;
    if (b->checks_failed++)
        return;
    snprintf(b->check_failure, sizeof b->check_failure, "a timed call (sample %zu) %s", b->s[0].n,
             what);
}

static void judge(bstate *b, size_t k, const bcheck *c)
{
    const kr_problem *p = b->p;
    const kr__run *run = &b->s[0].run[k];
    char what[400];
    for (size_t t = 0; t < p->num_tensors; t++) {
        const char *name = p->tensors[t].name;
        unsigned long long bad = kr__check_guard_bytes(b->ctx, c->guards[t]);
        if (bad) {
            snprintf(what, sizeof what, "wrote outside the bounds of '%s' (%llu guard bytes "
                     "changed)", name, bad);
            failed(b, KR_FLAG_OUT_OF_BOUNDS, what);
        }
        if (p->tensors[t].role == KR_ROLE_IN &&
            kr__check_value(b->ctx, c->pre[t]) != kr__check_value(b->ctx, c->post[t])) {
            snprintf(what, sizeof what, "modified input '%s' (inputs must stay unchanged)", name);
            failed(b, KR_FLAG_INPUT_MUTATED, what);
        }
        if (!kr__is_output(&p->tensors[t]))
            continue;
        kr__cmp_stats st;
        kr__check_stats(b->ctx, c->cmp[t], &st);
        if (st.mismatches) {
            snprintf(what, sizeof what, "wrote %llu wrong values to '%s'", st.mismatches, name);
            failed(b, KR_FLAG_TIMED_OUTPUT_WRONG, what);
        }
    }
    for (size_t s = 0; s < run->num_scratch; s++) {
        unsigned long long bad = kr__check_guard_bytes(b->ctx, c->scratch[s]);
        if (bad) {
            snprintf(what, sizeof what, "wrote outside the bounds of scratch '%s' (%llu guard "
                     "bytes changed)", run->bp->plan->scratch[s].name, bad);
            failed(b, KR_FLAG_OUT_OF_BOUNDS, what);
        }
    }
}

/* Outputs that fail against the fast kernel (three quarters of the
 * tolerance) are judged again against the reference itself, with all of
 * it, as verification does (verify.c, rejudge). */
static int rejudge(bstate *b, size_t k, bcheck *c)
{
    const kr_problem *p = b->p;
    kr_context *ctx = b->ctx;
    int differ = 0;
    for (size_t t = 0; t < p->num_tensors; t++) {
        kr__cmp_stats st;
        if (!kr__is_output(&p->tensors[t]))
            continue;
        kr__check_stats(ctx, c->cmp[t], &st);
        differ |= st.mismatches != 0 || st.nan_mismatch != 0;
    }
    if (!differ)
        return KR_OK;
    int rc = kr__reference_queue_kernel(ctx, &b->ref, b->c, b->set_seed[k], &b->want, 0);
    for (size_t t = 0; t < p->num_tensors && rc == KR_OK; t++) {
        const kr__tensor *x = &p->tensors[t];
        if (kr__is_output(x))
            rc = kr__check_compare(ctx, &b->set[k].buf[t], &b->want.buf[t], x, 1.0,
                                   kr__output_poison(x, 0), &c->cmp[t]);
    }
    if (rc == KR_OK)
        rc = kr__tset_scrub(ctx, &b->want);
    return rc == KR_OK ? kr__reference_fetch_checks(ctx, &b->ref, b->c) : rc;
}

int kr__bench_check_end(bstate *b, size_t k, bcheck *c)
{
    const kr_problem *p = b->p;
    kr_context *ctx = b->ctx;
    int rc = kr__checks_begin(ctx);
    if (rc == KR_OK)
        rc = kr__tset_check_guards(ctx, &b->set[k], c->guards);
    if (rc == KR_OK)
        rc = kr__run_check_guards(ctx, &b->s[0].run[k], c->scratch);
    for (size_t t = 0; t < p->num_tensors && rc == KR_OK; t++)
        if (p->tensors[t].role == KR_ROLE_IN)
            rc = kr__check_hash(ctx, &b->set[k].buf[t], b->key, &c->post[t]);
    /* the inputs as the seed makes them, hashed where the reference
     * regenerates them: what the candidate's must still be */
    kr__input_hashes want_in = {b->key, c->pre};
    if (rc == KR_OK)
        rc = kr__reference_queue(ctx, &b->ref, b->c, b->set_seed[k], &b->want, &want_in);
    for (size_t t = 0; t < p->num_tensors && rc == KR_OK; t++) {
        const kr__tensor *x = &p->tensors[t];
        if (kr__is_output(x))
            rc = kr__check_compare(ctx, &b->set[k].buf[t], &b->want.buf[t], x,
                                   kr__reference_tolerance_share(&b->ref), kr__output_poison(x, 0),
                                   &c->cmp[t]);
    }
    /* the answer for this set's seed must not wait on the device for the
     * next calls of the same set to find */
    if (rc == KR_OK)
        rc = kr__tset_scrub(ctx, &b->want);
    if (rc == KR_OK)
        rc = kr__reference_fetch_checks(ctx, &b->ref, b->c);
    if (rc == KR_OK && b->ref.use_fast)
        rc = rejudge(b, k, c);
    if (rc == KR_OK) {
        b->checks++;
        judge(b, k, c);
    }
    /* the candidate's call was waited for before: a failure here (the
     * reference's run, the checks', their wait) is the library's */
    b->library_failed |= rc != KR_OK;
    return rc;
}
