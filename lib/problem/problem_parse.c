/* Reading a problem from JSON: top level, dims, cases, scalars, roofline
 * expressions and baselines. Tensors are in tensor_parse.c, the reference
 * in reference_parse.c, the error and field helpers they use in spec.c. */
#include "driver/context_impl.h"
#include "common/dtype.h"
#include "common/hash.h"
#include "common/json_locate.h"
#include "problem/problem_impl.h"
#include "problem/spec.h"
#include "common/strbuf.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DIMS 64
#define MAX_CASES 256
#define MAX_SPEC_BYTES ((size_t)16 << 20)

static int valid_name(const char *s)
{
    if (!s || !(isalpha((unsigned char)*s) || *s == '_'))
        return 0;
    for (; *s; s++)
        if (!(isalnum((unsigned char)*s) || *s == '_'))
            return 0;
    return 1;
}

static int parse_dims(kr__spec *sp, json_t *root)
{
    json_t *dims = json_object_get(root, "dims");
    if (!json_is_array(dims) || json_array_size(dims) == 0)
        return kr__spec_fail(sp, "dims", "expected a non-empty array of dim names, e.g. "
                             "[\"M\", \"N\"]");
    size_t n = json_array_size(dims);
    if (n > MAX_DIMS)
        return kr__spec_fail(sp, "dims", "%zu dims, at most %d", n, MAX_DIMS);
    kr_problem *p = sp->problem;
    if (!(p->dims = calloc(n, sizeof *p->dims)))
        return kr__fail(sp->ctx, KR_ENOMEM, "out of memory");
    for (size_t i = 0; i < n; i++) {
        char path[64];
        snprintf(path, sizeof path, "dims[%zu]", i);
        const char *name = json_string_value(json_array_get(dims, i));
        if (!valid_name(name))
            return kr__spec_fail(sp, path, "a dim name must be an identifier");
        if (kr__problem_find_dim(p, name) != SIZE_MAX)
            return kr__spec_fail(sp, path, "duplicate dim '%s'", name);
        if (strcmp(name, "min") == 0 || strcmp(name, "max") == 0 || strcmp(name, "cdiv") == 0)
            return kr__spec_fail(sp, path, "'%s' is a function name, not usable as a dim", name);
        if (!(p->dims[i] = kr__strdup(name)))
            return kr__fail(sp->ctx, KR_ENOMEM, "out of memory");
        p->num_dims++;
    }
    return KR_OK;
}

static int parse_case(kr__spec *sp, json_t *c, size_t index, int *timing)
{
    kr_problem *p = sp->problem;
    kr__case *k = &p->cases[index];
    char path[64];
    snprintf(path, sizeof path, "cases[%zu]", index);
    if (!json_is_object(c))
        return kr__spec_fail(sp, path, "a case is an object of dim values, e.g. "
                             "{\"name\": \"small\", \"M\": 7, \"N\": 33}");
    if (!(k->dims = calloc(p->num_dims, sizeof *k->dims)) ||
        !(k->bytes = calloc(p->num_tensors ? p->num_tensors : 1, sizeof *k->bytes)))
        return kr__fail(sp->ctx, KR_ENOMEM, "out of memory");
    const char *key;
    json_t *v;
    json_object_foreach(c, key, v) {
        char sub[160];
        snprintf(sub, sizeof sub, "%s.%s", path, key);
        if (strcmp(key, "name") == 0 || strcmp(key, "timing") == 0)
            continue;
        size_t d = kr__problem_find_dim(p, key);
        if (d == SIZE_MAX)
            return kr__spec_fail(sp, sub, "'%s' is not a dim (dims: see \"dims\"), nor name or "
                                 "timing", key);
        if (!json_is_integer(v) || json_integer_value(v) < 1)
            return kr__spec_fail(sp, sub, "a dim value must be an integer >= 1");
        k->dims[d] = json_integer_value(v);
    }
    for (size_t d = 0; d < p->num_dims; d++)
        if (k->dims[d] == 0)
            return kr__spec_fail(sp, path, "case misses dim '%s'", p->dims[d]);
    json_t *name = json_object_get(c, "name");
    if (name && !json_is_string(name)) {
        char sub[80];
        snprintf(sub, sizeof sub, "%s.name", path);
        return kr__spec_fail(sp, sub, "a case name must be a string");
    }
    char fallback[32];
    snprintf(fallback, sizeof fallback, "case%zu", index);
    if (!(k->name = kr__strdup(name ? json_string_value(name) : fallback)))
        return kr__fail(sp->ctx, KR_ENOMEM, "out of memory");
    for (size_t j = 0; j < index; j++)
        if (strcmp(p->cases[j].name, k->name) == 0)
            return kr__spec_fail(sp, path, "duplicate case name '%s'", k->name);
    json_t *t = json_object_get(c, "timing");
    if (t && !json_is_boolean(t))
        return kr__spec_fail(sp, path, "\"timing\" must be true or false");
    if (json_is_true(t)) {
        if (*timing >= 0)
            return kr__spec_fail(sp, path, "two timing cases (%s and %s): mark one",
                                 p->cases[*timing].name, k->name);
        *timing = (int)index;
    }
    return KR_OK;
}

