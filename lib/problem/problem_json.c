/* A problem described as JSON, every case's sizes included (for `kreward
 * problem show` and the bindings). */
#include "problem/problem_impl.h"
#include "common/dtype.h"

#include <jansson.h>
#include <stdlib.h>

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
        size_t rank = kr_problem_tensor_shape(ext, 8, p, t, c);
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

int kr_problem_json(char **json_out, const kr_problem *p)
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
    if (p->fast_name)
        json_object_set_new(ref, "fast", json_string(p->fast_name));
    json_object_set_new(o, "reference", ref);
    json_t *base = json_object();
    for (size_t i = 0; i < p->num_baselines; i++)
        json_object_set_new(base, p->baselines[i].device, json_real(p->baselines[i].us));
    json_object_set_new(o, "baseline_us", base);
    *json_out = json_dumps(o, JSON_INDENT(2));
    json_decref(o);
    return *json_out ? KR_OK : KR_ENOMEM;
}
