/* Rewards: every preset against hand-computed values on synthetic reports;
 * gates, weights, version checks, plugins, bad configurations. The order of
 * rewards (ladder, speed floors) is tested in test_reward_order.c. */
#include "helpers.h"

#include <math.h>

static kr_context *ctx;

/* speedup_low = speedup: an interval as tight as the point (threshold
 * presets read the interval's low end) */
static kr_report *report(int verdict, double speedup, uint64_t flags)
{
    kr_report *r;
    assert_int_equal(kr_report_new(&r), KR_OK);
    kr_report_set_verdict(r, verdict);
    if (speedup > 0) {
        kr_report_set(r, "speedup", speedup);
        kr_report_set(r, "speedup_low", speedup);
    }
    kr_report_set(r, "memory_bytes", 2e9);
    kr_report_set(r, "code_lines", 150);
    kr_report_set_flags(r, flags);
    return r;
}

static double score(const char *preset, kr_report *r)
{
    kr_reward *w;
    if (kr_reward_preset(&w, ctx, preset) != KR_OK)
        fail_msg("preset %s: %s", preset, kr_context_errmsg(ctx));
    double v = NAN;
    if (kr_reward_score(&v, w, r) != KR_OK)
        fail_msg("score %s: %s", preset, kr_context_errmsg(ctx));
    assert_true(v == kr_report_reward(r));
    kr_reward_free(w);
    kr_report_free(r);
    return v;
}

#define NEAR(a, b) assert_true(fabs((a) - (b)) < 1e-9)

static void makora(void **state)
{
    (void)state;
    /* 10 + 5 ln 2 + 2 (-0.1 x 2 GB) - 0.01 x (150 - 100) */
    NEAR(score("makora", report(KR_VERDICT_PASSED, 2, 0)), 10 + 5 * log(2.0) - 0.4 - 0.5);
    NEAR(score("makora", report(KR_VERDICT_COMPILE_ERROR, 0, 0)), -10);
    NEAR(score("makora", report(KR_VERDICT_INCORRECT, 0, 0)), -5 - 0.5);
    NEAR(score("makora", report(KR_VERDICT_FAULT, 0, 0)), -5 - 0.5);
}

static void kernelgym(void **state)
{
    (void)state;
    /* time_coverage is the caller's to set: without it, no coverage pay
     * (it was a constant 0.5 for every passing candidate) */
    NEAR(score("kernelgym", report(KR_VERDICT_PASSED, 4, 0)), 0.5 + 0.5 * 3 + 0.5 * 0);
    kr_report *full = report(KR_VERDICT_PASSED, 4, 0);
    kr_report_set(full, "time_coverage", 1);
    NEAR(score("kernelgym", full), 0.5 + 0.5 * 3 + 0.5 * 1);
    kr_report *r = report(KR_VERDICT_PASSED, 1.5, 0);
    kr_report_set(r, "time_coverage", 0.5);
    NEAR(score("kernelgym", r), 0.5 + 0.75 + 0.25);
    NEAR(score("kernelgym", report(KR_VERDICT_INCORRECT, 0, 0)), 0);
    NEAR(score("kernelgym", report(KR_VERDICT_PASSED, 4, KR_FLAG_IMPLAUSIBLE_SPEED)), 0);
    NEAR(score("kernelgym_default", report(KR_VERDICT_PASSED, 1.02, 0)), 1.0);
    NEAR(score("kernelgym_default", report(KR_VERDICT_PASSED, 1.0, 0)), 0.5);
    NEAR(score("kernelgym_default", report(KR_VERDICT_INCORRECT, 0, 0)), 0);
}

