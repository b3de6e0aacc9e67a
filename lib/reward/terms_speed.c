/* Built-in terms about speed and cost: speedup (linear, clipped, log or
 * tiers), threshold, metric, roofline, memory and code size. The speed
 * terms read a missing speed as the slowest, and say their bounds (the
 * traits at the end), so that scoring can clip and floor them. */
#include "reward/terms_impl.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- speedup: linear, clipped, log or tiers ---- */

enum { LINEAR, CLIPPED, LOG, TIERS };

typedef struct {
    int mode;
    char metric[64];
    double max, below;
    double log_base;           /* log mode: ln(x) / ln(base) */
    double range_lo, range_hi; /* speedups are read clamped to this */
    size_t num_tiers;
    double tier_at[16], tier_value[16];
} speedup_cfg;

/* "range": [lo, hi], 0 < lo < hi; the defaults when absent. */
static void cfg_range(kr__cfg *c, double *lo, double *hi)
{
    *lo = KR__SPEEDUP_MIN;
    *hi = KR__SPEEDUP_MAX;
    json_t *v = json_object_get(c->root, "range");
    if (!v || c->failed)
        return;
    json_t *a = json_array_get(v, 0), *b = json_array_get(v, 1);
    if (json_array_size(v) != 2 || !json_is_number(a) || !json_is_number(b) ||
        !(json_number_value(a) > 0) || !(json_number_value(a) < json_number_value(b)) ||
        !isfinite(json_number_value(b))) {
        snprintf(c->err, c->err_size, "\"range\" is [lowest, highest] speedup read, "
                 "0 < lowest < highest");
        c->failed = 1;
        return;
    }
    *lo = json_number_value(a);
    *hi = json_number_value(b);
}

