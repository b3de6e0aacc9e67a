/* Problem soundness: can this problem be passed without computing anything?
 * Runs the reference on every case and tries do-nothing outputs against it:
 * all zeros, a constant, a copy of each input, and the outputs of another
 * seed (a kernel that writes one remembered answer). A problem any of them
 * passes on every case, or whose outputs are constant, rewards doing
 * nothing. kr_problem_sanity reports each check; kr__problem_weak gives
 * evaluate the verdict, computed once per problem and context. */
#include "common/dtype.h"
#include "run/reference.h"
#include "verify/verify_impl.h"
#include "verify/verify.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define NULL_KINDS 2 /* zeros, constant 1; then one per input */

typedef struct {
    char name[96];
    int passes_all;     /* passed every case so far */
} null_kernel;

static int all_close_to(const kr__tensor *x, const void *want, uint64_t n, const void *got,
                        double constant)
{
    for (uint64_t i = 0; i < n; i++) {
        double w = kr__dtype_load(x->dtype, want, i);
        double g = got ? kr__dtype_load(x->dtype, got, i) : constant;
        if (!kr__element_ok(g, w, 0, 1, x->rtol, x->atol))
            return 0;
    }
    return 1;
}

static int near_constant(const kr__tensor *x, const void *want, uint64_t n)
{
    double lo = INFINITY, hi = -INFINITY;
    for (uint64_t i = 0; i < n; i++) {
        double w = kr__dtype_load(x->dtype, want, i);
        if (isfinite(w)) {
            lo = fmin(lo, w);
            hi = fmax(hi, w);
        }
    }
    return n > 1 && (!(hi >= lo) || hi - lo <= x->atol + x->rtol * fmax(fabs(lo), fabs(hi)));
}

/* Does a copy of input `in` pass as output `t`? (same dtype, enough bytes) */
static int copy_passes(kr_context *ctx, const kr_problem *p, size_t in, size_t t, size_t c,
                       uint64_t seed, const void *want)
{
    const kr__tensor *x = &p->tensors[t];
    if (p->tensors[in].dtype != x->dtype || p->cases[c].bytes[in] < p->cases[c].bytes[t])
        return 0;
    void *buf = malloc(p->cases[c].bytes[in]);
    int ok = buf && kr_problem_generate_host(buf, p->cases[c].bytes[in], ctx, p, in, c, seed) == KR_OK &&
             all_close_to(x, want, p->cases[c].bytes[t] / (uint64_t)kr__dtype_size(x->dtype), buf, 0);
    free(buf);
    return ok;
}

/* Outputs of seed A judged against seed B's: a remembered answer passes? */
static int other_seed_passes(const kr_problem *p, size_t c, void **a, void **b)
{
    for (size_t t = 0; t < p->num_tensors; t++) {
        const kr__tensor *x = &p->tensors[t];
        if (x->role == KR_ROLE_IN)
            continue;
        uint64_t n = p->cases[c].bytes[t] / (uint64_t)kr__dtype_size(x->dtype);
        for (uint64_t i = 0; i < n; i++)
            if (!kr__element_ok(kr__dtype_load(x->dtype, a[t], i), kr__dtype_load(x->dtype, b[t], i),
                                0, 1, x->rtol, x->atol))
                return 0;
    }
    return 1;
}

typedef struct {
    null_kernel *nulls;
    size_t num_nulls;
    int constant_everywhere, seed_blind_everywhere;
} findings;

/* One case: the reference for two seeds, and every do-nothing output. */
static int check_case(kr_context *ctx, kr__reference *ref, size_t c, findings *f, void **host,
                      void **other, kr__buf *out)
{
    const kr_problem *p = ref->p;
    uint64_t seed = kr_problem_case_seed(0x5a17e5eedull, c);
    int rc = kr__reference_outputs_host(ctx, ref, c, seed, host);
    if (rc == KR_OK)
        rc = kr__reference_outputs_host(ctx, ref, c, kr_problem_case_seed(0xb1d5eedull, c), other);
    if (rc != KR_OK)
        return rc;
    kr__buf_printf(out, "case '%s': the reference ran\n", p->cases[c].name);
    int case_constant = 1;
    f->seed_blind_everywhere &= other_seed_passes(p, c, other, host);
    for (size_t t = 0; t < p->num_tensors; t++) {
        const kr__tensor *x = &p->tensors[t];
        if (x->role == KR_ROLE_IN)
            continue;
        uint64_t n = p->cases[c].bytes[t] / (uint64_t)kr__dtype_size(x->dtype);
        case_constant &= near_constant(x, host[t], n);
        /* a null "kernel" passes a case only if it passes every output */
        f->nulls[0].passes_all &= all_close_to(x, host[t], n, NULL, 0.0);
        f->nulls[1].passes_all &= all_close_to(x, host[t], n, NULL, 1.0);
        for (size_t in = 0; in < p->num_tensors; in++)
            if (f->nulls[NULL_KINDS + in].passes_all)
                f->nulls[NULL_KINDS + in].passes_all = copy_passes(ctx, p, in, t, c, seed, host[t]);
    }
    f->constant_everywhere &= case_constant;
    for (size_t t = 0; t < p->num_tensors; t++) {
        free(host[t]);
        free(other[t]);
        host[t] = other[t] = NULL;
    }
    return KR_OK;
}

