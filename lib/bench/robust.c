/* Summarising and reporting the robust speedup's conditions. */
#include "bench/robust.h"
#include "report/report_impl.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

size_t kr__robust_summarize(const kr__robust_cond *c, size_t n, double *min, double *geomean)
{
    size_t used = 0;
    double lo = INFINITY, logs = 0;
    for (size_t i = 0; i < n; i++) {
        double s = c[i].speedup;
        if (!isfinite(s) || s <= 0)
            continue;
        lo = s < lo ? s : lo;
        logs += log(s);
        used++;
    }
    *min = used ? lo : NAN;
    *geomean = used ? exp(logs / (double)used) : NAN;
    return used;
}

void kr__robust_key(char *out, size_t size, const char *prefix, const char *name)
{
    int n = snprintf(out, size, "%s", prefix);
    for (size_t i = 0; name[i] && n >= 0 && (size_t)n + 1 < size; i++)
        out[n++] = isalnum((unsigned char)name[i]) ? name[i] : '_';
    if (n >= 0 && (size_t)n < size)
        out[n] = 0;
}

static void put_json(json_t *o, const char *key, double v)
{
    if (isfinite(v))
        json_object_set_new(o, key, json_real(v));
}

void kr__robust_report(kr_report *r, const kr__robust_cond *c, size_t n, double wall_s,
                       int occupied_sms)
{
    json_t *sec = kr__report_section(r, "robust");
    json_t *list = json_array();
    for (size_t i = 0; i < n; i++) {
        char key[96];
        snprintf(key, sizeof key, "speedup_%s", c[i].name);
        if (isfinite(c[i].speedup))
            kr_report_set(r, key, c[i].speedup);
        json_t *o = json_object();
        json_object_set_new(o, "name", json_string(c[i].name));
        put_json(o, "speedup", c[i].speedup);
        put_json(o, "speedup_low", c[i].speedup_low);
        put_json(o, "speedup_high", c[i].speedup_high);
        put_json(o, "time_us", c[i].time_us);
        put_json(o, "baseline_us", c[i].baseline_us);
        if (c[i].source)
            json_object_set_new(o, "source", json_string(c[i].source));
        if (c[i].why[0])
            json_object_set_new(o, "why", json_string(c[i].why));
        json_array_append_new(list, o);
    }
    double min, geo;
    size_t used = kr__robust_summarize(c, n, &min, &geo);
    kr_report_set(r, "robust_conditions", (double)used);
    if (used) {
        kr_report_set(r, "speedup_robust_min", min);
        kr_report_set(r, "speedup_robust_geomean", geo);
    }
    kr_report_set(r, "robust_wall_s", wall_s);
    if (!sec) {
        json_decref(list);
        return;
    }
    json_object_set_new(sec, "conditions", list);
    put_json(sec, "min", min);
    put_json(sec, "geomean", geo);
    json_object_set_new(sec, "measured", json_integer((json_int_t)used));
    json_object_set_new(sec, "wall_s", json_real(wall_s));
    if (occupied_sms > 0)
        json_object_set_new(sec, "co_running_sms", json_integer(occupied_sms));
}
