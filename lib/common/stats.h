/* Sample statistics for timing: order statistics, spread, and a bootstrap
 * confidence interval for a ratio of medians. */
#ifndef KR_STATS_H
#define KR_STATS_H

#include <stddef.h>

typedef struct kr__summary {
    size_t n;
    double median, mean, min, max, stdev, p10, p90;
    double noise;   /* relative standard deviation of the samples (stdev / mean) */
} kr__summary;

/* Summarises v[0..n) (sorted in place). */
void kr__summarize(double *v, size_t n, kr__summary *out);
/* Percentile q in [0,1] of sorted values, linearly interpolated. */
double kr__percentile(const double *sorted, size_t n, double q);
/* An interval for median(a)/median(b): the ratio of the medians' own 95 %
 * order-statistic intervals (conservative). */
void kr__ratio_interval(const double *a, size_t na, const double *b, size_t nb, double *lo,
                        double *hi);

#endif
