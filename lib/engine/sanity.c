/* kr_problem_sanity: can this problem be passed without computing anything?
 * Runs the reference on every case and tries do-nothing outputs against it:
 * all zeros, a constant, a copy of each input. A problem any of them passes
 * on every case, or whose outputs are constant, rewards doing nothing. */
#include "common/dtype.h"
#include "engine/reference.h"
#include "engine/verify_impl.h"

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

int kr_problem_sanity(char **summary, kr_context *ctx, const kr_problem *p)
{
    if (!ctx || !p || !summary)
        return KR_EINVAL;
    *summary = NULL;
    kr__clear_error(ctx);
    size_t nk = NULL_KINDS + p->num_tensors;
    null_kernel *nulls = calloc(nk, sizeof *nulls);
    void **host = calloc(p->num_tensors, sizeof *host);
    if (!nulls || !host) {
        free(nulls);
        free(host);
        return kr__fail(ctx, KR_ENOMEM, "out of memory");
    }
    snprintf(nulls[0].name, sizeof nulls[0].name, "all zeros");
    snprintf(nulls[1].name, sizeof nulls[1].name, "all ones");
    for (size_t i = 0; i < nk; i++)
        nulls[i].passes_all = i < NULL_KINDS || p->tensors[i - NULL_KINDS].role != KR_ROLE_OUT;
    for (size_t t = 0; t < p->num_tensors; t++)
        snprintf(nulls[NULL_KINDS + t].name, sizeof nulls[0].name, "a copy of input '%s'",
                 p->tensors[t].name);
    kr__buf out = KR__BUF_INIT;
    kr__reference ref;
    kr__engine *e;
    int rc = kr__engine_get(ctx, &e), constant_everywhere = 1, unsound = 0;
    if (rc == KR_OK)
        rc = kr__reference_open(ctx, &ref, p);
    else
        memset(&ref, 0, sizeof ref);
    for (size_t c = 0; c < p->num_cases && rc == KR_OK; c++) {
        uint64_t seed = kr_problem_case_seed(0x5a17e5eedull, c);
        rc = kr__reference_outputs_host(ctx, &ref, c, seed, host);
        if (rc != KR_OK)
            break;
        kr__buf_printf(&out, "case '%s': the reference ran\n", p->cases[c].name);
        int case_constant = 1;
        for (size_t t = 0; t < p->num_tensors; t++) {
            const kr__tensor *x = &p->tensors[t];
            if (x->role == KR_ROLE_IN)
                continue;
            uint64_t n = p->cases[c].bytes[t] / (uint64_t)kr__dtype_size(x->dtype);
            case_constant &= near_constant(x, host[t], n);
            /* a null "kernel" passes a case only if it passes every output */
            nulls[0].passes_all &= all_close_to(x, host[t], n, NULL, 0.0);
            nulls[1].passes_all &= all_close_to(x, host[t], n, NULL, 1.0);
            for (size_t in = 0; in < p->num_tensors; in++)
                if (nulls[NULL_KINDS + in].passes_all)
                    nulls[NULL_KINDS + in].passes_all = copy_passes(ctx, p, in, t, c, seed, host[t]);
            free(host[t]);
            host[t] = NULL;
        }
        constant_everywhere &= case_constant;
    }
    if (rc == KR_OK) {
        if (constant_everywhere) {
            kr__buf_printf(&out, "UNSOUND: the reference outputs are (nearly) constant in every "
                           "case: a kernel writing that constant passes\n");
            unsound = 1;
        } else {
            kr__buf_printf(&out, "ok: the reference outputs vary\n");
        }
        for (size_t i = 0; i < nk; i++) {
            if (i >= NULL_KINDS && p->tensors[i - NULL_KINDS].role == KR_ROLE_OUT)
                continue;
            kr__buf_printf(&out, "%s: writing %s %s\n", nulls[i].passes_all ? "UNSOUND" : "ok",
                           nulls[i].name,
                           nulls[i].passes_all ? "passes every case" : "fails");
            unsound |= nulls[i].passes_all;
        }
        *summary = kr__buf_take(&out);
        if (unsound)
            rc = kr__fail(ctx, KR_EUNSOUND, "problem '%s' can be passed without computing it (see "
                          "the summary)", p->name);
    }
    kr__buf_free(&out);
    kr__reference_close(ctx, &ref);
    for (size_t t = 0; t < p->num_tensors; t++)
        free(host[t]);
    free(host);
    free(nulls);
    return rc;
}
