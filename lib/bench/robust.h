/* Robust speedup (KR_BENCH_ROBUST): the speedup measured again under
 * perturbed conditions (warm or cold L2, another kernel holding part of
 * the SMs, other cases of the problem), each reported, and summarised as
 * the minimum and the geometric mean. The measuring is bench_robust.c;
 * this file only summarises and reports (no GPU: unit-tested). */
#ifndef KR_ENGINE_ROBUST_H
#define KR_ENGINE_ROBUST_H

#include "kreward/report.h"

#include <stddef.h>

typedef struct kr__robust_cond {
    char name[64];         /* "cold_l2", "warm_l2", "co_running", "case_<name>" */
    double speedup;        /* NaN: not measured (why says why) */
    double speedup_low, speedup_high;
    double time_us, baseline_us;
    const char *source;    /* "cupti" or "events" */
    char why[256];
} kr__robust_cond;

/* The minimum and geometric mean of the conditions' speedups (those
 * measured, finite and positive); returns how many there were (0: both
 * NaN). */
size_t kr__robust_summarize(const kr__robust_cond *c, size_t n, double *min, double *geomean);

/* Per condition speedup_<name>, the summary (speedup_robust_min,
 * speedup_robust_geomean, robust_conditions), robust_wall_s (the extra
 * time it took), and a "robust" section with every condition. */
void kr__robust_report(kr_report *r, const kr__robust_cond *c, size_t n, double wall_s,
                       int occupied_sms);

/* A metric-safe key for a case name: letters, digits and '_' kept, the
 * rest '_' (a case named "N=4096" becomes speedup_case_N_4096). */
void kr__robust_key(char *out, size_t size, const char *prefix, const char *name);

#endif