static void kernelgym_tiers(void **state)
{
    (void)state;
    NEAR(score("kernelgym_tiers", report(KR_VERDICT_COMPILE_ERROR, 0, 0)), -0.5);
    NEAR(score("kernelgym_tiers", report(KR_VERDICT_INCORRECT, 0, 0)), -0.3);
    NEAR(score("kernelgym_tiers", report(KR_VERDICT_PASSED, 0.9, 0)), -0.1);
    NEAR(score("kernelgym_tiers", report(KR_VERDICT_PASSED, 1.0, 0)), 0.2);
    NEAR(score("kernelgym_tiers", report(KR_VERDICT_PASSED, 1.3, 0)), 0.4);
    NEAR(score("kernelgym_tiers", report(KR_VERDICT_PASSED, 1.5, 0)), 0.6);
    NEAR(score("kernelgym_tiers", report(KR_VERDICT_PASSED, 2.5, 0)), 0.8);
    NEAR(score("kernelgym_tiers", report(KR_VERDICT_PASSED, 3.0, 0)), 1.0);
    /* a decoy: -1 in KernelGYM, below a compile error; here the incorrect
     * score, the lowest a passing candidate may get */
    NEAR(score("kernelgym_tiers", report(KR_VERDICT_PASSED, 3.0, KR_FLAG_IMPLAUSIBLE_SPEED)), -0.3);
    /* the tiers read the interval's low end: a kernel against itself is
     * not faster */
    kr_report *r = report(KR_VERDICT_PASSED, 1.002, 0);
    kr_report_set(r, "speedup_low", 0.995);
    NEAR(score("kernelgym_tiers", r), -0.1);
    /* a report without speedup_low: speedup less the 0.5 % resolution */
    r = report(KR_VERDICT_PASSED, 0, 0);
    kr_report_set(r, "speedup", 1.004);
    NEAR(score("kernelgym_tiers", r), -0.1);
    r = report(KR_VERDICT_PASSED, 0, 0);
    kr_report_set(r, "speedup", 1.21 / 0.995);
    NEAR(score("kernelgym_tiers", r), 0.4);
}

static void cuda_agent_kevin_fast_p(void **state)
{
    (void)state;
    NEAR(score("cuda_agent", report(KR_VERDICT_INCORRECT, 0, 0)), -1);
    NEAR(score("cuda_agent", report(KR_VERDICT_PASSED, 1.02, 0)), 1);
    /* without speedup_vs_compiled (the caller's to set) 2 is the most it
     * pays, however fast */
    NEAR(score("cuda_agent", report(KR_VERDICT_PASSED, 1.1, 0)), 2);
    NEAR(score("cuda_agent", report(KR_VERDICT_PASSED, 50, 0)), 2);
    kr_report *r = report(KR_VERDICT_PASSED, 1.1, 0);
    kr_report_set(r, "speedup_vs_compiled", 1.06);
    NEAR(score("cuda_agent", r), 3);
    r = report(KR_VERDICT_PASSED, 1.1, 0);
    kr_report_set(r, "speedup_vs_compiled", 1.02);
    NEAR(score("cuda_agent", r), 2);
    NEAR(score("kevin", report(KR_VERDICT_PASSED, 1.5, 0)), 0.3 + 1.5);
    NEAR(score("kevin", report(KR_VERDICT_INCORRECT, 0, 0)), 0);
    NEAR(score("fast_p", report(KR_VERDICT_PASSED, 1.0, 0)), 0);
    NEAR(score("fast_p", report(KR_VERDICT_PASSED, 1.01, 0)), 1);
    NEAR(score("fast_p", report(KR_VERDICT_INCORRECT, 3, 0)), 0);
    const char *const *names = kr_reward_presets();
    size_t n = 0;
    while (names[n])
        n++;
    assert_int_equal(n, 8);
}

/* The kernelbench preset: 0.5 for a correct candidate, + 0.25 log2 of the
 * speedup up to 1.0 at 4x; no speed pay without a kernel of its own
 * (torch_fallback), without attribution (unattributed) or with a clock that
 * disagreed (timing_mismatch); below a custom_share of 0.5 the speed pay in
 * proportion (the default speed credit). The values are those of the
 * ModelNew reward it replaces (kernelbench/scoring.py reward_of until then). */
