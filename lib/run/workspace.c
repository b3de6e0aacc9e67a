/* Tensor sets and runs (workspace.h). */
#include "run/workspace.h"
#include "common/dtype.h"
#include "compile/program_impl.h"

#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int kr__is_output(const kr__tensor *x)
{
    return x->role != KR_ROLE_IN;
}

uint64_t kr__elements(const kr_problem *p, size_t t, size_t c)
{
    return p->cases[c].bytes[t] / (uint64_t)kr__dtype_size(p->tensors[t].dtype);
}

static int holds(const kr__tset *s, size_t t)
{
    unsigned want = kr__is_output(&s->p->tensors[t]) ? KR__SET_OUTPUTS : KR__SET_INPUTS;
    return (s->roles & want) != 0;
}

int kr__tset_alloc(kr_context *ctx, kr__tset *s, const kr_problem *p, size_t c, unsigned roles,
                   const char *what)
{
    memset(s, 0, sizeof *s);
    s->p = p;
    s->c = c;
    s->roles = roles;
    if (!(s->buf = calloc(p->num_tensors ? p->num_tensors : 1, sizeof *s->buf)))
        return kr__fail(ctx, KR_ENOMEM, "out of memory");
    for (size_t t = 0; t < p->num_tensors; t++) {
        if (!holds(s, t))
            continue;
        char name[200];
        snprintf(name, sizeof name, "tensor '%s' (%s) in case '%s'", p->tensors[t].name, what,
                 p->cases[c].name);
        int rc = kr__dbuf_alloc(ctx, &s->buf[t], p->cases[c].bytes[t], name);
        if (rc != KR_OK)
            return rc;
    }
    return KR_OK;
}

void kr__tset_free(kr_context *ctx, kr__tset *s)
{
    if (!s->buf)
        return;
    for (size_t t = 0; t < s->p->num_tensors; t++)
        kr__dbuf_free(ctx, &s->buf[t]);
    free(s->buf);
    s->buf = NULL;
}

static int generate(kr_context *ctx, const kr__tset *s, size_t t, uint64_t seed)
{
    const kr__tensor *x = &s->p->tensors[t];
    kr__engine *e = kr__engine_of(ctx);
    e->generated_bytes += (double)s->buf[t].bytes;
    return kr__k_generate(ctx, s->buf[t].ptr, kr__elements(s->p, t, s->c), &x->dist, seed,
                          (uint32_t)t);
}

int kr__tset_fill_inputs(kr_context *ctx, const kr__tset *s, uint64_t seed)
{
    int rc = KR_OK;
    for (size_t t = 0; t < s->p->num_tensors && rc == KR_OK; t++)
        if (s->buf[t].base && !kr__is_output(&s->p->tensors[t]))
            rc = generate(ctx, s, t, seed);
    return rc;
}

int kr__tset_fill_outputs(kr_context *ctx, const kr__tset *s, uint64_t seed, int variant)
{
    int rc = KR_OK;
    for (size_t t = 0; t < s->p->num_tensors && rc == KR_OK; t++) {
        const kr__tensor *x = &s->p->tensors[t];
        if (!s->buf[t].base || !kr__is_output(x))
            continue;
        rc = x->role == KR_ROLE_OUT ? kr__poison(ctx, &s->buf[t], x->dtype, variant)
                                    : generate(ctx, s, t, seed);
    }
    return rc;
}

int kr__tset_reguard(kr_context *ctx, const kr__tset *s)
{
    int rc = KR_OK;
    for (size_t t = 0; t < s->p->num_tensors && rc == KR_OK; t++)
        if (s->buf[t].base)
            rc = kr__dbuf_reguard(ctx, &s->buf[t]);
    return rc;
}

int kr__tset_scrub(kr_context *ctx, const kr__tset *s)
{
    int rc = KR_OK;
    for (size_t t = 0; t < s->p->num_tensors && rc == KR_OK; t++)
        rc = kr__dbuf_scrub(ctx, &s->buf[t]);
    return rc;
}

