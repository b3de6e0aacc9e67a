/* Reading launch plans as JSON (kr_plan_parse_json, docs/problem-format.md):
 *
 *   {"launches": [{"kernel": K, "grid": [..], "block": [..], "smem": E, "args": [..]}, ...],
 *    "scratch": [{"name": N, "bytes": E, "init": "zero"|"poison"}, ...]}
 *
 * into the same text form as the annotations (plan_parse.c): values stay
 * expression text until binding (plan_bind.c). */
#include "driver/context_impl.h"
#include "problem/plan_impl.h"
#include "common/strbuf.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* JSON value (string or integer) to expression text. */
static char *expr_text(json_t *v)
{
    if (json_is_string(v))
        return kr__strdup(json_string_value(v));
    if (json_is_integer(v)) {
        char t[32];
        snprintf(t, sizeof t, "%lld", (long long)json_integer_value(v));
        return kr__strdup(t);
    }
    return NULL;
}

static int json_dims(json_t *arr, char **dst, size_t *num)
{
    if (json_is_integer(arr) || json_is_string(arr)) {
        *num = 1;
        return (dst[0] = expr_text(arr)) ? 0 : -1;
    }
    size_t n = json_array_size(arr);
    if (!json_is_array(arr) || n == 0 || n > 3)
        return -1;
    for (size_t i = 0; i < n; i++)
        if (!(dst[i] = expr_text(json_array_get(arr, i))))
            return -1;
    *num = n;
    return 0;
}

static int json_launch(kr_context *ctx, kr_plan *plan, json_t *j, size_t i)
{
    kr__launch_text *l = kr__plan_new_launch(plan);
    if (!l)
        return kr__fail(ctx, KR_EPLAN, "%s: too many launches", plan->name);
    snprintf(l->where, sizeof l->where, "launches[%zu]", i);
    const char *kernel = json_string_value(json_object_get(j, "kernel"));
    if (!kernel || !(l->kernel = kr__strdup(kernel)))
        return kr__fail(ctx, KR_EPLAN, "%s: %s: needs \"kernel\"", plan->name, l->where);
    if (json_dims(json_object_get(j, "grid"), l->grid, &l->num_grid) != 0 ||
        json_dims(json_object_get(j, "block"), l->block, &l->num_block) != 0)
        return kr__fail(ctx, KR_EPLAN, "%s: %s: grid and block are 1 to 3 integers or "
                        "expression strings", plan->name, l->where);
    json_t *smem = json_object_get(j, "smem");
    if (smem && !(l->smem = expr_text(smem)))
        return kr__fail(ctx, KR_EPLAN, "%s: %s: smem is an integer or expression string",
                        plan->name, l->where);
    json_t *args = json_object_get(j, "args");
    size_t n = json_array_size(args);
    if (!json_is_array(args) || n > KR__PLAN_MAX_ARGS)
        return kr__fail(ctx, KR_EPLAN, "%s: %s: args is an array of at most %d names or "
                        "expressions", plan->name, l->where, KR__PLAN_MAX_ARGS);
    if (!(l->args = calloc(n ? n : 1, sizeof *l->args)))
        return kr__fail(ctx, KR_ENOMEM, "out of memory");
    for (; l->num_args < n; l->num_args++)
        if (!(l->args[l->num_args] = expr_text(json_array_get(args, l->num_args))))
            return kr__fail(ctx, KR_EPLAN, "%s: %s: args[%zu] is not a name or expression",
                            plan->name, l->where, l->num_args);
    static const char *const keys[] = {"kernel", "grid", "block", "smem", "args"};
    const char *key;
    json_t *v;
    json_object_foreach(j, key, v) {
        int known = 0;
        for (size_t k = 0; k < 5; k++)
            known |= strcmp(key, keys[k]) == 0;
        if (!known)
            return kr__fail(ctx, KR_EPLAN, "%s: %s: unknown key '%s' (kernel, grid, block, smem, "
                            "args)", plan->name, l->where, key);
    }
    return KR_OK;
}

static int json_scratch(kr_context *ctx, kr_plan *plan, json_t *j, size_t i)
{
    kr__scratch_text *s = kr__plan_new_scratch(plan);
    if (!s)
        return kr__plan_scratch_refused(ctx, plan);
    snprintf(s->where, sizeof s->where, "scratch[%zu]", i);
    const char *name = json_string_value(json_object_get(j, "name"));
    const char *init = json_string_value(json_object_get(j, "init"));
    s->name = kr__strdup(name);
    s->bytes = expr_text(json_object_get(j, "bytes"));
    s->zero = !init || strcmp(init, "zero") == 0;
    if (!s->name || !s->bytes || (init && strcmp(init, "zero") && strcmp(init, "poison")))
        return kr__fail(ctx, KR_EPLAN, "%s: %s: needs name, bytes and optional init "
                        "(zero|poison)", plan->name, s->where);
    return KR_OK;
}

int kr_plan_parse_json(kr_plan **out, kr_context *ctx, const char *json, size_t len,
                       const char *name)
{
    if (!ctx || !out || !json)
        return KR_EINVAL;
    *out = NULL;
    kr__clear_error(ctx);
    json_error_t err;
    json_t *root = json_loadb(json, len ? len : strlen(json), 0, &err);
    if (!root)
        return kr__fail(ctx, KR_EPARSE, "%s:%d:%d: %s", name ? name : "plan", err.line,
                        err.column, err.text);
    kr_plan *plan = kr__plan_new(name ? name : "plan");
    int rc = plan ? KR_OK : kr__fail(ctx, KR_ENOMEM, "out of memory");
    json_t *launches = json_object_get(root, "launches");
    json_t *scratch = json_object_get(root, "scratch");
    if (rc == KR_OK && (!json_is_array(launches) || json_array_size(launches) == 0))
        rc = kr__fail(ctx, KR_EPLAN, "%s: a plan needs a non-empty \"launches\" array", plan->name);
    for (size_t i = 0; rc == KR_OK && i < json_array_size(launches); i++)
        rc = json_launch(ctx, plan, json_array_get(launches, i), i);
    if (rc == KR_OK && scratch && !json_is_array(scratch))
        rc = kr__fail(ctx, KR_EPLAN, "%s: \"scratch\" is an array", plan->name);
    for (size_t i = 0; rc == KR_OK && i < json_array_size(scratch); i++)
        rc = json_scratch(ctx, plan, json_array_get(scratch, i), i);
    json_decref(root);
    if (rc != KR_OK) {
        kr_plan_free(plan);
        return rc;
    }
    *out = plan;
    return KR_OK;
}