static int init_speedup(const char *config, void **state, char *err, size_t n)
{
    const char *const keys[] = {"mode", "metric", "max", "tiers", "below", "range", "base", NULL};
    kr__cfg c;
    if (kr__cfg_open(&c, config, err, n, keys) != 0)
        return -1;
    speedup_cfg *s = calloc(1, sizeof *s);
    if (!s) {
        json_decref(c.root);
        return -1;
    }
    const char *mode = kr__cfg_str(&c, "mode", "linear");
    s->mode = !strcmp(mode, "linear") ? LINEAR : !strcmp(mode, "clipped") ? CLIPPED
            : !strcmp(mode, "log") ? LOG : !strcmp(mode, "tiers") ? TIERS : -1;
    if (s->mode < 0 && !c.failed) {
        snprintf(err, n, "mode must be linear, clipped, log or tiers");
        c.failed = 1;
    }
    snprintf(s->metric, sizeof s->metric, "%s", kr__cfg_str(&c, "metric", "speedup"));
    s->max = kr__cfg_num(&c, "max", 3);
    s->below = kr__cfg_num(&c, "below", 0);
    s->log_base = kr__cfg_num(&c, "base", M_E);
    if (!c.failed && (!(s->log_base > 0) || s->log_base == 1)) {
        snprintf(err, n, "\"base\" of the log is a number > 0 other than 1");
        c.failed = 1;
    }
    cfg_range(&c, &s->range_lo, &s->range_hi);
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

static double speedup_value(const speedup_cfg *s, double x)
{
    x = x < s->range_lo ? s->range_lo : x > s->range_hi ? s->range_hi : x;
    switch (s->mode) {
    case LINEAR:
        return x;
    case CLIPPED:
        return x < s->max ? x : s->max;
    case LOG:
        return log(x) / log(s->log_base);
    default: {
        double v = s->below;
        for (size_t i = 0; i < s->num_tiers; i++)
            if (x >= s->tier_at[i])
                v = s->tier_value[i];
        return v;
    }
    }
}

static int eval_speedup(void *state, const kr_report *r, double *v, char *err, size_t n)
{
    (void)err;
    (void)n;
    const speedup_cfg *s = state;
    double x;
    if (kr__speed_metric(r, s->metric, &x) != 0)
        x = s->range_lo; /* unknown speed: the slowest */
    *v = speedup_value(s, x);
    return 0;
}

static int speedup_is_speed(const void *state)
{
    return kr__is_speed_metric(((const speedup_cfg *)state)->metric);
}

/* Over the range read: its ends and every tier inside it. */
static void speedup_bounds(const void *state, double *lo, double *hi)
{
    const speedup_cfg *s = state;
    *lo = *hi = speedup_value(s, s->range_lo);
    for (size_t i = 0; i <= s->num_tiers; i++) {
        double x = i < s->num_tiers ? s->tier_at[i] : s->range_hi;
        if (x < s->range_lo || x > s->range_hi)
            continue;
        double v = speedup_value(s, x);
        *lo = v < *lo ? v : *lo;
        *hi = v > *hi ? v : *hi;
    }
}

/* ---- threshold and metric: one metric, transformed ---- */

typedef struct {
    char metric[64];
    double threshold, above, below, scale, offset, lo, hi, missing;
    int strict, has_missing, speed;
    double value_lo, value_hi; /* what the term can give (metric: infinite when unbounded) */
} metric_cfg;

/* A metric term's values: [min, max], and for a speedup metric the image of
 * the speedups read by default (KR__SPEEDUP_MIN to _MAX). */
static void metric_bounds_of(metric_cfg *s)
{
    s->value_lo = s->lo;
    s->value_hi = s->hi;
    if (strncmp(s->metric, "speedup", 7) == 0) {
        double a = s->scale * KR__SPEEDUP_MIN + s->offset, b = s->scale * KR__SPEEDUP_MAX + s->offset;
        double lo = a < b ? a : b, hi = a < b ? b : a;
        s->value_lo = lo > s->lo ? (lo < s->hi ? lo : s->hi) : s->lo;
        s->value_hi = hi < s->hi ? (hi > s->lo ? hi : s->lo) : s->hi;
    }
    if (s->has_missing) {
        s->value_lo = s->missing < s->value_lo ? s->missing : s->value_lo;
        s->value_hi = s->missing > s->value_hi ? s->missing : s->value_hi;
    }
}

static int init_metric_like(const char *config, void **state, char *err, size_t n, int threshold)
{
    const char *const tkeys[] = {"metric", "threshold", "above", "below", "strict", NULL};
    const char *const mkeys[] = {"metric", "scale", "offset", "min", "max", "missing", NULL};
    kr__cfg c;
    if (kr__cfg_open(&c, config, err, n, threshold ? tkeys : mkeys) != 0)
        return -1;
    metric_cfg *s = calloc(1, sizeof *s);
    if (!s) {
        json_decref(c.root);
        return -1;
    }
    const char *m = kr__cfg_str(&c, "metric", threshold ? "speedup" : NULL);
    if (!m && !c.failed) {
        snprintf(err, n, "\"metric\" names the report metric to read");
        c.failed = 1;
    }
    snprintf(s->metric, sizeof s->metric, "%s", m ? m : "");
    s->threshold = kr__cfg_num(&c, "threshold", 1.0);
    s->above = kr__cfg_num(&c, "above", 1);
    s->below = kr__cfg_num(&c, "below", 0);
    json_t *strict = json_object_get(c.root, "strict");
    s->strict = json_is_true(strict);
    s->scale = kr__cfg_num(&c, "scale", 1);
    s->offset = kr__cfg_num(&c, "offset", 0);
    s->lo = kr__cfg_num(&c, "min", -INFINITY);
    s->hi = kr__cfg_num(&c, "max", INFINITY);
    s->has_missing = json_object_get(c.root, "missing") != NULL;
    s->missing = kr__cfg_num(&c, "missing", 0);
    s->speed = kr__is_speed_metric(s->metric);
    if (threshold) {
        s->value_lo = s->above < s->below ? s->above : s->below;
        s->value_hi = s->above < s->below ? s->below : s->above;
    } else {
        metric_bounds_of(s);
    }
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
    if (s->speed && kr__speed_metric(r, s->metric, &x) != 0) {
        *v = s->below; /* unknown speed: not reached */
        return 0;
    }
    if (!s->speed && kr__term_metric(r, s->metric, &x, err, n) != 0)
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
    int missing = s->speed ? kr__speed_metric(r, s->metric, &x) != 0
                           : kr_report_get(&x, r, s->metric) != KR_OK;
    if (missing) {
        if (s->has_missing)
            *v = s->missing;
        else if (s->speed && isfinite(s->value_lo))
            *v = s->value_lo; /* unknown speed: the slowest */
        else
            return kr__term_metric(r, s->metric, &x, err, n);
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
    (void)err;
    (void)n;
    double x;
    if (kr__speed_metric(r, "roofline_fraction", &x) != 0)
        x = 0; /* unknown speed: the slowest */
    *v = x < 0 ? 0 : x > 1 ? 1 : x;
    return 0;
}

typedef struct {
    double a, b;
} two_params;

static int init_memory(const char *config, void **state, char *err, size_t n)
{
    const char *const keys[] = {"per_gb", NULL};
    kr__cfg c;
    if (kr__cfg_open(&c, config, err, n, keys) != 0)
        return -1;
    two_params *s = malloc(sizeof *s);
    if (s)
        s->a = kr__cfg_num(&c, "per_gb", -0.1);
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
    (void)err;
    (void)n;
    double bytes;
    /* measured by the benchmark; a report built by hand, or one verified
     * without timing, has none: no penalty rather than no reward */
    if (kr_report_get(&bytes, r, "memory_bytes") != KR_OK)
        bytes = 0;
    *v = ((two_params *)state)->a * bytes / 1e9;
    return 0;
}

static int init_code_size(const char *config, void **state, char *err, size_t n)
{
    const char *const keys[] = {"free_lines", "per_line", NULL};
    kr__cfg c;
    if (kr__cfg_open(&c, config, err, n, keys) != 0)
        return -1;
    two_params *s = malloc(sizeof *s);
    if (s) {
        s->a = kr__cfg_num(&c, "free_lines", 100);
        s->b = kr__cfg_num(&c, "per_line", -0.01);
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
    (void)err;
    (void)n;
    /* a ready binary (kr_evaluate_program, e.g. Triton) has no CUDA source
     * to measure: no size penalty rather than no reward */
    if (kr_report_get(&lines, r, "code_lines") != KR_OK)
        lines = 0;
    *v = s->b * (lines > s->a ? lines - s->a : 0);
    return 0;
}

const kr_term_def kr__term_speedup = {
    KR_TERM_VERSION, KR_TERM_NEEDS_CORRECT, "speedup",
    "speedup: linear, clipped at max, log, or tiers",
    init_speedup, eval_speedup, kr__term_free};
const kr_term_def kr__term_threshold = {
    KR_TERM_VERSION, KR_TERM_NEEDS_CORRECT, "threshold",
    "above if a metric reaches a threshold, else below",
    init_threshold, eval_threshold, kr__term_free};
const kr_term_def kr__term_metric_def = {
    KR_TERM_VERSION, 0, "metric",
    "a metric, scaled, offset and clipped",
    init_metric, eval_metric, kr__term_free};
const kr_term_def kr__term_roofline = {
    KR_TERM_VERSION, KR_TERM_NEEDS_CORRECT, "roofline",
    "fraction of the roofline floor reached, in [0, 1]",
    NULL, eval_roofline, NULL};
const kr_term_def kr__term_memory = {
    KR_TERM_VERSION, KR_TERM_NEEDS_CORRECT, "memory",
    "per_gb times the device memory used, in GB",
    init_memory, eval_memory, kr__term_free};
const kr_term_def kr__term_code_size = {
    KR_TERM_VERSION, 0, "code_size",
    "per_line times the lines beyond free_lines",
    init_code_size, eval_code_size, kr__term_free};

static int metric_is_speed(const void *state)
{
    return ((const metric_cfg *)state)->speed;
}

static void metric_bounds(const void *state, double *lo, double *hi)
{
    *lo = ((const metric_cfg *)state)->value_lo;
    *hi = ((const metric_cfg *)state)->value_hi;
}

static int always(const void *state)
{
    (void)state;
    return 1;
}

static void unit_bounds(const void *state, double *lo, double *hi)
{
    (void)state;
    *lo = 0;
    *hi = 1;
}

/* ---- what each term reads (kr__need: NULL missing = required) ---- */

static size_t speedup_needs(const void *state, kr__need *out)
{
    const speedup_cfg *s = state;
    int interval = !strcmp(s->metric, "speedup_low") || !strcmp(s->metric, "speedup_high");
    out[0] = (kr__need){s->metric, interval ? "speedup less (low) or plus (high) 0.5 %; "
                                              "without speedup, the slowest"
                                   : kr__is_speed_metric(s->metric) ? "the slowest (the range's low end)"
                                   : "the range's low end"};
    return 1;
}

static size_t threshold_needs(const void *state, kr__need *out)
{
    const metric_cfg *s = state;
    out[0] = (kr__need){s->metric, s->speed ? "not reached (below)" : NULL};
    return 1;
}

static size_t metric_needs(const void *state, kr__need *out)
{
    const metric_cfg *s = state;
    out[0] = (kr__need){s->metric, s->has_missing ? "the config's \"missing\" value"
                                   : s->speed && isfinite(s->value_lo) ? "its lowest value"
                                   : NULL};
    return 1;
}

static size_t roofline_needs(const void *state, kr__need *out)
{
    (void)state;
    out[0] = (kr__need){"roofline_fraction", "0 (the slowest)"};
    return 1;
}

static size_t memory_needs(const void *state, kr__need *out)
{
    (void)state;
    out[0] = (kr__need){"memory_bytes", "0 bytes: no penalty"};
    return 1;
}

static size_t code_size_needs(const void *state, kr__need *out)
{
    (void)state;
    out[0] = (kr__need){"code_lines", "0 lines: no penalty"};
    return 1;
}

const kr__term_traits kr__traits_speedup = {&kr__term_speedup, speedup_is_speed, speedup_bounds,
                                            NULL, speedup_needs};
const kr__term_traits kr__traits_threshold = {&kr__term_threshold, metric_is_speed, metric_bounds,
                                              NULL, threshold_needs};
const kr__term_traits kr__traits_metric = {&kr__term_metric_def, metric_is_speed, metric_bounds,
                                           NULL, metric_needs};
const kr__term_traits kr__traits_roofline = {&kr__term_roofline, always, unit_bounds, NULL,
                                             roofline_needs};
const kr__term_traits kr__traits_memory = {&kr__term_memory, NULL, NULL, NULL, memory_needs};
const kr__term_traits kr__traits_code_size = {&kr__term_code_size, NULL, NULL, NULL,
                                              code_size_needs};