static void kernelbench_ladder(void **state)
{
    (void)state;
    NEAR(score("kernelbench", report(KR_VERDICT_PASSED, 1.0, 0)), 0.5);
    NEAR(score("kernelbench", report(KR_VERDICT_PASSED, 0.3, 0)), 0.5);
    NEAR(score("kernelbench", report(KR_VERDICT_PASSED, 2.0, 0)), 0.75);
    NEAR(score("kernelbench", report(KR_VERDICT_PASSED, 4.0, 0)), 1.0);
    NEAR(score("kernelbench", report(KR_VERDICT_PASSED, 40.0, 0)), 1.0);
    NEAR(score("kernelbench", report(KR_VERDICT_PASSED, 0, 0)), 0.5); /* no speedup measured */
    NEAR(score("kernelbench", report(KR_VERDICT_INCORRECT, 3, 0)), 0);
    NEAR(score("kernelbench", report(KR_VERDICT_COMPILE_ERROR, 0, 0)), 0);
    NEAR(score("kernelbench", report(KR_VERDICT_TIMEOUT, 0, 0)), 0);
    NEAR(score("kernelbench", report(KR_VERDICT_PASSED, 4.0, KR_FLAG_TORCH_FALLBACK)), 0.5);
    NEAR(score("kernelbench", report(KR_VERDICT_PASSED, 4.0, KR_FLAG_UNATTRIBUTED)), 0.5);
    NEAR(score("kernelbench", report(KR_VERDICT_PASSED, 4.0, KR_FLAG_TIMING_MISMATCH)), 0.5);
    /* informational flags change nothing */
    NEAR(score("kernelbench", report(KR_VERDICT_PASSED, 4.0, KR_FLAG_LAUNCH_BOUND)), 1.0);
    /* a decoy kernel of 1 % of the GPU time keeps 2 % of the speed pay;
     * own kernels doing half of the work or more keep all of it */
    kr_report *r = report(KR_VERDICT_PASSED, 4.0, KR_FLAG_MOSTLY_TORCH);
    kr_report_set(r, "custom_share", 0.01);
    NEAR(score("kernelbench", r), 0.5 + 0.5 * 0.02);
    r = report(KR_VERDICT_PASSED, 2.0, KR_FLAG_MOSTLY_TORCH);
    kr_report_set(r, "custom_share", 0.25);
    NEAR(score("kernelbench", r), 0.5 + 0.25 * 0.5);
    r = report(KR_VERDICT_PASSED, 4.0, 0);
    kr_report_set(r, "custom_share", 0.8);
    NEAR(score("kernelbench", r), 1.0);
}

/* The speed credit is the scorer's, so every preset pays a mostly-torch
 * candidate its speed in proportion, from each speed term's floor (makora's
 * log speedup can be negative: its floor is 5 ln 0.01), and a reward
 * configured with "speed_credit": "none" pays in full. */
