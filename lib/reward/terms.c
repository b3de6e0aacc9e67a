/* The built-in reward terms. Each reads metrics and the verdict from a
 * report; configs are small JSON objects (docs/rewards.md lists them). */
#include "reward/reward_impl.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- config helpers ---- */

typedef struct {
    json_t *root;
    char *err;
    size_t err_size;
    int failed;
} cfg;

static int cfg_open(cfg *c, const char *text, char *err, size_t err_size,
                    const char *const *allowed)
{
    c->err = err;
    c->err_size = err_size;
    c->failed = 0;
    json_error_t e;
    c->root = text && *text ? json_loads(text, 0, &e) : json_object();
    if (!c->root) {
        snprintf(err, err_size, "config is not JSON: %s (line %d)", e.text, e.line);
        return -1;
    }
    if (!json_is_object(c->root)) {
        snprintf(err, err_size, "config must be a JSON object");
        json_decref(c->root);
        return -1;
    }
    const char *key;
    json_t *v;
    json_object_foreach(c->root, key, v) {
        int ok = 0;
        for (size_t i = 0; allowed[i] && !ok; i++)
            ok = strcmp(key, allowed[i]) == 0;
        if (!ok) {
            snprintf(err, err_size, "unknown config key '%s'", key);
            json_decref(c->root);
            return -1;
        }
    }
    return 0;
}

static double cfg_num(cfg *c, const char *key, double fallback)
{
    json_t *v = json_object_get(c->root, key);
    if (!v)
        return fallback;
    if (!json_is_number(v) || !isfinite(json_number_value(v))) {
        if (!c->failed)
            snprintf(c->err, c->err_size, "'%s' must be a finite number", key);
        c->failed = 1;
        return fallback;
    }
    return json_number_value(v);
}

static const char *cfg_str(cfg *c, const char *key, const char *fallback)
{
    json_t *v = json_object_get(c->root, key);
    if (!v)
        return fallback;
    if (!json_is_string(v)) {
        if (!c->failed)
            snprintf(c->err, c->err_size, "'%s' must be a string", key);
        c->failed = 1;
        return fallback;
    }
    return json_string_value(v);
}

static int metric(const kr_report *r, const char *key, double *v, char *err, size_t err_size)
{
    if (kr_report_get(v, r, key) != KR_OK) {
        snprintf(err, err_size, "the report has no '%s'", key);
        return -1;
    }
    return 0;
}

static void plain_free(void *state)
{
    free(state);
}

/* ---- compiled / correct: two values ---- */

typedef struct {
    double yes, no;
} two_values;

static int init_two(const char *config, void **state, char *err, size_t n, const char *yes_key,
                    const char *no_key, double yes, double no)
{
    const char *const keys[] = {yes_key, no_key, NULL};
    cfg c;
    if (cfg_open(&c, config, err, n, keys) != 0)
        return -1;
    two_values *s = malloc(sizeof *s);
    if (s) {
        s->yes = cfg_num(&c, yes_key, yes);
        s->no = cfg_num(&c, no_key, no);
    }
    json_decref(c.root);
    if (!s || c.failed) {
        free(s);
        return -1;
    }
    *state = s;
    return 0;
}

static int init_compiled(const char *config, void **state, char *err, size_t n)
{
    return init_two(config, state, err, n, "ok", "fail", 1, 0);
}

static int eval_compiled(void *state, const kr_report *r, double *v, char *err, size_t n)
{
    (void)err;
    (void)n;
    const two_values *s = state;
    double compiled;
    int ok = kr_report_get(&compiled, r, "compiled") == KR_OK
                 ? compiled != 0
                 : kr_report_verdict(r) != KR_VERDICT_COMPILE_ERROR;
    *v = ok ? s->yes : s->no;
    return 0;
}

static int init_correct(const char *config, void **state, char *err, size_t n)
{
    return init_two(config, state, err, n, "pass", "fail", 1, 0);
}

static int eval_correct(void *state, const kr_report *r, double *v, char *err, size_t n)
{
    (void)err;
    (void)n;
    const two_values *s = state;
    *v = kr_report_verdict(r) == KR_VERDICT_PASSED ? s->yes : s->no;
    return 0;
}

/* ---- verdict: a value per verdict name ---- */

typedef struct {
    double value[16];
} verdict_values;

static int init_verdict(const char *config, void **state, char *err, size_t n)
{
    const char *const keys[] = {"passed", "incorrect", "compile_error", "invalid_plan",
                                "launch_error", "fault", "timeout", "not_run", "error",
                                "default", NULL};
    cfg c;
    if (cfg_open(&c, config, err, n, keys) != 0)
        return -1;
    verdict_values *s = malloc(sizeof *s);
    double dflt = cfg_num(&c, "default", 0);
    for (int v = 0; s && v < 16; v++) {
        const char *name = kr_verdict_name(v);
        s->value[v] = strcmp(name, "unknown") ? cfg_num(&c, name, dflt) : dflt;
    }
    json_decref(c.root);
    if (!s || c.failed) {
        free(s);
        return -1;
    }
    *state = s;
    return 0;
}

