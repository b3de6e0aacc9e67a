/* Problem handles: getters, sizes, the parsed form as JSON, host generation. */
#include "context_impl.h"
#include "dtype.h"
#include "problem_impl.h"
#include "strbuf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void kr_problem_free(kr_problem *p)
{
    if (!p)
        return;
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
    free(p->reference_source);
    free(p->reference_name);
    free(p->reference_plan_json); /* from json_dumps: malloc */
    free(p);
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

size_t kr_problem_tensor_shape(const kr_problem *p, size_t t, size_t c, int64_t *extents,
                               size_t max_dims)
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

int kr_problem_tensor_tolerance(const kr_problem *p, size_t t, double *rtol, double *atol)
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

int kr_problem_set_golden(kr_problem *p, kr_golden_fn fn, void *user)
{
    if (!p)
        return KR_EINVAL;
    p->golden = fn;
    p->golden_user = user;
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

int kr_problem_generate_host(kr_context *ctx, const kr_problem *p, size_t t, size_t c,
                             uint64_t seed, void *buf, size_t buf_bytes)
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

static const char *role_name(int role)
{
    return role == KR_ROLE_IN ? "in" : role == KR_ROLE_OUT ? "out" : "inout";
}

static const char *dist_name(unsigned kind)
{
    static const char *names[] = {"?", "uniform", "normal", "int", "pareto", "mix", "bernoulli"};
    return kind < 7 ? names[kind] : "?";
}

static json_t *dist_json(const kr_gen_dist *d)
{
    json_t *o = json_object();
    json_object_set_new(o, "dist", json_string(dist_name(d->kind)));
    unsigned k = d->kind == KR_GEN_MIX ? d->base_kind : d->kind;
    if (d->kind == KR_GEN_MIX) {
        json_object_set_new(o, "base", json_string(dist_name(k)));
        json_object_set_new(o, "fraction", json_real(d->p));
        json_object_set_new(o, "outlier_scale", json_real(d->outlier_scale));
    }
    if (k == KR_GEN_UNIFORM) {
        json_object_set_new(o, "low", json_real(d->a));
        json_object_set_new(o, "high", json_real(d->b));
    } else if (k == KR_GEN_NORMAL) {
        json_object_set_new(o, "mean", json_real(d->a));
        json_object_set_new(o, "std", json_real(d->b));
    } else if (k == KR_GEN_PARETO) {
        json_object_set_new(o, "alpha", json_real(d->a));
        json_object_set_new(o, "scale", json_real(d->b));
    } else if (k == KR_GEN_INT) {
        json_object_set_new(o, "low", json_integer(d->ilo));
        json_object_set_new(o, "high", json_integer(d->ihi));
    } else if (k == KR_GEN_BERNOULLI) {
        json_object_set_new(o, "p", json_real(d->p));
    }
    return o;
}

static json_t *tensor_json(const kr_problem *p, size_t t)
{
    const kr__tensor *x = &p->tensors[t];
    json_t *o = json_object();
    json_object_set_new(o, "name", json_string(x->name));
    json_object_set_new(o, "dtype", json_string(kr__dtype_name(x->dtype)));
    json_object_set_new(o, "role", json_string(role_name(x->role)));
    json_t *shape = json_array();
    for (size_t i = 0; i < x->rank; i++)
        json_array_append_new(shape, json_string(kr__expr_text(x->shape[i])));
    json_object_set_new(o, "shape", shape);
    if (x->role != KR_ROLE_OUT)
        json_object_set_new(o, "init", dist_json(&x->dist));
    if (x->role != KR_ROLE_IN) {
        json_t *tol = json_object();
        json_object_set_new(tol, "rtol", json_real(x->rtol));
        json_object_set_new(tol, "atol", json_real(x->atol));
        json_object_set_new(o, "tolerance", tol);
    }
    return o;
}

static json_t *case_json(const kr_problem *p, size_t c)
{
    json_t *o = json_object();
    json_object_set_new(o, "name", json_string(p->cases[c].name));
    json_object_set_new(o, "timing", json_boolean(c == p->timing_case));
    json_t *dims = json_object();
    for (size_t d = 0; d < p->num_dims; d++)
        json_object_set_new(dims, p->dims[d], json_integer(p->cases[c].dims[d]));
    json_object_set_new(o, "dims", dims);
    json_t *sizes = json_object();
    uint64_t total = 0;
    for (size_t t = 0; t < p->num_tensors; t++) {
        int64_t ext[8] = {0};
        size_t rank = kr_problem_tensor_shape(p, t, c, ext, 8);
        json_t *s = json_object(), *shape = json_array();
        for (size_t i = 0; i < rank; i++)
            json_array_append_new(shape, json_integer(ext[i]));
        json_object_set_new(s, "shape", shape);
        json_object_set_new(s, "bytes", json_integer((json_int_t)p->cases[c].bytes[t]));
        json_object_set_new(sizes, p->tensors[t].name, s);
        total += p->cases[c].bytes[t];
    }
    json_object_set_new(o, "tensors", sizes);
    json_object_set_new(o, "total_bytes", json_integer((json_int_t)total));
    char why[200];
    int64_t v;
    if (p->bytes_expr && kr__expr_eval(p->bytes_expr, p->cases[c].dims, &v, why, sizeof why) == 0)
        json_object_set_new(o, "roofline_bytes", json_integer(v));
    if (p->flops_expr && kr__expr_eval(p->flops_expr, p->cases[c].dims, &v, why, sizeof why) == 0)
        json_object_set_new(o, "roofline_flops", json_integer(v));
    return o;
}

int kr_problem_json(const kr_problem *p, char **json_out)
{
    if (!p || !json_out)
        return KR_EINVAL;
    json_t *o = json_object();
    json_object_set_new(o, "name", json_string(p->name));
    json_object_set_new(o, "hash", json_string(p->hash));
    if (p->description[0])
        json_object_set_new(o, "description", json_string(p->description));
    json_t *dims = json_array();
    for (size_t d = 0; d < p->num_dims; d++)
        json_array_append_new(dims, json_string(p->dims[d]));
    json_object_set_new(o, "dims", dims);
    json_t *tensors = json_array();
    for (size_t t = 0; t < p->num_tensors; t++)
        json_array_append_new(tensors, tensor_json(p, t));
    json_object_set_new(o, "tensors", tensors);
    json_t *scalars = json_array();
    for (size_t s = 0; s < p->num_scalars; s++) {
        json_t *so = json_object();
        json_object_set_new(so, "name", json_string(p->scalars[s].name));
        json_object_set_new(so, "dtype", json_string(kr__dtype_name(p->scalars[s].dtype)));
        json_object_set_new(so, "value", kr__dtype_is_float(p->scalars[s].dtype)
                                             ? json_real(p->scalars[s].value)
                                             : json_integer(p->scalars[s].ivalue));
        json_array_append_new(scalars, so);
    }
    json_object_set_new(o, "scalars", scalars);
    json_t *cases = json_array();
    for (size_t c = 0; c < p->num_cases; c++)
        json_array_append_new(cases, case_json(p, c));
    json_object_set_new(o, "cases", cases);
    json_t *ref = json_object();
    json_object_set_new(ref, "kind", json_string(p->reference_kind == KR_REFERENCE_GOLDEN
                                                     ? "golden" : "source"));
    if (p->reference_name)
        json_object_set_new(ref, "source", json_string(p->reference_name));
    if (p->reference_kind == KR_REFERENCE_SOURCE)
        json_object_set_new(ref, "plan", json_string(p->reference_plan_json ? "json" : "annotations"));
    json_object_set_new(o, "reference", ref);
    json_t *base = json_object();
    for (size_t i = 0; i < p->num_baselines; i++)
        json_object_set_new(base, p->baselines[i].device, json_real(p->baselines[i].us));
    json_object_set_new(o, "baseline_us", base);
    *json_out = json_dumps(o, JSON_INDENT(2));
    json_decref(o);
    return *json_out ? KR_OK : KR_ENOMEM;
}