static void speed_credit_in_every_preset(void **state)
{
    (void)state;
    double full = score("makora", report(KR_VERDICT_PASSED, 2, 0));
    kr_report *r = report(KR_VERDICT_PASSED, 2, 0);
    kr_report_set(r, "custom_share", 0.45);
    double floor_pay = 5 * log(0.01), pay = 5 * log(2.0);
    NEAR(score("makora", r), full - pay + floor_pay + 0.9 * (pay - floor_pay));
    /* at a tenth of the credit it is paid as the slowest candidate would be,
     * which the ladder keeps at the least a passing one scores */
    r = report(KR_VERDICT_PASSED, 2, 0);
    kr_report_set(r, "custom_share", 0.05);
    NEAR(score("makora", r), 0);
    r = report(KR_VERDICT_PASSED, 3, 0);
    kr_report_set(r, "custom_share", 0.0);
    NEAR(score("fast_p", r), 0);
    r = report(KR_VERDICT_PASSED, 3, 0);
    kr_report_set(r, "custom_share", 0.5);
    NEAR(score("fast_p", r), 1);
    /* a NaN share is no evidence: full credit, as without the metric */
    r = report(KR_VERDICT_PASSED, 3, 0);
    kr_report_set(r, "custom_share", NAN);
    NEAR(score("fast_p", r), 1);
    kr_reward *w;
    assert_int_equal(kr_reward_from_json(&w, ctx, "{\"preset\": \"kernelbench\", "
                                         "\"speed_credit\": \"none\"}", 0), KR_OK);
    r = report(KR_VERDICT_PASSED, 4.0, 0);
    kr_report_set(r, "custom_share", 0.01);
    double v;
    assert_int_equal(kr_reward_score(&v, w, r), KR_OK);
    NEAR(v, 1.0);
    kr_report_free(r);
    kr_reward_free(w);
    assert_int_equal(kr_reward_from_json(&w, ctx, "{\"preset\": \"kernelbench\", "
                                         "\"speed_credit\": {\"metric\": \"own\", \"full_at\": 1}}", 0), KR_OK);
    r = report(KR_VERDICT_PASSED, 4.0, 0);
    kr_report_set(r, "custom_share", 0.01);
    kr_report_set(r, "own", 0.5);
    assert_int_equal(kr_reward_score(&v, w, r), KR_OK);
    NEAR(v, 0.5 + 0.5 * 0.5);
    char *json;
    assert_int_equal(kr_reward_json(&json, w), KR_OK);
    assert_non_null(strstr(json, "\"full_at\": 1"));
    kr_free(json);
    kr_report_free(r);
    kr_reward_free(w);
}

static void gates_weights_and_breakdown(void **state)
{
    (void)state;
    kr_reward *w;
    assert_int_equal(kr_reward_new(&w, ctx), KR_OK);
    assert_int_equal(kr_reward_add(w, "correct", "{\"pass\": 2, \"fail\": -1}", 3, KR_GATE_DEFAULT), KR_OK);
    assert_int_equal(kr_reward_add(w, "speedup", NULL, 0.5, KR_GATE_DEFAULT), KR_OK);
    /* an explicit gate overrides the term's default */
    assert_int_equal(kr_reward_add(w, "speedup", "{\"mode\": \"clipped\", \"max\": 2}", 1, KR_GATE_COMPILED), KR_OK);
    kr_report *r = report(KR_VERDICT_INCORRECT, 4, 0);
    double v;
    assert_int_equal(kr_reward_score(&v, w, r), KR_OK);
    NEAR(v, 3 * -1 + 0 + 2);
    assert_int_equal(kr_report_term_count(r), 3);
    assert_string_equal(kr_report_term_name(r, 1), "speedup");
    assert_false(kr_report_term_counted(r, 1));
    assert_true(kr_report_term_counted(r, 2));
    NEAR(kr_report_term_value(r, 0), -1);
    NEAR(kr_report_term_weight(r, 0), 3);
    char *json;
    assert_int_equal(kr_report_json(&json, r), KR_OK);
    assert_contains(json, "\"counted\": false");
    kr_free(json);
    assert_int_equal(kr_reward_json(&json, w), KR_OK);
    assert_contains(json, "\"gate\": \"compiled\"");
    kr_free(json);
    /* a gated speed term never fails for a missing metric */
    kr_report_free(r);
    r = report(KR_VERDICT_COMPILE_ERROR, 0, 0);
    assert_int_equal(kr_reward_score(&v, w, r), KR_OK);
    kr_report_free(r);
    kr_reward_free(w);
}

static int eval_half(void *s, const kr_report *r, double *v, char *e, size_t n)
{
    (void)s; (void)r; (void)e; (void)n;
    *v = 0.5;
    return 0;
}

