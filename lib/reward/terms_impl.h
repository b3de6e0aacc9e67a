/* Shared by the built-in reward terms' files: reading a term's JSON config
 * (a closed set of keys, typed values) and a report's metrics. */
#ifndef KR_TERMS_IMPL_H
#define KR_TERMS_IMPL_H

#include "reward/reward_impl.h"

#include <jansson.h>

typedef struct kr__cfg {
    json_t *root;
    char *err;
    size_t err_size;
    int failed;     /* a value had the wrong type: err says which */
} kr__cfg;

/* Parses config text (NULL or "": {}) allowing only these keys; -1 with err. */
int kr__cfg_open(kr__cfg *c, const char *text, char *err, size_t err_size,
                 const char *const *allowed);
double kr__cfg_num(kr__cfg *c, const char *key, double fallback);
const char *kr__cfg_str(kr__cfg *c, const char *key, const char *fallback);
/* A report's metric, or -1 with "the report has no 'key'". */
int kr__term_metric(const kr_report *r, const char *key, double *v, char *err, size_t err_size);
/* destroy for terms whose state is one malloc'd block. */
void kr__term_free(void *state);

/* The term tables (terms_outcome.c, terms_speed.c). */
extern const kr_term_def kr__term_compiled, kr__term_correct, kr__term_verdict, kr__term_flags,
    kr__term_milestones, kr__term_speedup, kr__term_threshold, kr__term_metric_def,
    kr__term_roofline, kr__term_memory, kr__term_code_size;

#endif
