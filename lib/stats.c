/* Sample statistics for timing. */
#include "stats.h"

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

static uint64_t next(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Half the smallest gap between distinct values: the timer's resolution.
 * GPU timestamps come in steps (e.g. 32 ns): without smoothing, a bootstrap
 * of tied samples returns the same median every time and a zero-width,
 * overconfident interval. */
static double half_resolution(const double *v, size_t n)
{
    double *s = malloc(n * sizeof *s), gap = INFINITY;
    if (!s)
        return 0;
    memcpy(s, v, n * sizeof *s);
    qsort(s, n, sizeof *s, cmp);
    for (size_t i = 1; i < n; i++)
        if (s[i] > s[i - 1] && s[i] - s[i - 1] < gap)
            gap = s[i] - s[i - 1];
    free(s);
    return isfinite(gap) ? gap / 2 : 0;
}

/* A smoothed bootstrap draw: resample, then jitter within the resolution. */
static double resampled_median(const double *v, size_t n, double h, double *tmp, uint64_t *state)
{
    for (size_t i = 0; i < n; i++)
        tmp[i] = v[next(state) % n] + h * ((double)(next(state) >> 11) * (2.0 / 9007199254740992.0) - 1.0);
    qsort(tmp, n, sizeof *tmp, cmp);
    return kr__percentile(tmp, n, 0.5);
}

void kr__ratio_interval(const double *a, size_t na, const double *b, size_t nb, double *lo,
                        double *hi)
{
    enum { ROUNDS = 400 };
    *lo = *hi = NAN;
    double *tmp = malloc((na > nb ? na : nb) * sizeof *tmp);
    double *ratios = malloc(ROUNDS * sizeof *ratios);
    if (!tmp || !ratios || !na || !nb) {
        free(tmp);
        free(ratios);
        return;
    }
    uint64_t state = 0x6b72657761726421ull;
    double ha = half_resolution(a, na), hb = half_resolution(b, nb);
    for (int r = 0; r < ROUNDS; r++) {
        double ma = resampled_median(a, na, ha, tmp, &state);
        double mb = resampled_median(b, nb, hb, tmp, &state);
        ratios[r] = ma / mb;
    }
    qsort(ratios, ROUNDS, sizeof *ratios, cmp);
    *lo = kr__percentile(ratios, ROUNDS, 0.025);
    *hi = kr__percentile(ratios, ROUNDS, 0.975);
    free(tmp);
    free(ratios);
}
