/* Problem handles: lifetime, getters, sizes, lookups, the parsed form as
 * JSON, host generation. */
#include "driver/context_impl.h"
#include "common/dtype.h"
#include "problem/problem_impl.h"
#include "common/strbuf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void kr_problem_free(kr_problem *p)
{
    if (!p)
        return;
    if (p->golden_destroy)
        p->golden_destroy(p->golden_user);
    for (size_t i = 0; i < p->num_dims; i++)
        free(p->dims[i]);
    for (size_t i = 0; i < p->num_cases; i++) {
        free(p->cases[i].name);
        free(p->cases[i].dims);
        free(p->cases[i].bytes);
    }
    for (size_t i = 0; i < p->num_tensors; i++)
        kr__tensor_clear(&p->tensors[i]);
    for (size_t i = 0; i < p->num_scalars; i++)
        free(p->scalars[i].name);
    for (size_t i = 0; i < p->num_baselines; i++)
        free(p->baselines[i].device);
    kr__expr_free(p->bytes_expr);
    kr__expr_free(p->flops_expr);
    free(p->baselines);
    free(p->scalars);
    free(p->tensors);
    free(p->cases);
    free(p->dims);
    free(p->name);
    free(p->description);
    free(p->file);
    free(p->spec);
    free(p->reference_source);
    free(p->reference_name);
    free(p->reference_plan_json); /* from json_dumps: malloc */
    free(p->fast_source);
    free(p->fast_name);
    free(p->fast_plan_json);
    free(p);
}

void kr__tensor_clear(kr__tensor *t)
{
    free(t->name);
    for (size_t i = 0; i < t->rank; i++)
        kr__expr_free(t->shape[i]);
    free(t->shape);
}

int kr__problem_tensor_dims(const kr_problem *p, size_t tensor, size_t case_index,
                            int64_t *extents, size_t max, char *why, size_t why_size)
{
    const kr__tensor *x = &p->tensors[tensor];
    for (size_t i = 0; i < x->rank; i++) {
        int64_t v;
        if (kr__expr_eval(x->shape[i], p->cases[case_index].dims, &v, why, why_size) != 0)
            return -1;
        if (v < 0) {
            snprintf(why, why_size, "extent %zu ('%s') is %lld, negative", i,
                     kr__expr_text(x->shape[i]), (long long)v);
            return -1;
        }
        if (i < max)
            extents[i] = v;
    }
    return 0;
}

size_t kr__problem_find_dim(const kr_problem *p, const char *name)
{
    for (size_t i = 0; i < p->num_dims; i++)
        if (strcmp(p->dims[i], name) == 0)
            return i;
    return SIZE_MAX;
}

size_t kr__problem_find_scalar(const kr_problem *p, const char *name)
{
    for (size_t i = 0; i < p->num_scalars; i++)
        if (strcmp(p->scalars[i].name, name) == 0)
            return i;
    return SIZE_MAX;
}

const char *kr_problem_name(const kr_problem *p) { return p ? p->name : ""; }
const char *kr_problem_hash(const kr_problem *p) { return p ? p->hash : ""; }
size_t kr_problem_dim_count(const kr_problem *p) { return p ? p->num_dims : 0; }
size_t kr_problem_case_count(const kr_problem *p) { return p ? p->num_cases : 0; }
size_t kr_problem_tensor_count(const kr_problem *p) { return p ? p->num_tensors : 0; }
size_t kr_problem_timing_case(const kr_problem *p) { return p ? p->timing_case : 0; }
int kr_problem_reference_kind(const kr_problem *p) { return p ? p->reference_kind : 0; }

const char *kr_problem_dim_name(const kr_problem *p, size_t d)
{
    return p && d < p->num_dims ? p->dims[d] : NULL;
}

const char *kr_problem_case_name(const kr_problem *p, size_t c)
{
    return p && c < p->num_cases ? p->cases[c].name : NULL;
}

