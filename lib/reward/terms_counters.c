/* Built-in terms on hardware counters (KR_BENCH_COUNTERS,
 * docs/counters.md): dram_bandwidth and occupancy, each in [0, 1], counted for
 * correct candidates only and floored like speed terms (a flagged
 * candidate gets 0), so that neither can lift a candidate across the
 * ladder. A report without counters reads as 0: turning counters off
 * never pays.
 *
 * dram_bandwidth does not pay for traffic the problem does not need: DRAM
 * utilisation is scaled by the problem's bytes over the bytes the kernel
 * moved (when both are known), so reading the inputs twice halves it. */
#include "reward/terms_impl.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    double target;
    char metric[32];
} counter_cfg;

static int init_common(const char *config, void **state, char *err, size_t n, double target,
                       const char *metric, const char *const *metrics)
{
    const char *const keys[] = {"target", metrics ? "metric" : NULL, NULL};
    kr__cfg c;
    if (kr__cfg_open(&c, config, err, n, keys) != 0)
        return -1;
    counter_cfg *s = calloc(1, sizeof *s);
    if (!s) {
        json_decref(c.root);
        return -1;
    }
    s->target = kr__cfg_num(&c, "target", target);
    if (!c.failed && !(s->target > 0 && s->target <= 1)) {
        snprintf(err, n, "\"target\" is the fraction that pays in full, in (0, 1]");
        c.failed = 1;
    }
    const char *m = metrics ? kr__cfg_str(&c, "metric", metric) : metric;
    int known = 0;
    for (size_t i = 0; metrics && metrics[i]; i++)
        known |= strcmp(m, metrics[i]) == 0;
    if (!c.failed && metrics && !known) {
        snprintf(err, n, "\"metric\" is occupancy (achieved) or occupancy_theoretical");
        c.failed = 1;
    }
    snprintf(s->metric, sizeof s->metric, "%s", m);
    json_decref(c.root);
    if (c.failed) {
        free(s);
        return -1;
    }
    *state = s;
    return 0;
}

static double scaled(double x, double target)
{
    if (isnan(x) || x <= 0)
        return 0;
    x /= target;
    return x > 1 ? 1 : x;
}

/* ---- bandwidth ---- */

static int init_bandwidth(const char *config, void **state, char *err, size_t n)
{
    return init_common(config, state, err, n, 0.8, "dram_peak_fraction", NULL);
}

/* The share of DRAM peak spent on bytes the problem needs. */
static int eval_bandwidth(void *state, const kr_report *r, double *v, char *err, size_t n)
{
    (void)err;
    (void)n;
    const counter_cfg *s = state;
    double frac, need, moved;
    if (kr_report_get(&frac, r, "dram_peak_fraction") != KR_OK) {
        *v = 0;
        return 0;
    }
    if (kr_report_get(&need, r, "problem_bytes") == KR_OK &&
        kr_report_get(&moved, r, "dram_bytes") == KR_OK && moved > need && need > 0)
        frac *= need / moved;
    *v = scaled(frac, s->target);
    return 0;
}

static size_t bandwidth_needs(const void *state, kr__need *out)
{
    (void)state;
    out[0] = (kr__need){"dram_peak_fraction", "0 (no counters: no pay)"};
    out[1] = (kr__need){"dram_bytes", "no correction for extra traffic"};
    out[2] = (kr__need){"problem_bytes", "no correction for extra traffic"};
    return 3;
}

/* ---- occupancy ---- */

static const char *const occupancy_metrics[] = {"occupancy", "occupancy_theoretical", NULL};

static int init_occupancy(const char *config, void **state, char *err, size_t n)
{
    return init_common(config, state, err, n, 0.5, "occupancy", occupancy_metrics);
}

static int eval_occupancy(void *state, const kr_report *r, double *v, char *err, size_t n)
{
    (void)err;
    (void)n;
    const counter_cfg *s = state;
    double x;
    *v = kr_report_get(&x, r, s->metric) == KR_OK ? scaled(x, s->target) : 0;
    return 0;
}

static size_t occupancy_needs(const void *state, kr__need *out)
{
    out[0] = (kr__need){((const counter_cfg *)state)->metric, "0 (no counters: no pay)"};
    return 1;
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

const kr_term_def kr__term_bandwidth = {
    KR_TERM_VERSION, KR_TERM_NEEDS_CORRECT, "dram_bandwidth",
    "DRAM throughput over its peak, counting only the problem's bytes, over target, in [0, 1]",
    init_bandwidth, eval_bandwidth, kr__term_free};
const kr_term_def kr__term_occupancy = {
    KR_TERM_VERSION, KR_TERM_NEEDS_CORRECT, "occupancy",
    "occupancy (achieved, or theoretical) over target, in [0, 1]",
    init_occupancy, eval_occupancy, kr__term_free};

const kr__term_traits kr__traits_bandwidth = {&kr__term_bandwidth, always, unit_bounds, NULL,
                                              bandwidth_needs};
const kr__term_traits kr__traits_occupancy = {&kr__term_occupancy, always, unit_bounds, NULL,
                                              occupancy_needs};