int kr__tset_check_guards(kr_context *ctx, const kr__tset *s, kr__check *ids)
{
    int rc = KR_OK;
    for (size_t t = 0; t < s->p->num_tensors && rc == KR_OK; t++)
        if (s->buf[t].base)
            rc = kr__check_guards(ctx, &s->buf[t], &ids[t]);
    return rc;
}

int kr__run_prepare(kr_context *ctx, kr__run *r, const kr__bound_plan *bp, size_t c)
{
    memset(r, 0, sizeof *r);
    r->bp = bp;
    r->c = c;
    r->num_scratch = bp->plan->num_scratch;
    if (!(r->scratch = calloc(r->num_scratch ? r->num_scratch : 1, sizeof *r->scratch)))
        return kr__fail(ctx, KR_ENOMEM, "out of memory");
    for (size_t i = 0; i < r->num_scratch; i++) {
        uint64_t bytes;
        char what[200];
        snprintf(what, sizeof what, "scratch buffer '%s'", bp->plan->scratch[i].name);
        int rc = kr__plan_scratch_bytes(ctx, bp, i, c, &bytes);
        if (rc == KR_OK)
            rc = kr__dbuf_alloc(ctx, &r->scratch[i], bytes, what);
        if (rc != KR_OK)
            return rc;
    }
    return kr__ready(ctx, bp, c, &r->ready);
}

void kr__run_free(kr_context *ctx, kr__run *r)
{
    kr__ready_free(&r->ready);
    for (size_t i = 0; r->scratch && i < r->num_scratch; i++)
        kr__dbuf_free(ctx, &r->scratch[i]);
    free(r->scratch);
    memset(r, 0, sizeof *r);
}

void kr__run_bind(kr__run *r, const kr__tset *in, const kr__tset *out)
{
    const kr_problem *p = r->bp->problem;
    for (size_t l = 0; l < r->ready.num_launches; l++) {
        kr__ready_step *st = &r->ready.launches[l];
        for (size_t a = 0; a < st->num_args; a++) {
            const kr__bound_arg *arg = &st->args[a];
            if (arg->kind == KR__ARG_TENSOR) {
                size_t t = arg->index;
                st->values[a] = (kr__is_output(&p->tensors[t]) ? out : in)->buf[t].ptr;
            } else if (arg->kind == KR__ARG_SCRATCH) {
                st->values[a] = r->scratch[arg->index].ptr;
            }
        }
    }
}

int kr__run_reset(kr_context *ctx, const kr__run *r)
{
    kr__engine *e = kr__engine_of(ctx);
    int slot = kr__gpu_begin(e, KR__GPU_RESET);
    /* every call starts from the module's state at load: nothing a kernel
     * left in its __device__ globals survives into the next call */
    int rc = kr__program_restore_globals(ctx, r->bp->program, e->stream);
    /* nor in shared memory, which keeps what the last block on an SM wrote */
    if (rc == KR_OK)
        rc = kr__k_scrub_shared(ctx);
    for (size_t i = 0; i < r->num_scratch && rc == KR_OK; i++) {
        rc = kr__dbuf_fill(ctx, &r->scratch[i], r->bp->plan->scratch[i].zero ? 0 : 0xA5);
        if (rc == KR_OK)
            rc = kr__dbuf_reguard(ctx, &r->scratch[i]);
    }
    kr__gpu_end(e, slot);
    return rc;
}

int kr__run_launch(kr_context *ctx, kr__run *r, size_t *failed_launch)
{
    return kr__ready_launch(ctx, r->bp, &r->ready, kr__engine_of(ctx)->stream, failed_launch);
}

int kr__run_check_guards(kr_context *ctx, const kr__run *r, kr__check *ids)
{
    int rc = KR_OK;
    for (size_t i = 0; i < r->num_scratch && rc == KR_OK; i++)
        rc = kr__check_guards(ctx, &r->scratch[i], &ids[i]);
    return rc;
}
