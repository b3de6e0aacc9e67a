/* Reading a problem's tensors (dtype, shape, role, input distribution,
 * tolerance) and sizing them for every case. */
#include "driver/context_impl.h"
#include "common/dtype.h"
#include "problem/problem_impl.h"
#include "problem/spec.h"
#include "common/strbuf.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_RANK 8
/* A bound on the work per verification unit (every tensor gets its own
 * buffer, guard zones, poison, canaries and a hash) and on what a malformed
 * spec can make us allocate; a KernelBench model with its parameters and
 * buffers lifted into inputs has a few hundred (the limit was 64). */
#define MAX_TENSORS 1024
/* One tensor may not exceed this; a candidate cannot make us allocate more. */
#define MAX_TENSOR_BYTES ((uint64_t)64 << 30)

static int number(kr__spec *sp, json_t *obj, const char *key, const char *path, double fallback,
                  double *out)
{
    json_t *v = json_object_get(obj, key);
    if (!v) {
        *out = fallback;
        return KR_OK;
    }
    if (!json_is_number(v)) {
        char sub[200];
        snprintf(sub, sizeof sub, "%s.%s", path, key);
        return kr__spec_fail(sp, sub, "expected a number");
    }
    *out = json_number_value(v);
    return KR_OK;
}

static int dist_kind(const char *name)
{
    static const struct {
        const char *name;
        int kind;
    } kinds[] = {{"uniform", KR_GEN_UNIFORM}, {"normal", KR_GEN_NORMAL}, {"int", KR_GEN_INT},
                 {"pareto", KR_GEN_PARETO},   {"mix", KR_GEN_MIX},       {"bernoulli", KR_GEN_BERNOULLI}};
    for (size_t i = 0; name && i < sizeof kinds / sizeof kinds[0]; i++)
        if (strcmp(kinds[i].name, name) == 0)
            return kinds[i].kind;
    return 0;
}

/* The continuous part: uniform, normal, pareto (also a mix's base). */
static int continuous(kr__spec *sp, json_t *init, const char *path, int kind, int dtype,
                      kr_gen_dist *d)
{
    double max = kr__dtype_max(dtype);
    int rc;
    if (kind == KR_GEN_UNIFORM) {
        if ((rc = number(sp, init, "low", path, -1.0, &d->a)) || (rc = number(sp, init, "high", path, 1.0, &d->b)))
            return rc;
        if (!(d->a < d->b))
            return kr__spec_fail(sp, path, "uniform needs low < high (constant inputs prove "
                                 "nothing)");
        if (fabs(d->a) > max || fabs(d->b) > max)
            return kr__spec_fail(sp, path, "range exceeds what %s can hold (%g)",
                                 kr__dtype_name(dtype), max);
    } else if (kind == KR_GEN_NORMAL) {
        if ((rc = number(sp, init, "mean", path, 0.0, &d->a)) || (rc = number(sp, init, "std", path, 1.0, &d->b)))
            return rc;
        if (!(d->b > 0))
            return kr__spec_fail(sp, path, "normal needs std > 0");
        if (fabs(d->a) + 8 * d->b > max)
            return kr__spec_fail(sp, path, "mean and std exceed what %s can hold (%g)",
                                 kr__dtype_name(dtype), max);
    } else {
        if ((rc = number(sp, init, "alpha", path, 1.5, &d->a)) || (rc = number(sp, init, "scale", path, 1.0, &d->b)))
            return rc;
        if (!(d->a >= 0.1) || !(d->b > 0))
            return kr__spec_fail(sp, path, "pareto needs alpha >= 0.1 and scale > 0");
    }
    return KR_OK;
}