static void term_versions(void **state)
{
    (void)state;
    kr_reward *w;
    kr_reward_new(&w, ctx);
    kr_term_def newer = {KR_TERM_VERSION + 1, 0, "newer", "", NULL, eval_half, NULL};
    assert_int_equal(kr_reward_register(w, &newer, sizeof newer), KR_EVERSION);
    assert_contains(kr_context_errmsg(ctx), "update libkreward");
    /* an older, shorter table (no destroy) is accepted; the missing field is NULL */
    kr_term_def older = {KR_TERM_VERSION, 0, "older", "", NULL, eval_half, NULL};
    assert_int_equal(kr_reward_register(w, &older, offsetof(kr_term_def, destroy)), KR_OK);
    assert_int_equal(kr_reward_register(w, &older, sizeof older), KR_EINVAL); /* duplicate name */
    assert_int_equal(kr_reward_add(w, "older", NULL, 2, KR_GATE_ALWAYS), KR_OK);
    kr_report *r = report(KR_VERDICT_PASSED, 1, 0);
    double v;
    assert_int_equal(kr_reward_score(&v, w, r), KR_OK);
    NEAR(v, 1.0);
    kr_term_def nameless = {KR_TERM_VERSION, 0, NULL, "", NULL, eval_half, NULL};
    assert_int_equal(kr_reward_register(w, &nameless, sizeof nameless), KR_EINVAL);
    assert_int_equal(kr_reward_register(w, &older, 8), KR_EINVAL);
    kr_report_free(r);
    kr_reward_free(w);
}

static void plugins(void **state)
{
    (void)state;
    const char *path = getenv("KR_TEST_PLUGIN"), *newer = getenv("KR_TEST_PLUGIN_NEWER");
    if (!path || !newer)
        skip();
    kr_reward *w;
    kr_reward_new(&w, ctx);
    assert_int_equal(kr_reward_load_plugin(w, path), KR_OK);
    assert_int_equal(kr_reward_add(w, "plugin_lines", NULL, 1, KR_GATE_ALWAYS), KR_OK);
    kr_report *r = report(KR_VERDICT_PASSED, 1, 0);
    double v;
    assert_int_equal(kr_reward_score(&v, w, r), KR_OK);
    NEAR(v, -0.15);
    /* a term returning NaN: an error naming it, or the fallback */
    assert_int_equal(kr_reward_add(w, "plugin_nan", NULL, 1, KR_GATE_ALWAYS), KR_OK);
    assert_int_equal(kr_reward_score(&v, w, r), KR_EPLUGIN);
    assert_contains(kr_context_errmsg(ctx), "term 'plugin_nan' returned NaN");
    assert_int_equal(kr_report_term_count(r), 0);
    kr_reward_set_fallback(w, -7);
    assert_int_equal(kr_reward_score(&v, w, r), KR_OK);
    NEAR(v, -7);
    kr_report_free(r);
    kr_reward_free(w);
    kr_reward_new(&w, ctx);
    assert_int_equal(kr_reward_load_plugin(w, newer), KR_EVERSION);
    assert_contains(kr_context_errmsg(ctx), "built against a newer libkreward");
    assert_int_equal(kr_reward_load_plugin(w, "/nonexistent/plugin.so"), KR_ENOTFOUND);
    kr_reward_free(w);
    /* the second term clashes with a built-in: the whole plugin is refused,
     * and its first term is not left behind pointing into unloaded code */
    const char *clash = getenv("KR_TEST_PLUGIN_CLASH");
    assert_non_null(clash);
    kr_reward_new(&w, ctx);
    assert_int_equal(kr_reward_load_plugin(w, clash), KR_EINVAL);
    assert_contains(kr_context_errmsg(ctx), "'compiled' is already known");
    assert_int_equal(kr_reward_add(w, "plugin_lines", NULL, 1, KR_GATE_ALWAYS), KR_ENOTFOUND);
    assert_int_equal(kr_reward_load_plugin(w, path), KR_OK); /* and the name is free again */
    assert_int_equal(kr_reward_add(w, "plugin_lines", NULL, 1, KR_GATE_ALWAYS), KR_OK);
    kr_reward_free(w);
    /* plugins from a JSON configuration */
    char json[4300];
    snprintf(json, sizeof json, "{\"plugins\": [\"%s\"], \"terms\": [{\"term\": \"plugin_lines\", \"weight\": 10}]}", path);
    assert_int_equal(kr_reward_from_json(&w, ctx, json, 0), KR_OK);
    r = report(KR_VERDICT_PASSED, 1, 0);
    assert_int_equal(kr_reward_score(&v, w, r), KR_OK);
    NEAR(v, -1.5);
    kr_report_free(r);
    kr_reward_free(w);
}

