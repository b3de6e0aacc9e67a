/* Reading a problem's "reference": the source (or inline CUDA) whose
 * outputs define the function and whose time defines the speedup, or the
 * caller's golden outputs; and its optional "fast" twin, a tuned kernel of
 * the same function that verification and timed-output checks may use for
 * their expected outputs (run/fast_reference.c checks it against the
 * reference before trusting it). The self-contained spec a worker parses
 * again carries both sources inline. */
#include "driver/context_impl.h"
#include "problem/problem_impl.h"
#include "problem/spec.h"
#include "common/strbuf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_SOURCE_BYTES ((size_t)16 << 20)

static char *read_relative(kr__spec *sp, const char *rel, char *path, size_t path_size)
{
    if (rel[0] == '/' || !sp->base_dir)
        snprintf(path, path_size, "%s", rel);
    else
        snprintf(path, path_size, "%s/%s", sp->base_dir, rel);
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    kr__buf b = KR__BUF_INIT;
    char chunk[8192];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0 && b.len < MAX_SOURCE_BYTES)
        kr__buf_append(&b, chunk, n);
    fclose(f);
    return kr__buf_take(&b);
}

/* {"source": FILE} or {"cuda": TEXT}, with an optional "plan": the source
 * text, its name for messages, the plan as JSON text (or NULL: the
 * source's annotations). path: where obj sits in the spec, for errors. */
static int parse_source(kr__spec *sp, json_t *obj, const char *path, const char *inline_name,
                        char **source_out, char **name_out, char **plan_out)
{
    char sub[64];
    json_t *source = json_object_get(obj, "source"), *cuda = json_object_get(obj, "cuda");
    json_t *plan = json_object_get(obj, "plan");
    if (source) {
        snprintf(sub, sizeof sub, "%s.source", path);
        if (!json_is_string(source))
            return kr__spec_fail(sp, sub, "expected a file name");
        char file[4096];
        *source_out = read_relative(sp, json_string_value(source), file, sizeof file);
        if (!*source_out)
            return kr__spec_fail_code(sp, KR_EIO, sub, "cannot read %s", file);
        *name_out = kr__strdup(json_string_value(source));
    } else {
        snprintf(sub, sizeof sub, "%s.cuda", path);
        if (!json_is_string(cuda) || !*json_string_value(cuda))
            return kr__spec_fail(sp, sub, "expected CUDA source text");
        *source_out = kr__strdup(json_string_value(cuda));
        *name_out = kr__strdup(inline_name);
    }
    if (plan) {
        snprintf(sub, sizeof sub, "%s.plan", path);
        if (!json_is_object(plan))
            return kr__spec_fail(sp, sub, "expected a plan object {\"launches\": [...]}");
        *plan_out = json_dumps(plan, JSON_COMPACT);
        if (!*plan_out)
            return kr__fail(sp->ctx, KR_ENOMEM, "out of memory");
    }
    return *source_out && *name_out ? KR_OK : kr__fail(sp->ctx, KR_ENOMEM, "out of memory");
}

static int parse_fast(kr__spec *sp, json_t *fast)
{
    kr_problem *p = sp->problem;
    static const char *const keys[] = {"source", "cuda", "plan", NULL};
    if (!json_is_object(fast))
        return kr__spec_fail(sp, "reference.fast", "expected {\"source\": \"FILE.cu\"} or "
                             "{\"cuda\": \"...\"}: a faster kernel of the same function");
    int rc = kr__spec_only_keys(sp, fast, "reference.fast", keys);
    if (rc != KR_OK)
        return rc;
    if ((json_object_get(fast, "source") != NULL) + (json_object_get(fast, "cuda") != NULL) != 1)
        return kr__spec_fail(sp, "reference.fast", "give exactly one of source, cuda");
    return parse_source(sp, fast, "reference.fast", "reference_fast.cu", &p->fast_source,
                        &p->fast_name, &p->fast_plan_json);
}

int kr__spec_parse_reference(kr__spec *sp, json_t *root)
{
    kr_problem *p = sp->problem;
    json_t *ref = json_object_get(root, "reference");
    if (!json_is_object(ref))
        return kr__spec_fail(sp, "reference", "expected {\"source\": \"FILE.cu\"}, {\"cuda\": "
                             "\"...\"} or {\"golden\": true}");
    static const char *const keys[] = {"source", "cuda", "plan", "golden", "fast", NULL};
    int rc = kr__spec_only_keys(sp, ref, "reference", keys);
    if (rc != KR_OK)
        return rc;
    json_t *source = json_object_get(ref, "source"), *cuda = json_object_get(ref, "cuda");
    json_t *golden = json_object_get(ref, "golden"), *plan = json_object_get(ref, "plan");
    json_t *fast = json_object_get(ref, "fast");
    if ((source != NULL) + (cuda != NULL) + (golden != NULL) != 1)
        return kr__spec_fail(sp, "reference", "give exactly one of source, cuda, golden");
    if (golden) {
        if (!json_is_true(golden))
            return kr__spec_fail(sp, "reference.golden", "must be true (outputs are computed "
                                 "by the caller, e.g. with PyTorch)");
        if (plan)
            return kr__spec_fail(sp, "reference.plan", "a golden reference has no plan");
        if (fast)
            return kr__spec_fail(sp, "reference.fast", "a golden reference has no fast kernel "
                                 "(the caller computes its outputs)");
        p->reference_kind = KR_REFERENCE_GOLDEN;
        return KR_OK;
    }
    p->reference_kind = KR_REFERENCE_SOURCE;
    rc = parse_source(sp, ref, "reference", "reference.cu", &p->reference_source,
                      &p->reference_name, &p->reference_plan_json);
    return rc == KR_OK && fast ? parse_fast(sp, fast) : rc;
}

/* A "source" key replaced by the file's text under "cuda". */
static void inline_source(json_t *obj, const char *text)
{
    if (json_is_object(obj) && json_object_get(obj, "source") && text) {
        json_object_del(obj, "source");
        json_object_set_new(obj, "cuda", json_string(text));
    }
}

char *kr__spec_self_contained(json_t *root, const kr_problem *p)
{
    json_t *copy = json_deep_copy(root);
    json_t *ref = copy ? json_object_get(copy, "reference") : NULL;
    inline_source(ref, p->reference_source);
    if (json_is_object(ref))
        inline_source(json_object_get(ref, "fast"), p->fast_source);
    char *text = copy ? json_dumps(copy, JSON_COMPACT) : NULL;
    json_decref(copy);
    return text;
}
