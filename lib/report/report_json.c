/* A report as JSON (docs/report-format.md), and back: the pool's workers
 * send their reports to the caller's process in this form. */
#include "report/report_impl.h"
#include "common/strbuf.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static json_t *number(double v)
{
    /* JSON has no NaN or Inf: those become null */
    return v == v && v - v == 0 ? json_real(v) : json_null();
}

int kr_report_json(char **json_out, const kr_report *r)
{
    if (!r || !json_out)
        return KR_EINVAL;
    json_t *o = json_object();
    json_object_set_new(o, "format", json_integer(1));
    json_object_set_new(o, "verdict", json_string(kr_verdict_name(r->verdict)));
    json_t *flags = json_array();
    for (size_t i = 0; i < 64; i++)
        if ((r->flags & (1ull << i)) && kr_flag_name(1ull << i))
            json_array_append_new(flags, json_string(kr_flag_name(1ull << i)));
    json_object_set_new(o, "flags", flags);
    json_t *metrics = json_object();
    for (size_t i = 0; i < r->num_metrics; i++)
        json_object_set_new(metrics, r->metrics[i].key, number(r->metrics[i].value));
    json_object_set_new(o, "metrics", metrics);
    json_t *texts = json_object();
    for (size_t i = 0; i < r->num_texts; i++)
        if (r->texts[i].text)
            json_object_set_new(texts, r->texts[i].key, json_string(r->texts[i].text));
    json_object_set_new(o, "texts", texts);
    if (r->num_terms) {
        json_t *reward = json_object(), *terms = json_array();
        json_object_set_new(reward, "total", number(r->reward));
        for (size_t i = 0; i < r->num_terms; i++) {
            json_t *t = json_object();
            json_object_set_new(t, "name", json_string(r->terms[i].name));
            json_object_set_new(t, "value", number(r->terms[i].value));
            json_object_set_new(t, "weight", number(r->terms[i].weight));
            json_object_set_new(t, "counted", json_boolean(r->terms[i].counted));
            json_array_append_new(terms, t);
        }
        json_object_set_new(reward, "terms", terms);
        json_object_set_new(o, "reward", reward);
    }
    const char *section;
    json_t *value;
    json_object_foreach(r->details, section, value)
        json_object_set(o, section, value);
    *json_out = json_dumps(o, JSON_INDENT(2));
    json_decref(o);
    return *json_out ? KR_OK : KR_ENOMEM;
}

static int read_terms(kr_report *r, json_t *reward)
{
    json_t *terms = json_object_get(reward, "terms"), *t;
    size_t i;
    json_array_foreach(terms, i, t) {
        json_t *v = json_object_get(t, "value"), *w = json_object_get(t, "weight");
        if (kr__report_add_term(r, json_string_value(json_object_get(t, "name")),
                                json_is_number(v) ? json_number_value(v) : NAN,
                                json_is_number(w) ? json_number_value(w) : NAN,
                                json_is_true(json_object_get(t, "counted"))) != KR_OK)
            return KR_ENOMEM;
    }
    json_t *total = json_object_get(reward, "total");
    kr__report_set_reward(r, json_is_number(total) ? json_number_value(total) : NAN);
    return KR_OK;
}

static int read_report(kr_report *r, json_t *o)
{
    int rc = kr_report_set_verdict(r, kr_verdict_from_name(json_string_value(json_object_get(o, "verdict"))));
    uint64_t flags = 0;
    size_t i;
    json_t *v;
    json_array_foreach(json_object_get(o, "flags"), i, v)
        flags |= kr_flag_from_name(json_string_value(v));
    kr_report_set_flags(r, flags);
    const char *key;
    json_object_foreach(json_object_get(o, "metrics"), key, v)
        if (rc == KR_OK)
            rc = kr_report_set(r, key, json_is_number(v) ? json_number_value(v) : NAN);
    json_object_foreach(json_object_get(o, "texts"), key, v)
        if (rc == KR_OK && json_is_string(v))
            rc = kr_report_set_text(r, key, json_string_value(v));
    json_t *reward = json_object_get(o, "reward");
    if (rc == KR_OK && json_is_object(reward))
        rc = read_terms(r, reward);
    static const char *const known[] = {"format", "verdict", "flags", "metrics", "texts", "reward"};
    json_object_foreach(o, key, v) {
        int is_known = 0;
        for (size_t k = 0; k < sizeof known / sizeof known[0]; k++)
            is_known |= strcmp(key, known[k]) == 0;
        if (!is_known && json_is_object(v) && rc == KR_OK)
            rc = json_object_set(r->details, key, v) == 0 ? KR_OK : KR_ENOMEM;
    }
    return rc;
}

int kr__report_from_json(kr_report **out, const char *json, size_t len, char *why, size_t why_size)
{
    *out = NULL;
    json_error_t err;
    json_t *o = json_loadb(json, len, 0, &err);
    if (!json_is_object(o) || json_integer_value(json_object_get(o, "format")) != 1 ||
        !json_is_string(json_object_get(o, "verdict"))) {
        snprintf(why, why_size, "not a report (format 1): %s", o ? "fields missing" : err.text);
        json_decref(o);
        return KR_EPARSE;
    }
    int rc = kr_report_new(out);
    if (rc == KR_OK)
        rc = read_report(*out, o);
    json_decref(o);
    if (rc != KR_OK) {
        kr_report_free(*out);
        *out = NULL;
        snprintf(why, why_size, "out of memory");
    }
    return rc;
}
