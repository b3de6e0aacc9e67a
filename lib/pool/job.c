/* Jobs to and from JSON (job.h). Every field of the versioned options is
 * carried, so a worker evaluates exactly what the caller asked for. */
#include "pool/job.h"
#include "common/strbuf.h"
#include "problem/problem_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static json_t *strings_json(const char *const *items, size_t n)
{
    json_t *a = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(a, json_string(items[i] ? items[i] : ""));
    return a;
}

static void set_str(json_t *o, const char *key, const char *v)
{
    if (v)
        json_object_set_new(o, key, json_string(v));
}

static json_t *compile_json(const kr_compile_options *c)
{
    json_t *o = json_object();
    set_str(o, "name", c->name);
    set_str(o, "arch", c->arch);
    set_str(o, "std", c->std);
    json_object_set_new(o, "defines", strings_json(c->defines, c->num_defines));
    json_object_set_new(o, "include_dirs", strings_json(c->include_dirs, c->num_include_dirs));
    json_object_set_new(o, "name_expressions",
                        strings_json(c->name_expressions, c->num_name_expressions));
    json_object_set_new(o, "extra_options", strings_json(c->extra_options, c->num_extra_options));
    json_object_set_new(o, "fast_math", json_integer(c->fast_math));
    json_object_set_new(o, "line_info", json_integer(c->line_info));
    json_object_set_new(o, "max_source_bytes", json_integer((json_int_t)c->max_source_bytes));
    json_object_set_new(o, "time_limit_s", json_real(c->time_limit_s));
    json_object_set_new(o, "flags", json_integer(c->flags));
    json_object_set_new(o, "max_log_bytes", json_integer((json_int_t)c->max_log_bytes));
    return o;
}

static json_t *verify_json(const kr_verify_options *v)
{
    json_t *o = json_object();
    json_object_set_new(o, "seeds_per_case", json_integer(v->seeds_per_case));
    json_object_set_new(o, "seed", json_integer((json_int_t)v->seed));
    json_object_set_new(o, "timeout_s", json_real(v->timeout_s));
    json_object_set_new(o, "flags", json_integer(v->flags));
    json_object_set_new(o, "max_mismatches", json_integer(v->max_mismatches));
    return o;
}

static json_t *bench_json(const kr_bench_options *b)
{
    json_t *o = json_object();
    json_object_set_new(o, "preset", json_integer(b->preset));
    json_object_set_new(o, "min_samples", json_integer(b->min_samples));
    json_object_set_new(o, "max_samples", json_integer(b->max_samples));
    json_object_set_new(o, "min_time_s", json_real(b->min_time_s));
    json_object_set_new(o, "max_time_s", json_real(b->max_time_s));
    json_object_set_new(o, "target_noise", json_real(b->target_noise));
    json_object_set_new(o, "buffer_sets", json_integer(b->buffer_sets));
    json_object_set_new(o, "flags", json_integer(b->flags));
    json_object_set_new(o, "check_fraction", json_real(b->check_fraction));
    json_object_set_new(o, "seed", json_integer((json_int_t)b->seed));
    json_object_set_new(o, "case_index", json_integer(b->case_index));
    json_object_set_new(o, "max_slowdown", json_real(b->max_slowdown));
    json_object_set_new(o, "max_call_s", json_real(b->max_call_s));
    return o;
}

/* The plan as JSON the plan parser takes back (without its "where" notes). */
static json_t *plan_json(const char *text)
{
    json_t *o = json_loads(text, 0, NULL);
    size_t i;
    json_t *l;
    json_array_foreach(json_object_get(o, "launches"), i, l)
        json_object_del(l, "where");
    return o;
}

json_t *kr__job_encode(const kr_job *job, const char *plan_text, uint64_t id, const char *stage,
                       int has_binary_blob)
{
    kr_compile_options c = KR_COMPILE_OPTIONS_INIT;
    kr_verify_options v = KR_VERIFY_OPTIONS_INIT;
    kr_bench_options b = KR_BENCH_OPTIONS_INIT;
    /* the caller's structs were read by their versions at submission */
    if (job->compile)
        c = *job->compile;
    if (job->verify)
        v = *job->verify;
    if (job->bench)
        b = *job->bench;
    json_t *o = json_object();
    json_object_set_new(o, "id", json_integer((json_int_t)id));
    json_object_set_new(o, "stage", json_string(stage));
    json_object_set_new(o, "problem", json_string(job->problem->spec));
    json_object_set_new(o, "problem_name", json_string(job->problem->file ? job->problem->file : ""));
    if (job->source)
        json_object_set_new(o, "source", json_stringn(job->source, job->len));
    if (has_binary_blob)
        json_object_set_new(o, "binary", json_integer(0)); /* blob 0 of the frame */
    if (plan_text)
        json_object_set_new(o, "plan", plan_json(plan_text));
    set_str(o, "name", job->name);
    json_object_set_new(o, "flags", json_integer(job->flags));
    json_object_set_new(o, "compile", compile_json(&c));
    json_object_set_new(o, "verify", verify_json(&v));
    json_object_set_new(o, "bench", bench_json(&b));
    return o;
}

/* ---- decoding, in the worker: nothing in the body is trusted ---- */

static const char *str(const json_t *o, const char *key)
{
    return json_string_value(json_object_get(o, key));
}

static double num(const json_t *o, const char *key, double fallback)
{
    json_t *v = json_object_get(o, key);
    return json_is_number(v) ? json_number_value(v) : fallback;
}

static char *keep(kr__job_spec *s, const char *text)
{
    if (!text)
        return NULL;
    char **grown = realloc(s->strings, (s->num_strings + 1) * sizeof *grown);
    if (!grown)
        return NULL;
    s->strings = grown;
    return s->strings[s->num_strings++] = kr__strdup(text);
}