/* The verdict in words: one line per check; 1 when unsound. */
static int conclude(const kr_problem *p, const findings *f, kr__buf *out)
{
    int unsound = 0;
    if (f->constant_everywhere) {
        kr__buf_printf(out, "UNSOUND: the reference outputs are (nearly) constant in every "
                       "case: a kernel writing that constant passes\n");
        unsound = 1;
    } else {
        kr__buf_printf(out, "ok: the reference outputs vary\n");
    }
    if (f->seed_blind_everywhere) {
        kr__buf_printf(out, "UNSOUND: the outputs for one seed pass against another seed's in "
                       "every case (they barely depend on the inputs): a kernel writing one "
                       "remembered answer passes; widen the inputs' distribution or tighten the "
                       "tolerance\n");
        unsound = 1;
    } else {
        kr__buf_printf(out, "ok: the outputs depend on the inputs\n");
    }
    for (size_t i = 0; i < f->num_nulls; i++) {
        if (i >= NULL_KINDS && p->tensors[i - NULL_KINDS].role == KR_ROLE_OUT)
            continue;
        kr__buf_printf(out, "%s: writing %s %s\n", f->nulls[i].passes_all ? "UNSOUND" : "ok",
                       f->nulls[i].name, f->nulls[i].passes_all ? "passes every case" : "fails");
        unsound |= f->nulls[i].passes_all;
    }
    return unsound;
}

/* Runs every check; *unsound and the summary in out. */
static int run_checks(kr_context *ctx, const kr_problem *p, kr__buf *out, int *unsound)
{
    findings f = {calloc(NULL_KINDS + p->num_tensors, sizeof(null_kernel)),
                  NULL_KINDS + p->num_tensors, 1, 1};
    void **host = calloc(p->num_tensors + 1, sizeof *host);
    void **other = calloc(p->num_tensors + 1, sizeof *other);
    kr__reference ref;
    memset(&ref, 0, sizeof ref);
    kr__engine *e;
    int rc = f.nulls && host && other ? kr__engine_get(ctx, &e)
                                      : kr__fail(ctx, KR_ENOMEM, "out of memory");
    if (rc == KR_OK) {
        snprintf(f.nulls[0].name, sizeof f.nulls[0].name, "all zeros");
        snprintf(f.nulls[1].name, sizeof f.nulls[1].name, "all ones");
        for (size_t i = 0; i < f.num_nulls; i++)
            f.nulls[i].passes_all = i < NULL_KINDS || p->tensors[i - NULL_KINDS].role != KR_ROLE_OUT;
        for (size_t t = 0; t < p->num_tensors; t++)
            snprintf(f.nulls[NULL_KINDS + t].name, sizeof f.nulls[0].name, "a copy of input '%s'",
                     p->tensors[t].name);
        rc = kr__reference_open(ctx, &ref, p); /* the definition's own outputs, never the fast kernel's */
    }
    for (size_t c = 0; c < p->num_cases && rc == KR_OK; c++)
        rc = check_case(ctx, &ref, c, &f, host, other, out);
    if (rc == KR_OK)
        *unsound = conclude(p, &f, out);
    kr__reference_close(ctx, &ref);
    for (size_t t = 0; host && other && t < p->num_tensors; t++) {
        free(host[t]);
        free(other[t]);
    }
    free(host);
    free(other);
    free(f.nulls);
    return rc;
}

int kr_problem_sanity(char **summary, kr_context *ctx, const kr_problem *p)
{
    if (!ctx || !p || !summary)
        return KR_EINVAL;
    *summary = NULL;
    kr__clear_error(ctx);
    kr__buf out = KR__BUF_INIT;
    int unsound = 0;
    int rc = run_checks(ctx, p, &out, &unsound);
    if (rc == KR_OK) {
        *summary = kr__buf_take(&out);
        if (unsound)
            rc = kr__fail(ctx, KR_EUNSOUND, "problem '%s' can be passed without computing it (see "
                          "the summary)", p->name);
    }
    kr__buf_free(&out);
    return rc;
}

static int note(kr__engine *e, const kr_problem *p, int weak)
{
    kr__sound_entry *grown = realloc(e->sound, (e->num_sound + 1) * sizeof *grown);
    if (!grown)
        return KR_ENOMEM;
    e->sound = grown;
    snprintf(grown[e->num_sound].hash, sizeof grown->hash, "%s", p->hash);
    grown[e->num_sound++].weak = weak;
    return KR_OK;
}

int kr__problem_weak_cached(kr_context *ctx, const kr_problem *p, int *weak)
{
    const kr__engine *e = kr__engine_of(ctx);
    for (size_t i = 0; e && i < e->num_sound; i++)
        if (strcmp(e->sound[i].hash, p->hash) == 0) {
            *weak = e->sound[i].weak;
            return 1;
        }
    return 0;
}

int kr__problem_weak_note(kr_context *ctx, const kr_problem *p, int weak)
{
    kr__engine *e;
    int rc = kr__engine_get(ctx, &e);
    for (size_t i = 0; rc == KR_OK && i < e->num_sound; i++)
        if (strcmp(e->sound[i].hash, p->hash) == 0)
            return KR_OK;
    return rc == KR_OK ? note(e, p, weak != 0) : rc;
}

int kr__problem_weak(kr_context *ctx, const kr_problem *p, int *weak)
{
    kr__engine *e;
    int rc = kr__engine_get(ctx, &e);
    if (rc != KR_OK)
        return rc;
    for (size_t i = 0; i < e->num_sound; i++)
        if (strcmp(e->sound[i].hash, p->hash) == 0) {
            *weak = e->sound[i].weak;
            return KR_OK;
        }
    kr__buf out = KR__BUF_INIT;
    int unsound = 0;
    rc = run_checks(ctx, p, &out, &unsound);
    kr__buf_free(&out);
    if (rc != KR_OK)
        return rc;
    note(e, p, unsound);
    *weak = unsound;
    return KR_OK;
}
