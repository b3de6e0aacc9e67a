/* What the built-in reward terms share: their JSON config (kr__cfg_*) and
 * how they read a report's metrics. The registry is terms.c; the terms
 * terms_outcome.c and terms_speed.c. */
#include "reward/terms_impl.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int kr__cfg_open(kr__cfg *c, const char *text, char *err, size_t err_size,
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

double kr__cfg_num(kr__cfg *c, const char *key, double fallback)
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

const char *kr__cfg_str(kr__cfg *c, const char *key, const char *fallback)
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

int kr__term_metric(const kr_report *r, const char *key, double *v, char *err, size_t err_size)
{
    if (kr_report_get(v, r, key) != KR_OK) {
        snprintf(err, err_size, "the report has no '%s'", key);
        return -1;
    }
    return 0;
}

int kr__is_speed_metric(const char *key)
{
    static const char *const prefixes[] = {"speedup", "time_", "achieved_", "roofline"};
    for (size_t i = 0; key && i < sizeof prefixes / sizeof prefixes[0]; i++)
        if (strncmp(key, prefixes[i], strlen(prefixes[i])) == 0)
            return 1;
    return 0;
}

int kr__speed_metric(const kr_report *r, const char *key, double *v)
{
    int low = strcmp(key, "speedup_low") == 0, high = strcmp(key, "speedup_high") == 0;
    double point;
    int has_point = (low || high) && kr_report_get(&point, r, "speedup") == KR_OK && !isnan(point);
    if (kr_report_get(v, r, key) == KR_OK) {
        if (isnan(*v))
            return -1;
        /* the interval holds its point: a low end above the speedup (a
         * report written by hand) would pay a candidate no faster than the
         * reference as if it were faster */
        if (has_point && low && *v > point)
            *v = point;
        if (has_point && high && *v < point)
            *v = point;
        return 0;
    }
    if (!has_point)
        return -1;
    *v = point * (low ? 1 - KR__SPEEDUP_RESOLUTION : 1 + KR__SPEEDUP_RESOLUTION);
    return 0;
}

void kr__term_free(void *state)
{
    free(state);
}
