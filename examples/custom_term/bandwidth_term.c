/* An example custom reward term: rewards reaching the memory roofline.
 *
 * value = min(1, achieved_gbps / peak_gbps) ^ exponent
 *
 * Register it on a reward, then use it like a built-in:
 *
 *     kr_reward_register(reward, &bandwidth_term, sizeof bandwidth_term);
 *     kr_reward_add(reward, "bandwidth", "{\"exponent\": 2}", 0.5, KR_GATE_CORRECT);
 *
 * Its unit test (tests/unit/test_example_term.c) runs on a laptop: reports
 * are filled by hand, no GPU involved. */
#include <kreward/kreward.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    double exponent;
} bandwidth_state;

static int bandwidth_init(const char *config, void **state, char *err, size_t n)
{
    bandwidth_state *s = malloc(sizeof *s);
    if (!s)
        return 1;
    s->exponent = 1;
    /* a tiny config: {"exponent": X} (a real term would use a JSON library) */
    const char *e = config ? strstr(config, "\"exponent\"") : NULL;
    if (e && sscanf(strchr(e, ':') ? strchr(e, ':') + 1 : "", "%lf", &s->exponent) != 1) {
        snprintf(err, n, "exponent must be a number");
        free(s);
        return 1;
    }
    if (!(s->exponent > 0)) {
        snprintf(err, n, "exponent must be positive");
        free(s);
        return 1;
    }
    *state = s;
    return 0;
}

static int bandwidth_evaluate(void *state, const kr_report *r, double *value, char *err, size_t n)
{
    const bandwidth_state *s = state;
    double got, peak;
    if (kr_report_get(&got, r, "achieved_gbps") != KR_OK || kr_report_get(&peak, r, "peak_gbps") != KR_OK) {
        snprintf(err, n, "needs achieved_gbps and peak_gbps (the problem must give \"bytes\")");
        return 1;
    }
    double f = peak > 0 ? got / peak : 0;
    *value = pow(f > 1 ? 1 : f, s->exponent);
    return 0;
}

static void bandwidth_destroy(void *state)
{
    free(state);
}

const kr_term_def bandwidth_term = {
    KR_TERM_VERSION, KR_TERM_NEEDS_CORRECT, "bandwidth",
    "fraction of the measured copy bandwidth reached, to a power",
    bandwidth_init, bandwidth_evaluate, bandwidth_destroy,
};