static int parse_mix(kr__spec *sp, json_t *init, const char *path, int dtype, kr_gen_dist *d)
{
    static const char *const keys[] = {"dist", "base", "fraction", "outlier_scale", NULL};
    int rc = kr__spec_only_keys(sp, init, path, keys);
    if (rc != KR_OK)
        return rc;
    char bpath[200];
    snprintf(bpath, sizeof bpath, "%s.base", path);
    json_t *base = json_object_get(init, "base");
    if (!json_is_object(base))
        return kr__spec_fail(sp, bpath, "a mix needs a base distribution, e.g. {\"dist\": "
                             "\"normal\", \"std\": 1}");
    int bkind = dist_kind(json_string_value(json_object_get(base, "dist")));
    if (bkind != KR_GEN_UNIFORM && bkind != KR_GEN_NORMAL && bkind != KR_GEN_PARETO)
        return kr__spec_fail(sp, bpath, "the base of a mix is uniform, normal or pareto");
    static const char *const bkeys[] = {"dist", "low", "high", "mean", "std", "alpha", "scale", NULL};
    if ((rc = kr__spec_only_keys(sp, base, bpath, bkeys)) ||
        (rc = continuous(sp, base, bpath, bkind, dtype, d)))
        return rc;
    d->base_kind = (kr_u32)bkind;
    if ((rc = number(sp, init, "fraction", path, 0.001, &d->p)) ||
        (rc = number(sp, init, "outlier_scale", path, 1000.0, &d->outlier_scale)))
        return rc;
    if (!(d->p > 0 && d->p < 1))
        return kr__spec_fail(sp, path, "mix fraction must be in (0, 1)");
    if (!(fabs(d->outlier_scale) > 1))
        return kr__spec_fail(sp, path, "mix outlier_scale must exceed 1 in magnitude");
    return KR_OK;
}

static int parse_int_dist(kr__spec *sp, json_t *init, const char *path, int dtype, kr_gen_dist *d)
{
    int64_t lo, hi;
    kr__dtype_int_range(dtype, &lo, &hi);
    if (kr__dtype_is_float(dtype)) {
        double m = fmin(kr__dtype_max(dtype), 9007199254740992.0);
        lo = (int64_t)-m;
        hi = (int64_t)m;
    }
    json_t *l = json_object_get(init, "low"), *h = json_object_get(init, "high");
    if ((l && !json_is_integer(l)) || (h && !json_is_integer(h)))
        return kr__spec_fail(sp, path, "int needs integer low and high (inclusive)");
    d->ilo = l ? json_integer_value(l) : (lo < -100 ? -100 : lo);
    d->ihi = h ? json_integer_value(h) : (hi > 100 ? 100 : hi);
    if (d->ilo >= d->ihi)
        return kr__spec_fail(sp, path, "int needs low < high (constant inputs prove nothing)");
    if (d->ilo < lo || d->ihi > hi)
        return kr__spec_fail(sp, path, "range [%lld, %lld] exceeds %s [%lld, %lld]",
                             (long long)d->ilo, (long long)d->ihi, kr__dtype_name(dtype),
                             (long long)lo, (long long)hi);
    return KR_OK;
}

static int default_dist(int dtype, kr_gen_dist *d)
{
    if (dtype == KR_DTYPE_BOOL) {
        d->kind = KR_GEN_BERNOULLI;
        d->p = 0.5;
    } else if (!kr__dtype_is_float(dtype)) {
        int64_t lo, hi;
        kr__dtype_int_range(dtype, &lo, &hi);
        d->kind = KR_GEN_INT;
        d->ilo = lo < -100 ? -100 : lo;
        d->ihi = hi > 100 ? 100 : hi;
    } else {
        d->kind = KR_GEN_NORMAL;
        d->a = 0.0;
        d->b = 1.0;
    }
    return KR_OK;
}

static int parse_init(kr__spec *sp, json_t *t, const char *tpath, kr__tensor *x)
{
    kr_gen_dist *d = &x->dist;
    memset(d, 0, sizeof *d);
    d->dtype = (kr_u32)x->dtype;
    d->clamp = kr__dtype_is_float(x->dtype) ? kr__dtype_max(x->dtype) : 1.8e19;
    char path[200];
    snprintf(path, sizeof path, "%s.init", tpath);
    json_t *init = json_object_get(t, "init");
    if (!init)
        return default_dist(x->dtype, d);
    if (x->role == KR_ROLE_OUT)
        return kr__spec_fail(sp, path, "an output is poisoned before every run; init applies "
                             "to in and inout tensors");
    if (!json_is_object(init))
        return kr__spec_fail(sp, path, "expected {\"dist\": \"normal\", ...}");
    const char *name = json_string_value(json_object_get(init, "dist"));
    int kind = dist_kind(name);
    if (!kind)
        return kr__spec_fail(sp, path, "unknown dist '%s' (known: uniform, normal, int, pareto, "
                             "mix, bernoulli)", name ? name : "(missing)");
    d->kind = (kr_u32)kind;
    int is_float = kr__dtype_is_float(x->dtype);
    if (!is_float && kind != KR_GEN_INT && kind != KR_GEN_BERNOULLI)
        return kr__spec_fail(sp, path, "%s tensors take int or bernoulli inputs",
                             kr__dtype_name(x->dtype));
    if (kind == KR_GEN_MIX)
        return parse_mix(sp, init, path, x->dtype, d);
    static const char *const keys[] = {"dist", "low", "high", "mean", "std", "alpha", "scale", "p",
                                       NULL};
    int rc = kr__spec_only_keys(sp, init, path, keys);
    if (rc != KR_OK)
        return rc;
    if (kind == KR_GEN_INT)
        return parse_int_dist(sp, init, path, x->dtype, d);
    if (kind == KR_GEN_BERNOULLI) {
        if ((rc = number(sp, init, "p", path, 0.5, &d->p)))
            return rc;
        return d->p > 0 && d->p < 1 ? KR_OK
                                    : kr__spec_fail(sp, path, "bernoulli needs 0 < p < 1");
    }
    return continuous(sp, init, path, kind, x->dtype, d);
}