static int parse_cases(kr__spec *sp, json_t *root)
{
    json_t *cases = json_object_get(root, "cases");
    size_t n = json_array_size(cases);
    if (!json_is_array(cases) || n == 0)
        return kr__spec_fail(sp, "cases", "expected a non-empty array of cases");
    if (n > MAX_CASES)
        return kr__spec_fail(sp, "cases", "%zu cases, at most %d", n, MAX_CASES);
    kr_problem *p = sp->problem;
    if (!(p->cases = calloc(n, sizeof *p->cases)))
        return kr__fail(sp->ctx, KR_ENOMEM, "out of memory");
    int timing = -1;
    for (size_t i = 0; i < n; i++) {
        p->num_cases++;
        int rc = parse_case(sp, json_array_get(cases, i), i, &timing);
        if (rc != KR_OK)
            return rc;
    }
    p->timing_case = timing >= 0 ? (size_t)timing : SIZE_MAX; /* resolved once sized */
    return KR_OK;
}

static int parse_scalars(kr__spec *sp, json_t *root)
{
    json_t *scalars = json_object_get(root, "scalars");
    if (!scalars)
        return KR_OK;
    if (!json_is_array(scalars))
        return kr__spec_fail(sp, "scalars", "expected an array of {name, dtype, value}");
    kr_problem *p = sp->problem;
    size_t n = json_array_size(scalars);
    if (!(p->scalars = calloc(n ? n : 1, sizeof *p->scalars)))
        return kr__fail(sp->ctx, KR_ENOMEM, "out of memory");
    static const char *const keys[] = {"name", "dtype", "value", NULL};
    for (size_t i = 0; i < n; i++) {
        char path[64], sub[96];
        snprintf(path, sizeof path, "scalars[%zu]", i);
        json_t *s = json_array_get(scalars, i);
        if (!json_is_object(s))
            return kr__spec_fail(sp, path, "expected {name, dtype, value}");
        int rc = kr__spec_only_keys(sp, s, path, keys);
        if (rc != KR_OK)
            return rc;
        kr__scalar *sc = &p->scalars[p->num_scalars];
        const char *name = json_string_value(json_object_get(s, "name"));
        snprintf(sub, sizeof sub, "%s.name", path);
        if (!valid_name(name))
            return kr__spec_fail(sp, sub, "a scalar name must be an identifier");
        if (kr__problem_find_dim(p, name) != SIZE_MAX || kr__problem_find_scalar(p, name) != SIZE_MAX)
            return kr__spec_fail(sp, sub, "duplicate name '%s'", name);
        snprintf(sub, sizeof sub, "%s.dtype", path);
        const char *dt = json_string_value(json_object_get(s, "dtype"));
        int dtype = dt ? kr__dtype_from_name(dt) : 0;
        if (dtype != KR_DTYPE_F32 && dtype != KR_DTYPE_F64 && dtype != KR_DTYPE_I32 &&
            dtype != KR_DTYPE_I64)
            return kr__spec_fail(sp, sub, "scalar dtype must be f32, f64, i32 or i64");
        snprintf(sub, sizeof sub, "%s.value", path);
        json_t *v = json_object_get(s, "value");
        if (!json_is_number(v))
            return kr__spec_fail(sp, sub, "expected a number");
        if (!kr__dtype_is_float(dtype) && !json_is_integer(v))
            return kr__spec_fail(sp, sub, "an integer scalar needs an integer value");
        if (dtype == KR_DTYPE_I32 && (json_integer_value(v) > INT32_MAX ||
                                      json_integer_value(v) < INT32_MIN))
            return kr__spec_fail(sp, sub, "value does not fit i32");
        if (!(sc->name = kr__strdup(name)))
            return kr__fail(sp->ctx, KR_ENOMEM, "out of memory");
        sc->dtype = dtype;
        sc->value = json_number_value(v);
        sc->ivalue = json_is_integer(v) ? json_integer_value(v) : 0;
        p->num_scalars++;
    }
    return KR_OK;
}

static int parse_optional(kr__spec *sp, json_t *root)
{
    kr_problem *p = sp->problem;
    json_t *v;
    int rc = KR_OK;
    if ((v = json_object_get(root, "bytes")))
        rc = kr__spec_expr(sp, v, "bytes", &p->bytes_expr);
    if (rc == KR_OK && (v = json_object_get(root, "flops")))
        rc = kr__spec_expr(sp, v, "flops", &p->flops_expr);
    json_t *base = json_object_get(root, "baseline_us");
    if (rc != KR_OK || !base)
        return rc;
    if (!json_is_object(base))
        return kr__spec_fail(sp, "baseline_us", "expected {\"DEVICE NAME\": microseconds, ...}");
    p->baselines = calloc(json_object_size(base) + 1, sizeof *p->baselines);
    if (!p->baselines)
        return kr__fail(sp->ctx, KR_ENOMEM, "out of memory");
    const char *key;
    json_object_foreach(base, key, v) {
        if (!json_is_number(v) || json_number_value(v) <= 0) {
            char sub[300];
            snprintf(sub, sizeof sub, "baseline_us.%s", key);
            return kr__spec_fail(sp, sub, "a baseline time must be a positive number of "
                                 "microseconds");
        }
        p->baselines[p->num_baselines].device = kr__strdup(key);
        p->baselines[p->num_baselines].us = json_number_value(v);
        p->num_baselines++;
    }
    return KR_OK;
}

