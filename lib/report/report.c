/* Report handles: verdict, flags, named metrics and texts, reward terms. */
#include "report/report_impl.h"
#include "common/strbuf.h"
#include "common/text.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

static const char *const verdict_names[] = {"none", "passed", "incorrect", "compile_error",
                                            "invalid_plan", "launch_error", "fault", "timeout",
                                            "not_run", "error"};
#define NUM_VERDICTS (sizeof verdict_names / sizeof verdict_names[0])

static const char *const flag_names[] = {"nondeterministic", "unwritten",   "out_of_bounds",
                                         "input_mutated",    "race",        "nan",
                                         "shape_specific",   "implausible_speed", "side_stream",
                                         "timed_output_wrong", "throttled", "noisy",
                                         "precision", "slow", "weak_problem",
                                         "reference_copy", "torch_fallback", "mostly_torch",
                                         "unattributed", "launch_bound", "timing_mismatch",
                                         "sandbox_denied"};
#define NUM_FLAGS (sizeof flag_names / sizeof flag_names[0])

const char *kr_verdict_name(int v)
{
    return v >= 0 && (size_t)v < NUM_VERDICTS ? verdict_names[v] : "unknown";
}

int kr_verdict_from_name(const char *name)
{
    for (size_t i = 1; name && i < NUM_VERDICTS; i++)
        if (strcmp(name, verdict_names[i]) == 0)
            return (int)i;
    return 0;
}

const char *kr_flag_name(uint64_t flag)
{
    for (size_t i = 0; i < NUM_FLAGS; i++)
        if (flag == 1ull << i)
            return flag_names[i];
    return NULL;
}

uint64_t kr_flag_from_name(const char *name)
{
    for (size_t i = 0; name && i < NUM_FLAGS; i++)
        if (strcmp(name, flag_names[i]) == 0)
            return 1ull << i;
    return 0;
}

int kr_report_new(kr_report **out)
{
    if (!out)
        return KR_EINVAL;
    *out = calloc(1, sizeof **out);
    if (!*out)
        return KR_ENOMEM;
    (*out)->details = json_object();
    if (!(*out)->details) {
        free(*out);
        *out = NULL;
        return KR_ENOMEM;
    }
    return KR_OK;
}

void kr__report_clear_terms(kr_report *r)
{
    for (size_t i = 0; i < r->num_terms; i++)
        free(r->terms[i].name);
    free(r->terms);
    r->terms = NULL;
    r->num_terms = 0;
    r->reward = 0;
}

void kr_report_free(kr_report *r)
{
    if (!r)
        return;
    for (size_t i = 0; i < r->num_metrics; i++)
        free(r->metrics[i].key);
    for (size_t i = 0; i < r->num_texts; i++) {
        free(r->texts[i].key);
        free(r->texts[i].text);
    }
    kr__report_clear_terms(r);
    free(r->metrics);
    free(r->texts);
    json_decref(r->details);
    free(r);
}

int kr_report_verdict(const kr_report *r)
{
    return r ? r->verdict : KR_VERDICT_NONE;
}

int kr_report_set_verdict(kr_report *r, int v)
{
    if (!r || v < 0 || (size_t)v >= NUM_VERDICTS)
        return KR_EINVAL;
    r->verdict = v;
    return KR_OK;
}

uint64_t kr_report_flags(const kr_report *r)
{
    return r ? r->flags : 0;
}

int kr_report_set_flags(kr_report *r, uint64_t flags)
{
    if (!r)
        return KR_EINVAL;
    r->flags = flags;
    return KR_OK;
}

static kr__named *find(kr__named *items, size_t n, const char *key)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(items[i].key, key) == 0)
            return &items[i];
    return NULL;
}

int kr_report_get(double *value, const kr_report *r, const char *key)
{
    if (!r || !key)
        return KR_EINVAL;
    kr__named *m = find(r->metrics, r->num_metrics, key);
    if (!m)
        return KR_ENOTFOUND;
    if (value)
        *value = m->value;
    return KR_OK;
}

