/* bench/score: the cost of scoring one report with each preset (goal: under
 * 1 us per term), against a hand-written C expression of the same formula
 * (the floor: what a trainer would write inline). Also a report carrying a
 * floor flag (reference_copy): its speed terms are not evaluated, they
 * score their floor. */
#include <kreward/kreward.h>

#include "common/clock.h"

#include <math.h>
#include <stdio.h>

int main(void)
{
    kr_context_options o = KR_CONTEXT_OPTIONS_INIT;
    o.flags = KR_CONTEXT_NO_DEVICE;
    kr_context *ctx;
    if (kr_context_new(&ctx, &o) != KR_OK)
        return 1;
    kr_report *r;
    kr_report_new(&r);
    kr_report_set_verdict(r, KR_VERDICT_PASSED);
    const char *metrics[] = {"speedup", "speedup_low", "speedup_high", "time_us", "baseline_us",
                             "memory_bytes", "code_lines", "roofline_fraction", "correct",
                             "compile_seconds", "max_abs_error", "rel_l2_error"};
    for (size_t i = 0; i < sizeof metrics / sizeof metrics[0]; i++)
        kr_report_set(r, metrics[i], 1.5 + (double)i);
    kr_report_set(r, "memory_bytes", 2e9);
    printf("Scoring cost per report (%zu metrics in the report), best of 5 runs x 200000 reports\n\n",
           sizeof metrics / sizeof metrics[0]);
    kr_report *flagged;
    kr_report_new(&flagged);
    kr_report_set_verdict(flagged, KR_VERDICT_PASSED);
    for (size_t i = 0; i < sizeof metrics / sizeof metrics[0]; i++)
        kr_report_set(flagged, metrics[i], 1.5 + (double)i);
    kr_report_set(flagged, "memory_bytes", 2e9);
    kr_report_set_flags(flagged, KR_FLAG_REFERENCE_COPY);
    printf("| preset | terms | ns per report | ns per term | ns per flagged report |\n"
           "|---|---|---|---|---|\n");
    for (const char *const *p = kr_reward_presets(); *p; p++) {
        kr_reward *w;
        if (kr_reward_preset(&w, ctx, *p) != KR_OK)
            return 1;
        double v, best[2] = {1e9, 1e9};
        for (int which = 0; which < 2; which++) {
            kr_report *rep_r = which ? flagged : r;
            for (int rep = 0; rep < 5; rep++) {
                double t0 = kr__now();
                for (int i = 0; i < 200000; i++)
                    kr_reward_score(&v, w, rep_r);
                double dt = (kr__now() - t0) / 200000;
                best[which] = dt < best[which] ? dt : best[which];
            }
        }
        size_t terms = kr_report_term_count(r);
        printf("| %s | %zu | %.0f | %.0f | %.0f |\n", *p, terms, best[0] * 1e9,
               best[0] * 1e9 / (double)terms, best[1] * 1e9);
        kr_reward_free(w);
    }
    /* the floor: the Makora formula inline on the same report getters */
    volatile double sink = 0;
    double best = 1e9;
    for (int rep = 0; rep < 5; rep++) {
        double t0 = kr__now();
        for (int i = 0; i < 200000; i++) {
            double s, mem, lines;
            kr_report_get(&s, r, "speedup");
            kr_report_get(&mem, r, "memory_bytes");
            kr_report_get(&lines, r, "code_lines");
            s = s < 0.01 ? 0.01 : s > 100 ? 100 : s;
            double total = 10 + 5 * log(s) - 0.2 * mem / 1e9 - 0.01 * (lines > 100 ? lines - 100 : 0);
            sink += total < 0 ? 0 : total > 35 ? 35 : total;
        }
        double dt = (kr__now() - t0) / 200000;
        best = dt < best ? dt : best;
    }
    printf("| makora, inline C | 4 | %.0f | %.0f | - |\n", best * 1e9,
           best * 1e9 / (sink != 0 ? 4 : 4));
    kr_report_free(flagged);
    kr_report_free(r);
    kr_context_free(ctx);
    return 0;
}