static void compute_hash(kr__spec *sp, json_t *root)
{
    kr_problem *p = sp->problem;
    char *canonical = json_dumps(root, JSON_COMPACT | JSON_SORT_KEYS);
    kr__hasher h;
    if (kr__hasher_init(&h) != 0) {
        free(canonical);
        return;
    }
    kr__hasher_str(&h, "kreward-problem/1");
    kr__hasher_str(&h, canonical ? canonical : "");
    kr__hasher_str(&h, p->reference_source);
    kr__hasher_str(&h, p->fast_source ? p->fast_source : "");
    kr__hash128_hex(kr__hasher_final(&h), p->hash);
    free(canonical);
}

static int parse_root(kr__spec *sp, json_t *root)
{
    static const char *const keys[] = {"name", "description", "dims", "cases", "tensors",
                                       "scalars", "reference", "bytes", "flops", "baseline_us",
                                       NULL};
    if (!json_is_object(root))
        return kr__spec_fail(sp, "", "a problem is a JSON object");
    int rc = kr__spec_only_keys(sp, root, "", keys);
    if (rc != KR_OK)
        return rc;
    kr_problem *p = sp->problem;
    const char *name = json_string_value(json_object_get(root, "name"));
    if (!name || !*name)
        return kr__spec_fail(sp, "name", "a problem needs a \"name\" string");
    p->name = kr__strdup(name);
    json_t *desc = json_object_get(root, "description");
    if (desc && !json_is_string(desc))
        return kr__spec_fail(sp, "description", "expected a string");
    p->description = kr__strdup(desc ? json_string_value(desc) : "");
    if ((rc = parse_dims(sp, root)) != KR_OK || (rc = parse_scalars(sp, root)) != KR_OK ||
        (rc = kr__spec_parse_tensors(sp, root)) != KR_OK || (rc = parse_cases(sp, root)) != KR_OK ||
        (rc = kr__spec_parse_reference(sp, root)) != KR_OK || (rc = parse_optional(sp, root)) != KR_OK ||
        (rc = kr__spec_size_cases(sp)) != KR_OK)
        return rc;
    compute_hash(sp, root);
    return KR_OK;
}

int kr_problem_parse(kr_problem **out, kr_context *ctx, const char *json, size_t len,
                     const char *name, const char *base_dir)
{
    if (!ctx || !out || !json)
        return KR_EINVAL;
    *out = NULL;
    kr__clear_error(ctx);
    const char *file = name ? name : "problem.json";
    if (len > MAX_SPEC_BYTES)
        return kr__fail(ctx, KR_ETOOBIG, "%s: %zu bytes, over the %zu byte limit for a problem",
                        file, len, MAX_SPEC_BYTES);
    json_error_t err;
    json_t *root = json_loadb(json, len, JSON_REJECT_DUPLICATES, &err);
    if (!root)
        return kr__fail(ctx, KR_EPARSE, "%s:%d:%d: %s", file, err.line, err.column, err.text);
    kr_problem *p = calloc(1, sizeof *p);
    if (!p || !(p->file = kr__strdup(file))) {
        free(p);
        json_decref(root);
        return kr__fail(ctx, KR_ENOMEM, "out of memory");
    }
    kr__spec sp = {ctx, json, len, file, base_dir, p};
    int rc = parse_root(&sp, root);
    if (rc == KR_OK && !(p->spec = kr__spec_self_contained(root, p)))
        rc = kr__fail(ctx, KR_ENOMEM, "out of memory");
    json_decref(root);
    if (rc != KR_OK) {
        kr_problem_free(p);
        return rc;
    }
    *out = p;
    return KR_OK;
}

int kr_problem_load(kr_problem **out, kr_context *ctx, const char *path)
{
    if (!ctx || !out || !path)
        return KR_EINVAL;
    *out = NULL;
    kr__clear_error(ctx);
    FILE *f = fopen(path, "rb");
    if (!f)
        return kr__fail(ctx, KR_EIO, "cannot open %s", path);
    kr__buf b = KR__BUF_INIT;
    char chunk[16384];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0 && b.len <= MAX_SPEC_BYTES)
        kr__buf_append(&b, chunk, n);
    fclose(f);
    char *text = kr__buf_take(&b);
    if (!text)
        return kr__fail(ctx, KR_ENOMEM, "out of memory");
    char dir[4096];
    kr__strlcpy(dir, path, sizeof dir);
    char *slash = strrchr(dir, '/');
    if (slash)
        *slash = '\0';
    else
        snprintf(dir, sizeof dir, ".");
    int rc = kr_problem_parse(out, ctx, text, strlen(text), path, dir);
    free(text);
    return rc;
}