static int parse_tolerance(kr__spec *sp, json_t *t, const char *tpath, kr__tensor *x)
{
    kr__dtype_default_tolerance(x->dtype, &x->rtol, &x->atol);
    json_t *tol = json_object_get(t, "tolerance");
    if (!tol)
        return KR_OK;
    char path[200];
    snprintf(path, sizeof path, "%s.tolerance", tpath);
    if (x->role == KR_ROLE_IN)
        return kr__spec_fail(sp, path, "inputs have no tolerance (they must stay unchanged)");
    static const char *const keys[] = {"rtol", "atol", NULL};
    int rc = kr__spec_only_keys(sp, tol, path, keys);
    if (rc || (rc = number(sp, tol, "rtol", path, x->rtol, &x->rtol)) ||
        (rc = number(sp, tol, "atol", path, x->atol, &x->atol)))
        return rc;
    if (!(x->rtol >= 0 && x->atol >= 0))
        return kr__spec_fail(sp, path, "tolerances must be >= 0");
    return KR_OK;
}

static int parse_shape(kr__spec *sp, json_t *t, const char *tpath, kr__tensor *x)
{
    char path[200];
    snprintf(path, sizeof path, "%s.shape", tpath);
    json_t *shape = json_object_get(t, "shape");
    if (!json_is_array(shape))
        return kr__spec_fail(sp, path, "expected an array of extents, e.g. [\"M\", \"N\"] "
                             "([] for a single element)");
    size_t rank = json_array_size(shape);
    if (rank > MAX_RANK)
        return kr__spec_fail(sp, path, "rank %zu, at most %d", rank, MAX_RANK);
    if (!(x->shape = calloc(rank ? rank : 1, sizeof *x->shape)))
        return kr__fail(sp->ctx, KR_ENOMEM, "out of memory");
    for (size_t i = 0; i < rank; i++) {
        char sub[220];
        snprintf(sub, sizeof sub, "%s[%zu]", path, i);
        int rc = kr__spec_expr(sp, json_array_get(shape, i), sub, &x->shape[i]);
        if (rc != KR_OK)
            return rc;
        x->rank++;
    }
    return KR_OK;
}

