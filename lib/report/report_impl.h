/* The report's private layout. */
#ifndef KR_REPORT_IMPL_H
#define KR_REPORT_IMPL_H

#include "kreward/report.h"

#include <jansson.h>

typedef struct kr__named {
    char *key;
    double value;
    char *text;
} kr__named;

typedef struct kr__term_result {
    char *name;
    double value, weight;
    int counted;
} kr__term_result;

struct kr_report {
    int verdict;
    uint64_t flags;
    size_t num_metrics, cap_metrics;
    kr__named *metrics;
    size_t num_texts;
    kr__named *texts;
    double reward;
    size_t num_terms;
    kr__term_result *terms;
    json_t *details;   /* "compile", "verify", "timing": written by the engines */
};

/* The object details[section], created on first use. */
json_t *kr__report_section(kr_report *r, const char *section);
int kr__report_printf(kr_report *r, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Clears and sets the reward breakdown (score). */
void kr__report_clear_terms(kr_report *r);
int kr__report_add_term(kr_report *r, const char *name, double value, double weight, int counted);
void kr__report_set_reward(kr_report *r, double reward);
/* The inverse of kr_report_json (report_json.c): KR_EPARSE with why when
 * json is not a report. */
int kr__report_from_json(kr_report **out, const char *json, size_t len, char *why, size_t why_size);

#endif