static int eval_verdict(void *state, const kr_report *r, double *v, char *err, size_t n)
{
    (void)err;
    (void)n;
    int verdict = kr_report_verdict(r);
    *v = ((verdict_values *)state)->value[verdict >= 0 && verdict < 16 ? verdict : 0];
    return 0;
}

/* ---- speedup: linear, clipped, log or tiers ---- */

enum { LINEAR, CLIPPED, LOG, TIERS };

typedef struct {
    int mode;
    char metric[64];
    double max, below;
    size_t num_tiers;
    double tier_at[16], tier_value[16];
} speedup_cfg;

static int init_speedup(const char *config, void **state, char *err, size_t n)
{
    const char *const keys[] = {"mode", "metric", "max", "tiers", "below", NULL};
    cfg c;
    if (cfg_open(&c, config, err, n, keys) != 0)
        return -1;
    speedup_cfg *s = calloc(1, sizeof *s);
    if (!s) {
        json_decref(c.root);
        return -1;
    }
    const char *mode = cfg_str(&c, "mode", "linear");
    s->mode = !strcmp(mode, "linear") ? LINEAR : !strcmp(mode, "clipped") ? CLIPPED
            : !strcmp(mode, "log") ? LOG : !strcmp(mode, "tiers") ? TIERS : -1;
    if (s->mode < 0 && !c.failed) {
        snprintf(err, n, "mode must be linear, clipped, log or tiers");
        c.failed = 1;
    }
    snprintf(s->metric, sizeof s->metric, "%s", cfg_str(&c, "metric", "speedup"));
    s->max = cfg_num(&c, "max", 3);
    s->below = cfg_num(&c, "below", 0);
    json_t *tiers = json_object_get(c.root, "tiers");
    if (s->mode == TIERS && !c.failed) {
        if (!json_is_array(tiers) || json_array_size(tiers) == 0 || json_array_size(tiers) > 16) {
            snprintf(err, n, "tiers mode needs \"tiers\": [[speedup, value], ...] (1 to 16, rising)");
            c.failed = 1;
        }
        for (size_t i = 0; !c.failed && i < json_array_size(tiers); i++) {
            json_t *t = json_array_get(tiers, i);
            if (json_array_size(t) != 2 || !json_is_number(json_array_get(t, 0)) ||
                !json_is_number(json_array_get(t, 1)) ||
                (i && json_number_value(json_array_get(t, 0)) <= s->tier_at[i - 1])) {
                snprintf(err, n, "tier %zu must be [speedup, value] with rising speedups", i);
                c.failed = 1;
                break;
            }
            s->tier_at[i] = json_number_value(json_array_get(t, 0));
            s->tier_value[i] = json_number_value(json_array_get(t, 1));
            s->num_tiers++;
        }
    }
    json_decref(c.root);
    if (c.failed) {
        free(s);
        return -1;
    }
    *state = s;
    return 0;
}

static int eval_speedup(void *state, const kr_report *r, double *v, char *err, size_t n)
{
    const speedup_cfg *s = state;
    double x;
    if (metric(r, s->metric, &x, err, n) != 0)
        return -1;
    switch (s->mode) {
    case LINEAR:
        *v = x;
        break;
    case CLIPPED:
        *v = x < s->max ? x : s->max;
        break;
    case LOG:
        if (!(x > 0)) {
            snprintf(err, n, "%s is %g: log needs a positive speedup", s->metric, x);
            return -1;
        }
        *v = log(x);
        break;
    default:
        *v = s->below;
        for (size_t i = 0; i < s->num_tiers; i++)
            if (x >= s->tier_at[i])
                *v = s->tier_value[i];
        break;
    }
    return 0;
}

/* ---- threshold and metric: one metric, transformed ---- */

typedef struct {
    char metric[64];
    double threshold, above, below, scale, offset, lo, hi, missing;
    int strict, has_missing;
} metric_cfg;