static int parse_tensor(kr__spec *sp, json_t *t, size_t index)
{
    kr_problem *p = sp->problem;
    char path[64], sub[100];
    snprintf(path, sizeof path, "tensors[%zu]", index);
    if (!json_is_object(t))
        return kr__spec_fail(sp, path, "expected {name, dtype, shape, role, ...}");
    static const char *const keys[] = {"name", "dtype", "shape", "role", "init", "tolerance", NULL};
    int rc = kr__spec_only_keys(sp, t, path, keys);
    if (rc != KR_OK)
        return rc;
    kr__tensor *x = &p->tensors[index];
    const char *name = json_string_value(json_object_get(t, "name"));
    snprintf(sub, sizeof sub, "%s.name", path);
    if (!name || !*name)
        return kr__spec_fail(sp, sub, "a tensor needs a name");
    for (size_t j = 0; j < index; j++)
        if (strcmp(p->tensors[j].name, name) == 0)
            return kr__spec_fail(sp, sub, "duplicate tensor name '%s'", name);
    if (kr__problem_find_dim(p, name) != SIZE_MAX || kr__problem_find_scalar(p, name) != SIZE_MAX)
        return kr__spec_fail(sp, sub, "'%s' is already a dim or scalar name", name);
    if (!(x->name = kr__strdup(name)))
        return kr__fail(sp->ctx, KR_ENOMEM, "out of memory");
    snprintf(sub, sizeof sub, "%s.dtype", path);
    const char *dt = json_string_value(json_object_get(t, "dtype"));
    if (!(x->dtype = dt ? kr__dtype_from_name(dt) : 0))
        return kr__spec_fail(sp, sub, "unsupported dtype '%s' (supported: %s)",
                             dt ? dt : "(missing)", kr__dtype_names());
    snprintf(sub, sizeof sub, "%s.role", path);
    const char *role = json_string_value(json_object_get(t, "role"));
    x->role = !role ? 0 : strcmp(role, "in") == 0 ? KR_ROLE_IN : strcmp(role, "out") == 0 ? KR_ROLE_OUT
            : strcmp(role, "inout") == 0 ? KR_ROLE_INOUT : 0;
    if (!x->role)
        return kr__spec_fail(sp, sub, "role must be in, out or inout");
    if ((rc = parse_shape(sp, t, path, x)) || (rc = parse_init(sp, t, path, x)) ||
        (rc = parse_tolerance(sp, t, path, x)))
        return rc;
    return KR_OK;
}

int kr__spec_parse_tensors(kr__spec *sp, json_t *root)
{
    json_t *tensors = json_object_get(root, "tensors");
    size_t n = json_array_size(tensors);
    if (!json_is_array(tensors) || n == 0)
        return kr__spec_fail(sp, "tensors", "expected a non-empty array of tensors");
    if (n > MAX_TENSORS)
        return kr__spec_fail(sp, "tensors", "%zu tensors, at most %d", n, MAX_TENSORS);
    kr_problem *p = sp->problem;
    if (!(p->tensors = calloc(n, sizeof *p->tensors)))
        return kr__fail(sp->ctx, KR_ENOMEM, "out of memory");
    int outputs = 0;
    for (size_t i = 0; i < n; i++) {
        p->num_tensors++;
        int rc = parse_tensor(sp, json_array_get(tensors, i), i);
        if (rc != KR_OK)
            return rc;
        outputs += p->tensors[i].role != KR_ROLE_IN;
    }
    if (!outputs)
        return kr__spec_fail(sp, "tensors", "no tensor has role out or inout: nothing to check");
    return KR_OK;
}

int kr__spec_size_cases(kr__spec *sp)
{
    kr_problem *p = sp->problem;
    uint64_t largest = 0;
    size_t largest_case = 0;
    for (size_t c = 0; c < p->num_cases; c++) {
        uint64_t total = 0;
        for (size_t t = 0; t < p->num_tensors; t++) {
            const kr__tensor *x = &p->tensors[t];
            char path[96], why[400];
            snprintf(path, sizeof path, "tensors[%zu].shape", t);
            int64_t ext[MAX_RANK];
            if (kr__problem_tensor_dims(p, t, c, ext, MAX_RANK, why, sizeof why) != 0)
                return kr__spec_fail(sp, path, "case '%s': %s", p->cases[c].name, why);
            uint64_t bytes = (uint64_t)kr__dtype_size(x->dtype);
            for (size_t i = 0; i < x->rank; i++)
                if (__builtin_mul_overflow(bytes, (uint64_t)ext[i], &bytes))
                    return kr__spec_fail_code(sp, KR_ERANGE, path, "case '%s': size overflows 64 bits",
                                              p->cases[c].name);
            if (bytes > MAX_TENSOR_BYTES)
                return kr__spec_fail_code(sp, KR_ETOOBIG, path,
                                          "case '%s': %llu bytes, over the %llu byte limit per tensor",
                                          p->cases[c].name, (unsigned long long)bytes,
                                          (unsigned long long)MAX_TENSOR_BYTES);
            if (bytes == 0)
                return kr__spec_fail(sp, path, "case '%s': the tensor is empty",
                                     p->cases[c].name);
            p->cases[c].bytes[t] = bytes;
            total += bytes;
        }
        if (total > largest) {
            largest = total;
            largest_case = c;
        }
    }
    /* without a marked timing case, the largest one is timed */
    if (p->timing_case == SIZE_MAX)
        p->timing_case = largest_case;
    return KR_OK;
}