int64_t kr_problem_case_dim(const kr_problem *p, size_t c, size_t d)
{
    return p && c < p->num_cases && d < p->num_dims ? p->cases[c].dims[d] : -1;
}

const char *kr_problem_tensor_name(const kr_problem *p, size_t t)
{
    return p && t < p->num_tensors ? p->tensors[t].name : NULL;
}

int kr_problem_tensor_dtype(const kr_problem *p, size_t t)
{
    return p && t < p->num_tensors ? p->tensors[t].dtype : 0;
}

int kr_problem_tensor_role(const kr_problem *p, size_t t)
{
    return p && t < p->num_tensors ? p->tensors[t].role : 0;
}

size_t kr_problem_tensor_shape(int64_t *extents, size_t max_dims, const kr_problem *p, size_t t,
                               size_t c)
{
    if (!p || t >= p->num_tensors || c >= p->num_cases)
        return 0;
    char why[200];
    /* shapes were checked for every case at parse time */
    kr__problem_tensor_dims(p, t, c, extents, max_dims, why, sizeof why);
    return p->tensors[t].rank;
}

uint64_t kr_problem_tensor_bytes(const kr_problem *p, size_t t, size_t c)
{
    return p && t < p->num_tensors && c < p->num_cases ? p->cases[c].bytes[t] : 0;
}

int kr_problem_tensor_tolerance(double *rtol, double *atol, const kr_problem *p, size_t t)
{
    if (!p || t >= p->num_tensors)
        return KR_EINVAL;
    if (rtol)
        *rtol = p->tensors[t].rtol;
    if (atol)
        *atol = p->tensors[t].atol;
    return KR_OK;
}

size_t kr_problem_find_tensor(const kr_problem *p, const char *name)
{
    for (size_t i = 0; p && name && i < p->num_tensors; i++)
        if (strcmp(p->tensors[i].name, name) == 0)
            return i;
    return SIZE_MAX;
}

int kr_problem_set_golden(kr_problem *p, kr_golden_fn fn, void *user, void (*destroy)(void *user))
{
    if (!p)
        return KR_EINVAL;
    if (p->golden_destroy)
        p->golden_destroy(p->golden_user);
    p->golden = fn;
    p->golden_user = fn ? user : NULL;
    p->golden_destroy = fn ? destroy : NULL;
    return KR_OK;
}

/* splitmix64: decorrelates the per-case seeds of one evaluation seed. */
uint64_t kr_problem_case_seed(uint64_t evaluation_seed, size_t case_index)
{
    uint64_t z = evaluation_seed + 0x9E3779B97F4A7C15ull * ((uint64_t)case_index + 1);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

int kr_problem_generate_host(void *buf, size_t buf_bytes, kr_context *ctx, const kr_problem *p,
                             size_t t, size_t c, uint64_t seed)
{
    if (!ctx || !p || !buf)
        return KR_EINVAL;
    kr__clear_error(ctx);
    if (t >= p->num_tensors || c >= p->num_cases)
        return kr__fail(ctx, KR_EINVAL, "tensor %zu / case %zu out of range", t, c);
    const kr__tensor *x = &p->tensors[t];
    if (x->role == KR_ROLE_OUT)
        return kr__fail(ctx, KR_EINVAL, "tensor '%s' is an output: it is poisoned, not generated",
                        x->name);
    uint64_t bytes = p->cases[c].bytes[t];
    if (buf_bytes < bytes)
        return kr__fail(ctx, KR_ETOOBIG, "tensor '%s' needs %llu bytes, the buffer has %zu",
                        x->name, (unsigned long long)bytes, buf_bytes);
    uint64_t n = bytes / (uint64_t)kr__dtype_size(x->dtype);
    uint64_t per = (uint64_t)kr_gen_per_call(&x->dist);
    for (uint64_t g = 0; g * per < n; g++)
        kr_gen_group(&x->dist, seed, (kr_u32)t, g, n, buf);
    return KR_OK;
}