static int init_metric_like(const char *config, void **state, char *err, size_t n, int threshold)
{
    const char *const tkeys[] = {"metric", "threshold", "above", "below", "strict", NULL};
    const char *const mkeys[] = {"metric", "scale", "offset", "min", "max", "missing", NULL};
    cfg c;
    if (cfg_open(&c, config, err, n, threshold ? tkeys : mkeys) != 0)
        return -1;
    metric_cfg *s = calloc(1, sizeof *s);
    if (!s) {
        json_decref(c.root);
        return -1;
    }
    const char *m = cfg_str(&c, "metric", threshold ? "speedup" : NULL);
    if (!m && !c.failed) {
        snprintf(err, n, "\"metric\" names the report metric to read");
        c.failed = 1;
    }
    snprintf(s->metric, sizeof s->metric, "%s", m ? m : "");
    s->threshold = cfg_num(&c, "threshold", 1.0);
    s->above = cfg_num(&c, "above", 1);
    s->below = cfg_num(&c, "below", 0);
    json_t *strict = json_object_get(c.root, "strict");
    s->strict = json_is_true(strict);
    s->scale = cfg_num(&c, "scale", 1);
    s->offset = cfg_num(&c, "offset", 0);
    s->lo = cfg_num(&c, "min", -INFINITY);
    s->hi = cfg_num(&c, "max", INFINITY);
    s->has_missing = json_object_get(c.root, "missing") != NULL;
    s->missing = cfg_num(&c, "missing", 0);
    json_decref(c.root);
    if (c.failed) {
        free(s);
        return -1;
    }
    *state = s;
    return 0;
}

static int init_threshold(const char *config, void **state, char *err, size_t n)
{
    return init_metric_like(config, state, err, n, 1);
}

static int eval_threshold(void *state, const kr_report *r, double *v, char *err, size_t n)
{
    const metric_cfg *s = state;
    double x;
    if (metric(r, s->metric, &x, err, n) != 0)
        return -1;
    *v = (s->strict ? x > s->threshold : x >= s->threshold) ? s->above : s->below;
    return 0;
}

static int init_metric(const char *config, void **state, char *err, size_t n)
{
    return init_metric_like(config, state, err, n, 0);
}

static int eval_metric(void *state, const kr_report *r, double *v, char *err, size_t n)
{
    const metric_cfg *s = state;
    double x;
    if (kr_report_get(&x, r, s->metric) != KR_OK) {
        if (!s->has_missing)
            return metric(r, s->metric, &x, err, n);
        *v = s->missing;
        return 0;
    }
    x = s->scale * x + s->offset;
    *v = x < s->lo ? s->lo : x > s->hi ? s->hi : x;
    return 0;
}

/* ---- roofline, memory, code size ---- */

static int eval_roofline(void *state, const kr_report *r, double *v, char *err, size_t n)
{
    (void)state;
    double x;
    if (metric(r, "roofline_fraction", &x, err, n) != 0)
        return -1;
    *v = x < 0 ? 0 : x > 1 ? 1 : x;
    return 0;
}

typedef struct {
    double a, b;
} two_params;

static int init_memory(const char *config, void **state, char *err, size_t n)
{
    const char *const keys[] = {"per_gb", NULL};
    cfg c;
    if (cfg_open(&c, config, err, n, keys) != 0)
        return -1;
    two_params *s = malloc(sizeof *s);
    if (s)
        s->a = cfg_num(&c, "per_gb", -0.1);
    json_decref(c.root);
    if (!s || c.failed) {
        free(s);
        return -1;
    }
    *state = s;
    return 0;
}

static int eval_memory(void *state, const kr_report *r, double *v, char *err, size_t n)
{
    double bytes;
    if (metric(r, "memory_bytes", &bytes, err, n) != 0)
        return -1;
    *v = ((two_params *)state)->a * bytes / 1e9;
    return 0;
}

static int init_code_size(const char *config, void **state, char *err, size_t n)
{
    const char *const keys[] = {"free_lines", "per_line", NULL};
    cfg c;
    if (cfg_open(&c, config, err, n, keys) != 0)
        return -1;
    two_params *s = malloc(sizeof *s);
    if (s) {
        s->a = cfg_num(&c, "free_lines", 100);
        s->b = cfg_num(&c, "per_line", -0.01);
    }
    json_decref(c.root);
    if (!s || c.failed) {
        free(s);
        return -1;
    }
    *state = s;
    return 0;
}

static int eval_code_size(void *state, const kr_report *r, double *v, char *err, size_t n)
{
    const two_params *s = state;
    double lines;
    if (metric(r, "code_lines", &lines, err, n) != 0)
        return -1;
    *v = s->b * (lines > s->a ? lines - s->a : 0);
    return 0;
}

/* ---- flags: a penalty per suspicious flag ---- */

typedef struct {
    double penalty[64];
} flag_penalties;