static void bad_configurations(void **state)
{
    (void)state;
    static const struct {
        const char *json;
        const char *expected;
    } bad[] = {
        {"{", "reward configuration:1:"},
        {"[]", "is a JSON object"},
        {"{}", "has no terms"},
        {"{\"terms\": [{\"term\": \"nope\"}]}", "terms[0]: unknown term 'nope'"},
        {"{\"terms\": [{\"weight\": 1}]}", "needs \"term\""},
        {"{\"terms\": [{\"term\": \"correct\", \"weight\": \"x\"}]}", "\"weight\" must be a number"},
        {"{\"terms\": [{\"term\": \"correct\", \"gate\": \"sometimes\"}]}", "\"gate\" is always"},
        {"{\"terms\": [{\"term\": \"correct\", \"config\": {\"pas\": 1}}]}", "unknown config key 'pas'"},
        {"{\"terms\": [{\"term\": \"speedup\", \"config\": {\"mode\": \"cubic\"}}]}", "mode must be linear"},
        {"{\"terms\": [{\"term\": \"speedup\", \"config\": {\"mode\": \"tiers\", \"tiers\": [[2, 1], [1, 2]]}}]}", "rising speedups"},
        {"{\"terms\": [{\"term\": \"metric\"}]}", "\"metric\" names the report metric"},
        {"{\"terms\": [{\"term\": \"flags\", \"config\": {\"penalties\": {\"sparkly\": 1}}}]}", "'sparkly' is not a flag"},
        {"{\"preset\": \"nope\"}", "unknown preset 'nope' (the presets: makora, kernelgym, "
                                "kernelgym_default, kernelgym_tiers, cuda_agent, kevin, kernelbench, fast_p)"},
        {"{\"preset\": \"kevin\", \"colour\": 1}", "unknown field 'colour'"},
        {"{\"version\": 2, \"preset\": \"kevin\"}", "version 2 is not supported"},
        {"{\"terms\": [{\"term\": \"correct\"}], \"fallback\": \"x\"}", "\"fallback\" must be"},
        {"{\"terms\": [{\"term\": \"correct\"}], \"flag_overrides\": {\"x\": 1}}", "'x' is not a flag"},
        {"{\"terms\": [{\"term\": \"correct\", \"term\": \"speedup\"}]}", "duplicate"},
        {"{\"preset\": \"kevin\", \"speed_credit\": {\"metric\": \"custom_share\", \"full_at\": 0}}", "\"speed_credit\" is \"none\" or"},
        {"{\"preset\": \"kevin\", \"speed_credit\": {\"metric\": 3}}", "\"speed_credit\" is \"none\" or"},
        {"{\"preset\": \"kevin\", \"speed_credit\": {\"metric\": \"x\", \"at\": 1}}", "\"speed_credit\" is \"none\" or"},
        {"{\"terms\": [{\"term\": \"speedup\", \"config\": {\"mode\": \"log\", \"base\": 1}}]}", "\"base\" of the log"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        kr_reward *w = (kr_reward *)0x1;
        int rc = kr_reward_from_json(&w, ctx, bad[i].json, 0);
        if (rc == KR_OK || !contains(kr_context_errmsg(ctx), bad[i].expected))
            fail_msg("config %zu: %s \"%s\", expected \"...%s...\"", i, kr_status_name(rc),
                     kr_context_errmsg(ctx), bad[i].expected);
        assert_null(w);
    }
    /* a term error names the term; the report keeps no partial breakdown */
    kr_reward *w;
    assert_int_equal(kr_reward_from_json(&w, ctx, "{\"terms\": [{\"term\": \"speedup\", \"gate\": \"always\", \"config\": {\"mode\": \"log\"}}, {\"term\": \"metric\", \"config\": {\"metric\": \"max_abs_error\"}}]}", 0), KR_OK);
    kr_report *r = report(KR_VERDICT_PASSED, 0, 0);
    double v;
    assert_int_equal(kr_reward_score(&v, w, r), KR_EPLUGIN);
    assert_contains(kr_context_errmsg(ctx), "term 'metric' needs the metric 'max_abs_error', "
                    "which the report lacks");
    assert_int_equal(kr_report_term_count(r), 0);
    /* a speed term reads a missing or nonsensical speedup as the slowest
     * (it was an error: the candidate passed, its speed is unknown) */
    kr_report_set(r, "max_abs_error", 0);
    assert_int_equal(kr_reward_score(&v, w, r), KR_OK);
    NEAR(v, log(0.01));
    kr_report_set(r, "speedup", -1);
    assert_int_equal(kr_reward_score(&v, w, r), KR_OK);
    NEAR(v, log(0.01));
    kr_report_set(r, "speedup", NAN);
    assert_int_equal(kr_reward_score(&v, w, r), KR_OK);
    NEAR(v, log(0.01));
    kr_report_free(r);
    kr_reward_free(w);
}

/* A report built by hand: a verdict and perhaps a speedup, none of what a
 * benchmark adds (memory_bytes, code_lines, speedup_low, time_coverage). */
static kr_report *bare(int verdict, double speedup)
{
    kr_report *r;
    assert_int_equal(kr_report_new(&r), KR_OK);
    kr_report_set_verdict(r, verdict);
    if (speedup > 0)
        kr_report_set(r, "speedup", speedup);
    return r;
}

static void presets_on_reports_by_hand(void **state)
{
    (void)state;
    /* every preset scores a bare verdict: what each reads is optional */
    for (const char *const *p = kr_reward_presets(); *p; p++) {
        static const int verdicts[] = {KR_VERDICT_PASSED, KR_VERDICT_INCORRECT,
                                       KR_VERDICT_COMPILE_ERROR};
        for (size_t i = 0; i < 3; i++) {
            kr_reward *w;
            assert_int_equal(kr_reward_preset(&w, ctx, *p), KR_OK);
            kr_report *r = bare(verdicts[i], 0);
            double v;
            if (kr_reward_score(&v, w, r) != KR_OK)
                fail_msg("%s on a bare %s report: %s", *p, kr_verdict_name(verdicts[i]),
                         kr_context_errmsg(ctx));
            kr_report_free(r);
            kr_reward_free(w);
        }
    }
    /* makora, the default: no memory or code size penalty without their
     * metrics (it failed: "the report has no 'memory_bytes'") */
    NEAR(score("makora", bare(KR_VERDICT_PASSED, 2)), 10 + 5 * log(2.0));
    NEAR(score("makora", bare(KR_VERDICT_INCORRECT, 0)), -5);
    NEAR(score("kernelgym", bare(KR_VERDICT_PASSED, 2)), 0.5 + 1);
    NEAR(score("kernelgym_tiers", bare(KR_VERDICT_PASSED, 2.1)), 0.8); /* speedup_low: 2.0895 */
    NEAR(score("fast_p", bare(KR_VERDICT_PASSED, 1.2)), 1);
}

static void terms_say_what_they_need(void **state)
{
    (void)state;
    kr_reward *w;
    assert_int_equal(kr_reward_preset(&w, ctx, "makora"), KR_OK);
    char *json;
    assert_int_equal(kr_reward_json(&json, w), KR_OK);
    assert_contains(json, "\"memory_bytes\": \"0 bytes: no penalty\"");
    assert_contains(json, "\"code_lines\": \"0 lines: no penalty\"");
    assert_contains(json, "\"speedup\": \"the slowest");
    /* what kr_reward_json writes reads back */
    kr_reward *again;
    assert_int_equal(kr_reward_from_json(&again, ctx, json, 0), KR_OK);
    kr_reward_free(again);
    kr_free(json);
    kr_reward_free(w);
    /* a metric a term cannot do without: required in the JSON, and an
     * error naming the term and the metric when a report lacks it */
    assert_int_equal(kr_reward_from_json(&w, ctx, "{\"terms\": [{\"term\": \"threshold\", "
                                         "\"gate\": \"always\", \"config\": {\"metric\": "
                                         "\"max_abs_error\"}}]}", 0), KR_OK);
    assert_int_equal(kr_reward_json(&json, w), KR_OK);
    assert_contains(json, "\"max_abs_error\": \"required\"");
    kr_free(json);
    kr_report *r = bare(KR_VERDICT_PASSED, 1);
    double v;
    assert_int_equal(kr_reward_score(&v, w, r), KR_EPLUGIN);
    assert_contains(kr_context_errmsg(ctx), "term 'threshold' needs the metric 'max_abs_error'");
    kr_report_set(r, "max_abs_error", 2);
    assert_int_equal(kr_reward_score(&v, w, r), KR_OK);
    NEAR(v, 1);
    kr_report_free(r);
    kr_reward_free(w);
    /* cuda_agent and kernelgym: what the caller sets, and what its absence means */
    assert_int_equal(kr_reward_preset(&w, ctx, "cuda_agent"), KR_OK);
    assert_int_equal(kr_reward_json(&json, w), KR_OK);
    assert_contains(json, "\"speedup_vs_compiled\": \"not faster than torch.compile: the top "
                    "milestone is not reached\"");
    kr_free(json);
    kr_reward_free(w);
    assert_int_equal(kr_reward_preset(&w, ctx, "kernelgym"), KR_OK);
    assert_int_equal(kr_reward_json(&json, w), KR_OK);
    assert_contains(json, "\"time_coverage\": \"its lowest value\"");
    kr_free(json);
    kr_reward_free(w);
}

static void report_by_hand(void **state)
{
    (void)state;
    kr_report *r;
    kr_report_new(&r);
    assert_int_equal(kr_report_get(NULL, r, "time_us"), KR_ENOTFOUND);
    assert_int_equal(kr_report_set(r, "time_us", 12.5), KR_OK);
    assert_int_equal(kr_report_set(r, "time_us", 13), KR_OK);
    double v;
    assert_int_equal(kr_report_get(&v, r, "time_us"), KR_OK);
    assert_true(v == 13);
    assert_int_equal(kr_report_metric_count(r), 1);
    assert_int_equal(kr_report_set_text(r, "feedback", "hello"), KR_OK);
    assert_string_equal(kr_report_text(r, "feedback"), "hello");
    assert_null(kr_report_text(r, "nothing"));
    assert_int_equal(kr_report_set_verdict(r, 99), KR_EINVAL);
    assert_string_equal(kr_verdict_name(KR_VERDICT_COMPILE_ERROR), "compile_error");
    assert_int_equal(kr_verdict_from_name("timeout"), KR_VERDICT_TIMEOUT);
    assert_string_equal(kr_flag_name(KR_FLAG_RACE), "race");
    assert_int_equal(kr_flag_from_name("side_stream"), KR_FLAG_SIDE_STREAM);
    kr_report_set(r, "bad", NAN);
    char *json;
    assert_int_equal(kr_report_json(&json, r), KR_OK);
    assert_contains(json, "\"bad\": null");
    kr_free(json);
    kr_report_free(r);
}

int main(void)
{
    ctx = test_context(NULL);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(makora),
        cmocka_unit_test(kernelgym),
        cmocka_unit_test(kernelgym_tiers),
        cmocka_unit_test(cuda_agent_kevin_fast_p),
        cmocka_unit_test(kernelbench_ladder),
        cmocka_unit_test(speed_credit_in_every_preset),
        cmocka_unit_test(gates_weights_and_breakdown),
        cmocka_unit_test(term_versions),
        cmocka_unit_test(plugins),
        cmocka_unit_test(bad_configurations),
        cmocka_unit_test(report_by_hand),
        cmocka_unit_test(presets_on_reports_by_hand),
        cmocka_unit_test(terms_say_what_they_need),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    kr_context_free(ctx);
    return rc;
}