static int strings(kr__job_spec *s, const json_t *o, const char *key, int list,
                   const char *const **items, size_t *n)
{
    json_t *a = json_object_get(o, key);
    size_t count = json_array_size(a);
    *n = 0;
    *items = NULL;
    if (!count)
        return 0;
    const char **arr = calloc(count, sizeof *arr);
    if (!arr)
        return -1;
    s->lists[list] = arr;
    for (size_t i = 0; i < count; i++)
        if (!(arr[i] = keep(s, json_string_value(json_array_get(a, i)))))
            return -1;
    *items = arr;
    *n = count;
    return 0;
}

static int decode_compile(kr__job_spec *s, const json_t *o)
{
    kr_compile_options *c = &s->compile;
    c->name = keep(s, str(o, "name"));
    c->arch = keep(s, str(o, "arch"));
    c->std = keep(s, str(o, "std"));
    if (strings(s, o, "defines", 0, &c->defines, &c->num_defines) ||
        strings(s, o, "include_dirs", 1, &c->include_dirs, &c->num_include_dirs) ||
        strings(s, o, "name_expressions", 2, &c->name_expressions, &c->num_name_expressions) ||
        strings(s, o, "extra_options", 3, &c->extra_options, &c->num_extra_options))
        return -1;
    c->fast_math = (int32_t)num(o, "fast_math", 0);
    c->line_info = (int32_t)num(o, "line_info", 0);
    c->max_source_bytes = (uint64_t)num(o, "max_source_bytes", 0);
    c->time_limit_s = num(o, "time_limit_s", 0);
    c->flags = (uint32_t)num(o, "flags", 0);
    c->max_log_bytes = (uint64_t)num(o, "max_log_bytes", 0);
    return 0;
}

static void decode_verify(kr_verify_options *v, const json_t *o)
{
    v->seeds_per_case = (uint32_t)num(o, "seeds_per_case", 0);
    v->seed = (uint64_t)json_integer_value(json_object_get(o, "seed"));
    v->timeout_s = num(o, "timeout_s", 0);
    v->flags = (uint32_t)num(o, "flags", 0);
    v->max_mismatches = (uint32_t)num(o, "max_mismatches", 0);
}

static void decode_bench(kr_bench_options *b, const json_t *o)
{
    b->preset = (uint32_t)num(o, "preset", KR_BENCH_FAST);
    b->min_samples = (uint32_t)num(o, "min_samples", 0);
    b->max_samples = (uint32_t)num(o, "max_samples", 0);
    b->min_time_s = num(o, "min_time_s", 0);
    b->max_time_s = num(o, "max_time_s", 0);
    b->target_noise = num(o, "target_noise", 0);
    b->buffer_sets = (uint32_t)num(o, "buffer_sets", 0);
    b->flags = (uint32_t)num(o, "flags", 0);
    b->check_fraction = num(o, "check_fraction", 0);
    b->seed = (uint64_t)json_integer_value(json_object_get(o, "seed"));
    b->case_index = (int64_t)num(o, "case_index", -1);
    b->max_slowdown = num(o, "max_slowdown", 0);
    b->max_call_s = num(o, "max_call_s", 0);
}

int kr__job_decode(const json_t *body, kr__job_spec *s, char *why, size_t why_size)
{
    memset(s, 0, sizeof *s);
    kr_compile_options c = KR_COMPILE_OPTIONS_INIT;
    kr_verify_options v = KR_VERIFY_OPTIONS_INIT;
    kr_bench_options b = KR_BENCH_OPTIONS_INIT;
    s->compile = c;
    s->verify = v;
    s->bench = b;
    const char *stage = str(body, "stage"), *problem = str(body, "problem");
    json_t *source = json_object_get(body, "source"), *plan = json_object_get(body, "plan");
    if (!json_is_integer(json_object_get(body, "id")) || !stage || !problem ||
        (!json_is_string(source) && !json_object_get(body, "binary"))) {
        snprintf(why, why_size, "a job needs id, stage, problem and source or binary");
        return KR_EPARSE;
    }
    s->id = (uint64_t)json_integer_value(json_object_get(body, "id"));
    snprintf(s->stage, sizeof s->stage, "%s", stage);
    s->problem = kr__strdup(problem);
    if (json_is_string(source)) {
        s->source_len = json_string_length(source);
        s->source = malloc(s->source_len + 1);
        if (s->source) {
            memcpy(s->source, json_string_value(source), s->source_len);
            s->source[s->source_len] = '\0';
        }
    }
    s->plan = json_is_object(plan) ? json_dumps(plan, JSON_COMPACT) : NULL;
    s->name = str(body, "name") ? kr__strdup(str(body, "name")) : NULL;
    s->flags = (uint32_t)num(body, "flags", 0);
    json_t *weak = json_object_get(body, "problem_weak");
    s->problem_weak = json_is_integer(weak) ? json_integer_value(weak) != 0 : -1;
    int bad = !s->problem || (json_is_string(source) && !s->source) ||
              decode_compile(s, json_object_get(body, "compile")) != 0;
    decode_verify(&s->verify, json_object_get(body, "verify"));
    decode_bench(&s->bench, json_object_get(body, "bench"));
    if (bad) {
        kr__job_spec_free(s);
        snprintf(why, why_size, "out of memory");
        return KR_ENOMEM;
    }
    return KR_OK;
}

void kr__job_spec_free(kr__job_spec *s)
{
    free(s->problem);
    free(s->source);
    free(s->plan);
    free(s->name);
    for (size_t i = 0; i < s->num_strings; i++)
        free(s->strings[i]);
    free(s->strings);
    for (size_t i = 0; i < 4; i++)
        free((void *)s->lists[i]);
    memset(s, 0, sizeof *s);
}