static int init_flags(const char *config, void **state, char *err, size_t n)
{
    const char *const keys[] = {"penalties", NULL};
    cfg c;
    if (cfg_open(&c, config, err, n, keys) != 0)
        return -1;
    flag_penalties *s = calloc(1, sizeof *s);
    json_t *p = json_object_get(c.root, "penalties");
    if (s && !p) { /* the flags that mean the measurement or the kernel cannot be trusted */
        const char *bad[] = {"implausible_speed", "side_stream", "timed_output_wrong",
                             "out_of_bounds", "input_mutated", "race"};
        for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
            s->penalty[__builtin_ctzll(kr_flag_from_name(bad[i]))] = -1;
    }
    const char *key;
    json_t *v;
    if (s && p && !json_is_object(p)) {
        snprintf(err, n, "\"penalties\" maps flag names to values");
        c.failed = 1;
    }
    json_object_foreach(p, key, v) {
        uint64_t f = kr_flag_from_name(key);
        if (!s || !f || !json_is_number(v)) {
            snprintf(err, n, "penalties: '%s' is not a flag with a number", key);
            c.failed = 1;
            break;
        }
        s->penalty[__builtin_ctzll(f)] = json_number_value(v);
    }
    json_decref(c.root);
    if (!s || c.failed) {
        free(s);
        return -1;
    }
    *state = s;
    return 0;
}

static int eval_flags(void *state, const kr_report *r, double *v, char *err, size_t n)
{
    (void)err;
    (void)n;
    const flag_penalties *s = state;
    uint64_t f = kr_report_flags(r);
    *v = 0;
    for (int i = 0; i < 64; i++)
        if (f & (1ull << i))
            *v += s->penalty[i];
    return 0;
}

/* ---- milestones (CUDA Agent): -1 fails, 1 correct, 2 faster than eager,
 * 3 faster than eager and compiled ---- */

typedef struct {
    double fail, correct, faster, fastest, margin;
} milestones_cfg;

static int init_milestones(const char *config, void **state, char *err, size_t n)
{
    const char *const keys[] = {"fail", "correct", "faster", "fastest", "margin", NULL};
    cfg c;
    if (cfg_open(&c, config, err, n, keys) != 0)
        return -1;
    milestones_cfg *s = malloc(sizeof *s);
    if (s) {
        s->fail = cfg_num(&c, "fail", -1);
        s->correct = cfg_num(&c, "correct", 1);
        s->faster = cfg_num(&c, "faster", 2);
        s->fastest = cfg_num(&c, "fastest", 3);
        s->margin = cfg_num(&c, "margin", 1.05);
    }
    json_decref(c.root);
    if (!s || c.failed) {
        free(s);
        return -1;
    }
    *state = s;
    return 0;
}

static int eval_milestones(void *state, const kr_report *r, double *v, char *err, size_t n)
{
    (void)err;
    (void)n;
    const milestones_cfg *s = state;
    if (kr_report_verdict(r) != KR_VERDICT_PASSED) {
        *v = s->fail;
        return 0;
    }
    double eager = 0, compiled = 0;
    int has_eager = kr_report_get(&eager, r, "speedup") == KR_OK;
    int has_compiled = kr_report_get(&compiled, r, "speedup_vs_compiled") == KR_OK;
    if (has_eager && eager > s->margin)
        *v = has_compiled && compiled > s->margin ? s->fastest : s->faster;
    else
        *v = s->correct;
    return 0;
}

#define TERM(n, f, d, i, e, x) {KR_TERM_VERSION, f, n, d, i, e, x}

static const kr_term_def builtin[] = {
    TERM("compiled", 0, "ok if the candidate compiled, else fail", init_compiled, eval_compiled, plain_free),
    TERM("correct", 0, "pass if verification passed, else fail", init_correct, eval_correct, plain_free),
    TERM("verdict", 0, "a value per verdict (passed, incorrect, compile_error, ...)", init_verdict, eval_verdict, plain_free),
    TERM("speedup", KR_TERM_NEEDS_CORRECT, "speedup: linear, clipped at max, log, or tiers", init_speedup, eval_speedup, plain_free),
    TERM("threshold", KR_TERM_NEEDS_CORRECT, "above if a metric reaches a threshold, else below", init_threshold, eval_threshold, plain_free),
    TERM("metric", 0, "a metric, scaled, offset and clipped", init_metric, eval_metric, plain_free),
    TERM("roofline", KR_TERM_NEEDS_CORRECT, "fraction of the roofline floor reached, in [0, 1]", NULL, eval_roofline, NULL),
    TERM("memory", KR_TERM_NEEDS_CORRECT, "per_gb times the device memory used, in GB", init_memory, eval_memory, plain_free),
    TERM("code_size", 0, "per_line times the lines beyond free_lines", init_code_size, eval_code_size, plain_free),
    TERM("flags", 0, "the sum of penalties for suspicious flags", init_flags, eval_flags, plain_free),
    TERM("milestones", 0, "CUDA Agent milestones: fail, correct, faster than eager, than compiled", init_milestones, eval_milestones, plain_free),
};

const kr_term_def *const *kr__builtin_terms(void)
{
    static const kr_term_def *list[sizeof builtin / sizeof builtin[0] + 1];
    for (size_t i = 0; i < sizeof builtin / sizeof builtin[0]; i++)
        list[i] = &builtin[i];
    return list;
}
