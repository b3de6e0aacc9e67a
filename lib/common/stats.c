/* Sample statistics for timing. */
#include "common/stats.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double kr__percentile(const double *s, size_t n, double q)
{
    if (n == 0)
        return NAN;
    double pos = q * (double)(n - 1);
    size_t i = (size_t)pos;
    if (i + 1 >= n)
        return s[n - 1];
    double f = pos - (double)i;
    return s[i] + f * (s[i + 1] - s[i]);
}

void kr__summarize(double *v, size_t n, kr__summary *o)
{
    memset(o, 0, sizeof *o);
    o->n = n;
    if (n == 0) {
        o->median = o->mean = o->min = o->max = o->p10 = o->p90 = NAN;
        return;
    }
    qsort(v, n, sizeof *v, cmp);
    double sum = 0;
    for (size_t i = 0; i < n; i++)
        sum += v[i];
    o->mean = sum / (double)n;
    double ss = 0;
    for (size_t i = 0; i < n; i++)
        ss += (v[i] - o->mean) * (v[i] - o->mean);
    o->stdev = n > 1 ? sqrt(ss / (double)(n - 1)) : 0;
    o->min = v[0];
    o->max = v[n - 1];
    o->median = kr__percentile(v, n, 0.5);
    o->p10 = kr__percentile(v, n, 0.1);
    o->p90 = kr__percentile(v, n, 0.9);
    o->noise = o->mean > 0 ? o->stdev / o->mean : 0;
}

/* Distribution-free 95 % interval of a median from order statistics: the
 * ranks n/2 -+ 1.96 sqrt(n)/2 (normal approximation of the binomial). It
 * stays honest with the ties a stepped GPU timer produces, where a
 * bootstrap collapses to a point. */
static void median_interval(const double *v, size_t n, double *lo, double *hi)
{
    double *s = malloc(n * sizeof *s);
    if (!s) {
        *lo = *hi = NAN;
        return;
    }
    memcpy(s, v, n * sizeof *s);
    qsort(s, n, sizeof *s, cmp);
    double half = 0.98 * sqrt((double)n);
    double a = floor((double)n / 2 - half), b = ceil((double)n / 2 + half);
    *lo = s[a < 0 ? 0 : (size_t)a];
    *hi = s[b > (double)(n - 1) ? n - 1 : (size_t)b];
    free(s);
}

void kr__ratio_interval(const double *a, size_t na, const double *b, size_t nb, double *lo,
                        double *hi)
{
    *lo = *hi = NAN;
    if (!na || !nb)
        return;
    double alo, ahi, blo, bhi;
    median_interval(a, na, &alo, &ahi);
    median_interval(b, nb, &blo, &bhi);
    /* the ratio of the two medians, each within its own interval */
    *lo = alo / bhi;
    *hi = ahi / blo;
}
