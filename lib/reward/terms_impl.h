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
/* Speedups within this of each other are one speed: the engine widens the
 * speedup interval by it (bench/bench_results.c, SPEEDUP_RESOLUTION). */
#define KR__SPEEDUP_RESOLUTION 0.005
/* The range speedups are read in by default (speedup, and metric terms on
 * speedup metrics): beyond it a speed term pays no more and no less. */
#define KR__SPEEDUP_MIN 0.01
#define KR__SPEEDUP_MAX 100.0
/* Whether a report metric measures speed: speedup*, time_*, achieved_*,
 * roofline*. A term reading one is a speed term. */
int kr__is_speed_metric(const char *key);
/* A speed metric; 0, or -1 when missing or NaN. speedup_low and
 * speedup_high, when missing, are speedup narrowed or widened by the
 * resolution (reports filled by hand often carry only speedup); when
 * present they are read so that the interval holds speedup (a low end above
 * it reads as speedup), so a candidate no faster than the reference never
 * reaches a threshold above 1. */
int kr__speed_metric(const kr_report *r, const char *key, double *v);
/* destroy for terms whose state is one malloc'd block. */
void kr__term_free(void *state);

/* The term tables (terms_outcome.c, terms_speed.c, terms_counters.c). */
extern const kr_term_def kr__term_compiled, kr__term_correct, kr__term_verdict, kr__term_flags,
    kr__term_milestones, kr__term_speedup, kr__term_threshold, kr__term_metric_def,
    kr__term_roofline, kr__term_memory, kr__term_code_size;
extern const kr__term_traits kr__traits_speedup, kr__traits_threshold, kr__traits_metric,
    kr__traits_roofline, kr__traits_milestones, kr__traits_memory, kr__traits_code_size,
    kr__traits_compiled;
/* terms_counters.c: on hardware counters */
extern const kr_term_def kr__term_bandwidth, kr__term_occupancy;
extern const kr__term_traits kr__traits_bandwidth, kr__traits_occupancy;

#endif