int kr_report_set(kr_report *r, const char *key, double value)
{
    if (!r || !key || !*key)
        return KR_EINVAL;
    kr__named *m = find(r->metrics, r->num_metrics, key);
    if (m) {
        m->value = value;
        return KR_OK;
    }
    if (r->num_metrics == r->cap_metrics) {
        size_t cap = r->cap_metrics ? r->cap_metrics * 2 : 32;
        kr__named *grown = realloc(r->metrics, cap * sizeof *grown);
        if (!grown)
            return KR_ENOMEM;
        r->metrics = grown;
        r->cap_metrics = cap;
    }
    char *k = kr__strdup(key);
    if (!k)
        return KR_ENOMEM;
    r->metrics[r->num_metrics].key = k;
    r->metrics[r->num_metrics].value = value;
    r->metrics[r->num_metrics].text = NULL;
    r->num_metrics++;
    return KR_OK;
}

size_t kr_report_metric_count(const kr_report *r)
{
    return r ? r->num_metrics : 0;
}

const char *kr_report_metric_name(const kr_report *r, size_t i)
{
    return r && i < r->num_metrics ? r->metrics[i].key : NULL;
}

const char *kr_report_text(const kr_report *r, const char *key)
{
    if (!r || !key)
        return NULL;
    kr__named *t = find(r->texts, r->num_texts, key);
    return t ? t->text : NULL;
}

/* The texts a reader takes line by line (message, feedback) never carry
 * control characters or line separators, whoever wrote them (text.h). */
static int cleaned(const char *key)
{
    return strcmp(key, "message") == 0 || strcmp(key, "feedback") == 0;
}

int kr_report_set_text(kr_report *r, const char *key, const char *text)
{
    if (!r || !key || !*key)
        return KR_EINVAL;
    char *copy = !text ? NULL : cleaned(key) ? kr__clean_text(text) : kr__strdup(text);
    if (text && !copy)
        return KR_ENOMEM;
    kr__named *t = find(r->texts, r->num_texts, key);
    if (t) {
        free(t->text);
        t->text = copy;
        return KR_OK;
    }
    kr__named *grown = realloc(r->texts, (r->num_texts + 1) * sizeof *grown);
    char *k = kr__strdup(key);
    if (!grown || !k) {
        if (grown)
            r->texts = grown;
        free(k);
        free(copy);
        return KR_ENOMEM;
    }
    r->texts = grown;
    r->texts[r->num_texts].key = k;
    r->texts[r->num_texts].text = copy;
    r->texts[r->num_texts].value = 0;
    r->num_texts++;
    return KR_OK;
}

int kr__report_printf(kr_report *r, const char *key, const char *fmt, ...)
{
    kr__buf b = KR__BUF_INIT;
    va_list ap;
    va_start(ap, fmt);
    kr__buf_vprintf(&b, fmt, ap);
    va_end(ap);
    int rc = b.oom ? KR_ENOMEM : kr_report_set_text(r, key, b.data ? b.data : "");
    kr__buf_free(&b);
    return rc;
}

json_t *kr__report_section(kr_report *r, const char *section)
{
    json_t *s = json_object_get(r->details, section);
    if (!s) {
        s = json_object();
        json_object_set_new(r->details, section, s);
    }
    return s;
}

int kr__report_add_term(kr_report *r, const char *name, double value, double weight, int counted)
{
    kr__term_result *grown = realloc(r->terms, (r->num_terms + 1) * sizeof *grown);
    if (!grown)
        return KR_ENOMEM;
    r->terms = grown;
    kr__term_result *t = &grown[r->num_terms];
    if (!(t->name = kr__strdup(name)))
        return KR_ENOMEM;
    t->value = value;
    t->weight = weight;
    t->counted = counted;
    r->num_terms++;
    return KR_OK;
}

void kr__report_set_reward(kr_report *r, double reward)
{
    r->reward = reward;
    kr_report_set(r, "reward", reward);
}

double kr_report_reward(const kr_report *r)
{
    return r ? r->reward : 0;
}

size_t kr_report_term_count(const kr_report *r)
{
    return r ? r->num_terms : 0;
}

const char *kr_report_term_name(const kr_report *r, size_t i)
{
    return r && i < r->num_terms ? r->terms[i].name : NULL;
}

double kr_report_term_value(const kr_report *r, size_t i)
{
    return r && i < r->num_terms ? r->terms[i].value : 0;
}

double kr_report_term_weight(const kr_report *r, size_t i)
{
    return r && i < r->num_terms ? r->terms[i].weight : 0;
}

int kr_report_term_counted(const kr_report *r, size_t i)
{
    return r && i < r->num_terms ? r->terms[i].counted : 0;
}
