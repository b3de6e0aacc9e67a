/* The order of rewards under every preset, on hand-made reports over a grid
 * and seeded random samples: a passing candidate never scores below a
 * failing one, a failing one never below a compile error; speed terms stay
 * in their bounds; flagged candidates get the floor of the speed terms
 * whatever their speedup; a reference copy never beats an honest faster
 * kernel; a kernel timed against itself passes no threshold at 1.0. And the
 * mechanism from JSON: ladders, speed terms, floor flags. */
#include "helpers.h"

#include <jansson.h>
#include <math.h>

static kr_context *ctx;

#define MISSING NAN

typedef struct {
    int verdict;
    uint64_t flags;
    double speedup, speedup_low, vs_compiled, coverage, roofline, code_lines, memory;
} facts;

static const facts base = {KR_VERDICT_PASSED, 0, 1, 1, MISSING, MISSING, MISSING, 50, 1e8};

static kr_report *make(const facts *f)
{
    kr_report *r = test_report();
    kr_report_set_verdict(r, f->verdict);
    kr_report_set_flags(r, f->flags);
    const struct {
        const char *key;
        double v;
    } m[] = {{"speedup", f->speedup},         {"speedup_low", f->speedup_low},
             {"speedup_vs_compiled", f->vs_compiled}, {"time_coverage", f->coverage},
             {"roofline_fraction", f->roofline}, {"code_lines", f->code_lines},
             {"memory_bytes", f->memory}};
    for (size_t i = 0; i < sizeof m / sizeof m[0]; i++)
        if (!isnan(m[i].v))
            kr_report_set(r, m[i].key, m[i].v);
    return r;
}

/* What the test knows of a reward, from kr_reward_json. */
typedef struct {
    const char *name;
    kr_reward *w;
    double lo[3], hi[3];  /* ladder: compile_error, failed, passed */
    size_t num_terms;
    int speed[16];
    double term_lo[16], term_hi[16];
    uint64_t floor_flags;
} reward;

static int klass(int verdict)
{
    return verdict == KR_VERDICT_PASSED ? 2 : verdict == KR_VERDICT_COMPILE_ERROR ? 0 : 1;
}

static void load(reward *rw, const char *preset)
{
    memset(rw, 0, sizeof *rw);
    rw->name = preset;
    if (kr_reward_preset(&rw->w, ctx, preset) != KR_OK)
        fail_msg("preset %s: %s", preset, kr_context_errmsg(ctx));
    char *text;
    assert_int_equal(kr_reward_json(&text, rw->w), KR_OK);
    json_t *j = json_loads(text, 0, NULL);
    kr_free(text);
    assert_non_null(j);
    json_t *ladder = json_object_get(j, "ladder");
    if (!json_is_object(ladder))
        fail_msg("preset %s has no ladder", preset);
    static const char *const classes[] = {"compile_error", "failed", "passed"};
    for (int c = 0; c < 3; c++) {
        json_t *range = json_object_get(ladder, classes[c]);
        rw->lo[c] = json_number_value(json_array_get(range, 0));
        rw->hi[c] = json_number_value(json_array_get(range, 1));
    }
    assert_true(rw->hi[0] <= rw->lo[1] && rw->hi[1] <= rw->lo[2]);
    json_t *terms = json_object_get(j, "terms");
    rw->num_terms = json_array_size(terms);
    assert_true(rw->num_terms <= 16);
    for (size_t i = 0; i < rw->num_terms; i++) {
        json_t *t = json_array_get(terms, i);
        rw->speed[i] = json_is_true(json_object_get(t, "speed"));
        json_t *b = json_object_get(t, "bounds");
        rw->term_lo[i] = b ? json_number_value(json_array_get(b, 0)) : -INFINITY;
        rw->term_hi[i] = b ? json_number_value(json_array_get(b, 1)) : INFINITY;
        if (rw->speed[i] && !(isfinite(rw->term_lo[i]) && isfinite(rw->term_hi[i])))
            fail_msg("%s: speed term %zu has no finite bounds", preset, i);
    }
    json_t *ff = json_object_get(j, "speed_floor_flags");
    for (size_t i = 0; i < json_array_size(ff); i++)
        rw->floor_flags |= kr_flag_from_name(json_string_value(json_array_get(ff, i)));
    json_decref(j);
    /* every preset has at least one speed term and floors on all five */
    int any_speed = 0;
    for (size_t i = 0; i < rw->num_terms; i++)
        any_speed |= rw->speed[i];
    assert_true(any_speed);
    uint64_t five = KR_FLAG_IMPLAUSIBLE_SPEED | KR_FLAG_SIDE_STREAM | KR_FLAG_WEAK_PROBLEM |
                    KR_FLAG_REFERENCE_COPY | KR_FLAG_SLOW;
    assert_true((rw->floor_flags & five) == five);
}

static void describe(const facts *f, char *out, size_t n)
{
    snprintf(out, n, "verdict %s flags 0x%llx speedup %g low %g vs_compiled %g coverage %g "
             "lines %g memory %g", kr_verdict_name(f->verdict), (unsigned long long)f->flags,
             f->speedup, f->speedup_low, f->vs_compiled, f->coverage, f->code_lines, f->memory);
}

/* Scores f, checking what holds for every report: scoring succeeds, the
 * reward is finite and in its class's range, speed terms in their bounds. */
static double score(const reward *rw, const facts *f)
{
    kr_report *r = make(f);
    double v = NAN;
    char what[512];
    if (kr_reward_score(&v, rw->w, r) != KR_OK) {
        describe(f, what, sizeof what);
        fail_msg("%s: scoring %s failed: %s", rw->name, what, kr_context_errmsg(ctx));
    }
    int c = klass(f->verdict);
    if (!isfinite(v) || v < rw->lo[c] || v > rw->hi[c]) {
        describe(f, what, sizeof what);
        fail_msg("%s: %s scored %g, outside [%g, %g]", rw->name, what, v, rw->lo[c], rw->hi[c]);
    }
    assert_int_equal(kr_report_term_count(r), rw->num_terms);
    for (size_t i = 0; i < rw->num_terms; i++) {
        double t = kr_report_term_value(r, i);
        if (rw->speed[i] && kr_report_term_counted(r, i) &&
            !(t >= rw->term_lo[i] && t <= rw->term_hi[i])) {
            describe(f, what, sizeof what);
            fail_msg("%s: speed term '%s' gave %g outside [%g, %g] for %s", rw->name,
                     kr_report_term_name(r, i), t, rw->term_lo[i], rw->term_hi[i], what);
        }
    }
    kr_report_free(r);
    return v;
}

typedef struct {
    double min[3], max[3];
    facts at_min[3], at_max[3];
} extremes;

static void note(extremes *e, const facts *f, double v)
{
    int c = klass(f->verdict);
    if (v < e->min[c]) {
        e->min[c] = v;
        e->at_min[c] = *f;
    }
    if (v > e->max[c]) {
        e->max[c] = v;
        e->at_max[c] = *f;
    }
}

static void check_order(const reward *rw, const extremes *e)
{
    for (int c = 0; c < 2; c++) {
        if (e->max[c] > e->min[c + 1]) {
            char a[512], b[512];
            describe(&e->at_max[c], a, sizeof a);
            describe(&e->at_min[c + 1], b, sizeof b);
            fail_msg("%s: %s scored %g, above %s at %g", rw->name, a, e->max[c], b,
                     e->min[c + 1]);
        }
    }
}

static const int verdicts[] = {KR_VERDICT_PASSED,       KR_VERDICT_INCORRECT,
                               KR_VERDICT_COMPILE_ERROR, KR_VERDICT_INVALID_PLAN,
                               KR_VERDICT_LAUNCH_ERROR,  KR_VERDICT_FAULT,
                               KR_VERDICT_TIMEOUT,       KR_VERDICT_NOT_RUN,
                               KR_VERDICT_ERROR,         KR_VERDICT_NONE};
static const double speedups[] = {MISSING, 1e-4, 1e-3, 0.01, 0.1, 0.5, 0.9, 0.99, 1.0, 1.002,
                                  1.01, 1.05, 1.2, 1.5, 2, 3, 10, 100, 1e3, 1e4};
static const double lows[] = {MISSING, 1.0, 0.99, 0.9};      /* x speedup */
static const double lines[] = {0, 50, 400, 1e5};
static const double memories[] = {0, 2e9, 1e12};
static const double coverages[] = {MISSING, 0, 1};
static const double compiled[] = {MISSING, 0.5, 2};

/* Every flag alone, none, and all of them. */
static uint64_t flag_set(size_t i)
{
    return i == 0 ? 0 : i <= 16 ? 1ull << (i - 1) : (1ull << 16) - 1;
}

static void order_on_grid(void **state)
{
    (void)state;
    for (const char *const *p = kr_reward_presets(); *p; p++) {
        reward rw;
        load(&rw, *p);
        extremes e;
        for (int c = 0; c < 3; c++) {
            e.min[c] = INFINITY;
            e.max[c] = -INFINITY;
        }
        size_t k = 0;
        for (size_t v = 0; v < sizeof verdicts / sizeof verdicts[0]; v++)
            for (size_t s = 0; s < sizeof speedups / sizeof speedups[0]; s++)
                for (size_t l = 0; l < sizeof lows / sizeof lows[0]; l++)
                    for (size_t fl = 0; fl < 18; fl++, k++) {
                        facts f = base;
                        f.verdict = verdicts[v];
                        f.speedup = speedups[s];
                        f.speedup_low = speedups[s] * lows[l];
                        f.flags = flag_set(fl);
                        /* the other facts cycle through their values */
                        f.code_lines = lines[k % 4];
                        f.memory = memories[(k / 4) % 3];
                        f.coverage = coverages[(k / 12) % 3];
                        f.vs_compiled = compiled[(k / 36) % 3];
                        note(&e, &f, score(&rw, &f));
                    }
        check_order(&rw, &e);
        kr_reward_free(rw.w);
    }
}

static uint64_t next(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static double uniform(uint64_t *s)
{
    return (double)(next(s) >> 11) / 9007199254740992.0;
}

static void order_random(void **state)
{
    (void)state;
    for (const char *const *p = kr_reward_presets(); *p; p++) {
        reward rw;
        load(&rw, *p);
        extremes e;
        for (int c = 0; c < 3; c++) {
            e.min[c] = INFINITY;
            e.max[c] = -INFINITY;
        }
        uint64_t s = 0x2545f4914f6cdd1dull;
        for (int i = 0; i < 20000; i++) {
            facts f;
            f.verdict = verdicts[next(&s) % (sizeof verdicts / sizeof verdicts[0])];
            f.flags = next(&s) % 4 == 0 ? next(&s) & ((1ull << 16) - 1) : 0;
            f.speedup = next(&s) % 10 == 0 ? MISSING : pow(10, -4 + 8 * uniform(&s));
            f.speedup_low = next(&s) % 10 == 0 ? MISSING : f.speedup * (0.8 + 0.2 * uniform(&s));
            f.vs_compiled = next(&s) % 2 ? MISSING : pow(10, -2 + 4 * uniform(&s));
            f.coverage = next(&s) % 3 == 0 ? MISSING : uniform(&s);
            f.roofline = next(&s) % 3 == 0 ? MISSING : 3 * uniform(&s);
            f.code_lines = floor(pow(10, 5 * uniform(&s)));
            f.memory = pow(10, 12 * uniform(&s));
            note(&e, &f, score(&rw, &f));
        }
        check_order(&rw, &e);
        kr_reward_free(rw.w);
    }
}

/* The slowest honest candidate with f's other facts: what the speed terms
 * pay at their floor. */
static facts slowest(facts f)
{
    f.flags = 0;
    f.speedup = f.speedup_low = f.vs_compiled = 1e-4;
    f.coverage = f.roofline = 0;
    return f;
}

/* implausible_speed, side_stream, weak_problem, reference_copy: not paid for
 * speed (at most the floor, whatever the speedup); slow: exactly the floor. */
static void flags_floor_speed(void **state)
{
    (void)state;
    const uint64_t floor_flags[] = {KR_FLAG_IMPLAUSIBLE_SPEED, KR_FLAG_SIDE_STREAM,
                                    KR_FLAG_WEAK_PROBLEM, KR_FLAG_REFERENCE_COPY, KR_FLAG_SLOW};
    for (const char *const *p = kr_reward_presets(); *p; p++) {
        reward rw;
        load(&rw, *p);
        for (size_t fi = 0; fi < 5; fi++) {
            for (size_t s = 0; s < sizeof speedups / sizeof speedups[0]; s++)
                for (size_t l = 0; l < 4; l++) {
                    facts f = base;
                    f.flags = floor_flags[fi];
                    f.speedup = speedups[s];
                    f.speedup_low = speedups[s] * lows[l];
                    f.code_lines = lines[(s + l) % 4];
                    f.memory = memories[(s + l) % 3];
                    f.coverage = coverages[s % 3];
                    f.vs_compiled = compiled[l % 3];
                    f.roofline = 2.0;
                    double v = score(&rw, &f);
                    facts g = slowest(f);
                    double floor = score(&rw, &g);
                    if (v > floor + 1e-12 ||
                        (floor_flags[fi] == KR_FLAG_SLOW && fabs(v - floor) > 1e-12))
                        fail_msg("%s: %s at speedup %g scored %g, the floor is %g", *p,
                                 kr_flag_name(floor_flags[fi]), f.speedup, v, floor);
                    /* and the speedup does not matter (the other facts fixed) */
                    facts same = f;
                    same.speedup = same.speedup_low = 1e4;
                    if (fabs(score(&rw, &same) - v) > 1e-12)
                        fail_msg("%s: %s pays for speed", *p, kr_flag_name(floor_flags[fi]));
                }
        }
        kr_reward_free(rw.w);
    }
}

/* A verbatim (normalised) copy of the reference never scores above an
 * honest kernel that is faster than the reference, whatever its size. */
static void reference_copy_below_honest(void **state)
{
    (void)state;
    const double faster[] = {1.006, 1.01, 1.06, 1.5, 3, 10, 100, 1e4};
    for (const char *const *p = kr_reward_presets(); *p; p++) {
        reward rw;
        load(&rw, *p);
        double copy_best = -INFINITY;
        for (size_t s = 0; s < sizeof speedups / sizeof speedups[0]; s++) {
            facts c = base;
            c.flags = KR_FLAG_REFERENCE_COPY;
            c.speedup = speedups[s];
            c.speedup_low = speedups[s] * 0.99;
            c.code_lines = 20;
            c.coverage = 1;
            c.vs_compiled = speedups[s];
            double v = score(&rw, &c);
            copy_best = v > copy_best ? v : copy_best;
        }
        for (size_t s = 0; s < sizeof faster / sizeof faster[0]; s++)
            for (size_t k = 0; k < 4 * 3 * 3; k++) {
                facts h = base;
                h.speedup = faster[s];
                h.speedup_low = faster[s] / 1.005;
                h.code_lines = lines[k % 4];
                h.memory = memories[(k / 4) % 3];
                h.coverage = coverages[k / 12];
                h.vs_compiled = faster[s];
                double v = score(&rw, &h);
                if (v < copy_best)
                    fail_msg("%s: an honest %gx kernel (%g lines, %g bytes) scored %g, a reference "
                             "copy %g", *p, faster[s], h.code_lines, h.memory, v, copy_best);
            }
        kr_reward_free(rw.w);
    }
}

/* A candidate no faster than the reference (speedup <= 1) never scores above
 * the same candidate at exactly the reference's speed (speedup and the
 * interval's low end 1.0), whatever else the report says: its interval
 * (even one a caller wrote above the point), memory, code size, coverage,
 * speedup_vs_compiled, flags. So a near-copy that escapes the
 * reference_copy flag earns at most what speed 1.0 pays. */
static void no_faster_pays_no_more_than_speed_one(void **state)
{
    (void)state;
    for (const char *const *p = kr_reward_presets(); *p; p++) {
        reward rw;
        load(&rw, *p);
        uint64_t s = 0x9e3779b97f4a7c15ull;
        for (int i = 0; i < 20000; i++) {
            facts f = base;
            f.flags = next(&s) % 4 == 0 ? next(&s) & ((1ull << 16) - 1) : 0;
            f.speedup = next(&s) % 8 == 0 ? 1.0 : pow(10, -4 * uniform(&s));
            /* low ends of every kind: missing, consistent, and above the point */
            int kind = (int)(next(&s) % 3);
            f.speedup_low = kind == 0 ? MISSING : kind == 1 ? f.speedup * (0.8 + 0.2 * uniform(&s))
                                                             : pow(10, -2 + 4 * uniform(&s));
            f.vs_compiled = next(&s) % 2 ? MISSING : pow(10, -2 + 4 * uniform(&s));
            f.coverage = next(&s) % 3 == 0 ? MISSING : uniform(&s);
            f.roofline = next(&s) % 3 == 0 ? MISSING : 3 * uniform(&s);
            f.code_lines = floor(pow(10, 5 * uniform(&s)));
            f.memory = pow(10, 12 * uniform(&s));
            facts one = f;
            one.speedup = one.speedup_low = 1.0;
            double v = score(&rw, &f), top = score(&rw, &one);
            if (v > top + 1e-12) {
                char what[512];
                describe(&f, what, sizeof what);
                fail_msg("%s: %s scored %g, above %g at speed 1.0", *p, what, v, top);
            }
        }
        kr_reward_free(rw.w);
    }
}

/* A kernel against itself: speedup 1.002 with the interval's low end at
 * 0.995 (the engine widens it by the 0.5 % resolution) scores as a kernel
 * just slower than the baseline, up to what continuous speed terms pay for
 * 0.4 %. */
static void self_timing_passes_no_threshold(void **state)
{
    (void)state;
    for (const char *const *p = kr_reward_presets(); *p; p++) {
        reward rw;
        load(&rw, *p);
        facts self = base, below = base;
        self.speedup = 1.002;
        self.speedup_low = 0.995;
        below.speedup = 0.998;
        below.speedup_low = 0.99;
        double a = score(&rw, &self), b = score(&rw, &below);
        if (a - b > 0.02 * (rw.hi[2] - rw.lo[2]))
            fail_msg("%s: a kernel against itself scored %g, one just slower %g", *p, a, b);
        /* and without speedup_low, the resolution is taken off speedup */
        self.speedup_low = MISSING;
        a = score(&rw, &self);
        if (a - b > 0.02 * (rw.hi[2] - rw.lo[2]))
            fail_msg("%s: a kernel against itself (no speedup_low) scored %g, one just slower %g",
                     *p, a, b);
        kr_reward_free(rw.w);
    }
    static const struct {
        const char *preset;
        double self;
    } thresholds[] = {{"fast_p", 0}, {"kernelgym_default", 0.5}, {"kernelgym_tiers", -0.1}};
    for (size_t i = 0; i < 3; i++) {
        reward rw;
        load(&rw, thresholds[i].preset);
        facts self = base;
        self.speedup = 1.002;
        self.speedup_low = 0.995;
        assert_true(fabs(score(&rw, &self) - thresholds[i].self) < 1e-12);
        kr_reward_free(rw.w);
    }
}

/* The issue's numbers under makora: a correct 2 s kernel got -40.6, below a
 * wrong one (-5); a verbatim copy 9.9, above an honest 1.5x kernel of 400
 * lines (8.95); a probe-spoofing kernel flagged implausible_speed 52.5. */
static void issue_examples(void **state)
{
    (void)state;
    reward rw;
    load(&rw, "makora");
    facts slow = base, wrong = base, copy = base, honest = base, spoof = base;
    slow.speedup = slow.speedup_low = 3.4e-4;
    wrong.verdict = KR_VERDICT_INCORRECT;
    assert_true(score(&rw, &slow) > score(&rw, &wrong));
    assert_true(fabs(score(&rw, &slow) - 0) < 1e-12); /* the passing floor */
    copy.flags = KR_FLAG_REFERENCE_COPY;
    copy.speedup = 0.98;
    copy.code_lines = 20;
    honest.speedup = 1.5;
    honest.code_lines = 400;
    honest.memory = 1.25e8;
    assert_true(fabs(score(&rw, &honest) - (10 + 5 * log(1.5) - 0.025 - 3)) < 1e-9);
    assert_true(score(&rw, &copy) < score(&rw, &honest));
    spoof.flags = KR_FLAG_IMPLAUSIBLE_SPEED;
    spoof.speedup = 4926;
    assert_true(score(&rw, &spoof) < score(&rw, &honest));
    kr_reward_free(rw.w);
}

static double score_json(const char *json, const facts *f)
{
    kr_reward *w;
    if (kr_reward_from_json(&w, ctx, json, 0) != KR_OK)
        fail_msg("%s: %s", json, kr_context_errmsg(ctx));
    kr_report *r = make(f);
    double v = NAN;
    if (kr_reward_score(&v, w, r) != KR_OK)
        fail_msg("%s: %s", json, kr_context_errmsg(ctx));
    kr_report_free(r);
    kr_reward_free(w);
    return v;
}

/* The mechanism from JSON: a ladder of your own, speed and bounds on a
 * term, floor flags replaced; and what is refused. */
static void configured(void **state)
{
    (void)state;
    facts pass = base, fail = base;
    fail.verdict = KR_VERDICT_INCORRECT;
    pass.speedup = 1e-3;
    const char *plain = "{\"terms\": [{\"term\": \"correct\", \"config\": {\"pass\": 1, \"fail\": 0}},"
                        " {\"term\": \"speedup\", \"weight\": 2, \"config\": {\"mode\": \"log\"}}]}";
    /* without a ladder, the plain sum (as before): a very slow pass below a fail */
    assert_true(fabs(score_json(plain, &pass) - (1 + 2 * log(0.01))) < 1e-12);
    const char *laddered =
        "{\"terms\": [{\"term\": \"correct\", \"config\": {\"pass\": 1, \"fail\": 0}},"
        " {\"term\": \"speedup\", \"weight\": 2, \"config\": {\"mode\": \"log\"}}],"
        " \"ladder\": {\"compile_error\": [-1, -1], \"failed\": [-1, 0], \"passed\": [0.5, 20]}}";
    assert_true(fabs(score_json(laddered, &pass) - 0.5) < 1e-12);
    assert_true(fabs(score_json(laddered, &fail) - 0) < 1e-12);
    /* a preset's ladder can be replaced, or turned off */
    facts slow = base;
    slow.speedup = 1e-3;
    assert_true(fabs(score_json("{\"preset\": \"makora\"}", &slow) - 0) < 1e-12);
    assert_true(fabs(score_json("{\"preset\": \"makora\", \"ladder\": \"none\"}", &slow) -
                     (10 + 5 * log(0.01) - 0.02)) < 1e-12);
    assert_true(fabs(score_json("{\"preset\": \"makora\", \"ladder\": {\"compile_error\": [-10, -10],"
                                " \"failed\": [-10, -5], \"passed\": [-5, 40]}}", &slow) -
                     -5) < 1e-12);
    /* floor flags: replaced by the configuration's list */
    facts flagged = base;
    flagged.speedup = 2;
    flagged.flags = KR_FLAG_SIDE_STREAM;
    assert_true(fabs(score_json("{\"preset\": \"kevin\"}", &flagged) - (0.3 + 0.01)) < 1e-12);
    assert_true(fabs(score_json("{\"preset\": \"kevin\", \"speed_floor_flags\": []}", &flagged) -
                     2.3) < 1e-12);
    flagged.flags = KR_FLAG_NOISY;
    assert_true(fabs(score_json("{\"preset\": \"kevin\", \"speed_floor_flags\": [\"noisy\"]}",
                                &flagged) - 0.31) < 1e-12);
    /* a term declared a speed term, with bounds; and a speed term declared not one */
    facts fast = base;
    fast.speedup = 50;
    fast.flags = KR_FLAG_SLOW;
    assert_true(fabs(score_json("{\"terms\": [{\"term\": \"metric\", \"speed\": true, \"bounds\": [0, 5],"
                                " \"config\": {\"metric\": \"memory_bytes\", \"scale\": 1e-8}}]}", &fast) -
                     0) < 1e-12);
    fast.flags = 0;
    assert_true(fabs(score_json("{\"terms\": [{\"term\": \"metric\", \"speed\": true, \"bounds\": [0, 5],"
                                " \"config\": {\"metric\": \"memory_bytes\", \"scale\": 1e-8}}]}", &fast) -
                     1) < 1e-12);
    fast.flags = KR_FLAG_SLOW;
    assert_true(fabs(score_json("{\"terms\": [{\"term\": \"speedup\", \"speed\": false}]}", &fast) - 50) <
                1e-12);
    /* bounds clip any term; the clip shows in the breakdown */
    assert_true(fabs(score_json("{\"terms\": [{\"term\": \"speedup\", \"speed\": false, \"bounds\": [0, 3]}]}",
                                &fast) - 3) < 1e-12);
    /* a metric term on a speedup reads the default range; on another timing
     * metric it needs bounds */
    fast.flags = 0;
    fast.speedup = 1e6;
    assert_true(fabs(score_json("{\"terms\": [{\"term\": \"metric\", \"config\": {\"metric\": \"speedup\"}}]}",
                                &fast) - 100) < 1e-12);
    /* a plugin's term declared a speed term is clipped and floored too */
    const char *plugin = getenv("KR_TEST_PLUGIN");
    if (plugin) {
        char json[4300];
        snprintf(json, sizeof json, "{\"plugins\": [\"%s\"], \"terms\": [{\"term\": \"plugin_lines\","
                 " \"speed\": true, \"bounds\": [-1, 0]}]}", plugin);
        facts lines = base;
        lines.code_lines = 300;
        assert_true(fabs(score_json(json, &lines) - -0.3) < 1e-12);
        lines.code_lines = 3000;
        assert_true(fabs(score_json(json, &lines) - -1) < 1e-12);
        lines.code_lines = 300;
        lines.flags = KR_FLAG_REFERENCE_COPY;
        assert_true(fabs(score_json(json, &lines) - -1) < 1e-12);
        snprintf(json, sizeof json, "{\"plugins\": [\"%s\"], \"terms\": [{\"term\": \"plugin_lines\","
                 " \"speed\": true}]}", plugin);
        kr_reward *b = (kr_reward *)0x1;
        assert_int_equal(kr_reward_from_json(&b, ctx, json, 0), KR_EINVAL);
        assert_contains(kr_context_errmsg(ctx), "'plugin_lines' pays for speed but has no finite bounds");
    }

    static const struct {
        const char *json, *expected;
    } bad[] = {
        {"{\"preset\": \"kevin\", \"ladder\": {\"compile_error\": [0, 0], \"failed\": [0, 1], \"passed\": [0.5, 2]}}",
         "failed reaches 1, above the lowest passed (0.5)"},
        {"{\"preset\": \"kevin\", \"ladder\": {\"compile_error\": [0, 0], \"failed\": [0, 0]}}",
         "\"ladder\" is \"none\" or"},
        {"{\"preset\": \"kevin\", \"ladder\": {\"compile_error\": [1, 0], \"failed\": [1, 1], \"passed\": [1, 2]}}",
         "compile_error is [1, 0]"},
        {"{\"preset\": \"kevin\", \"ladder\": \"off\"}", "\"ladder\" is \"none\" or"},
        {"{\"preset\": \"kevin\", \"speed_floor_flags\": [\"sparkly\"]}", "'sparkly' is not a flag"},
        {"{\"preset\": \"kevin\", \"speed_floor_flags\": \"slow\"}", "is an array of flag names"},
        {"{\"terms\": [{\"term\": \"metric\", \"config\": {\"metric\": \"time_us\"}}]}",
         "term 'metric' pays for speed but has no finite bounds"},
        {"{\"terms\": [{\"term\": \"memory\", \"speed\": true}]}",
         "term 'memory' pays for speed but has no finite bounds"},
        {"{\"terms\": [{\"term\": \"correct\", \"speed\": 1}]}", "\"speed\" is true or false"},
        {"{\"terms\": [{\"term\": \"correct\", \"bounds\": [1]}]}", "\"bounds\" is [lowest, highest]"},
        {"{\"terms\": [{\"term\": \"correct\", \"bounds\": [2, 1]}]}", "the lower first"},
        {"{\"terms\": [{\"term\": \"speedup\", \"bounds\": [200, 300]}]}", "hold none of its values"},
        {"{\"terms\": [{\"term\": \"speedup\", \"config\": {\"range\": [0, 10]}}]}", "\"range\" is [lowest, highest]"},
        {"{\"terms\": [{\"term\": \"speedup\", \"config\": {\"range\": [2, 1]}}]}", "\"range\" is [lowest, highest]"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        kr_reward *b = (kr_reward *)0x1;
        int rc = kr_reward_from_json(&b, ctx, bad[i].json, 0);
        if (rc == KR_OK || !contains(kr_context_errmsg(ctx), bad[i].expected))
            fail_msg("config %zu: %s \"%s\", expected \"...%s...\"", i, kr_status_name(rc),
                     kr_context_errmsg(ctx), bad[i].expected);
        assert_null(b);
    }
}

/* kr_reward_json gives a configuration that scores the same when read back. */
static void json_round_trip(void **state)
{
    (void)state;
    for (const char *const *p = kr_reward_presets(); *p; p++) {
        kr_reward *w, *back;
        assert_int_equal(kr_reward_preset(&w, ctx, *p), KR_OK);
        char *json;
        assert_int_equal(kr_reward_json(&json, w), KR_OK);
        if (kr_reward_from_json(&back, ctx, json, 0) != KR_OK)
            fail_msg("%s: its JSON does not read back: %s", *p, kr_context_errmsg(ctx));
        uint64_t s = 7;
        for (int i = 0; i < 500; i++) {
            facts f = base;
            f.verdict = verdicts[next(&s) % 10];
            f.speedup = pow(10, -4 + 8 * uniform(&s));
            f.speedup_low = f.speedup * 0.99;
            f.flags = next(&s) % 3 ? 0 : 1ull << (next(&s) % 16);
            kr_report *r = make(&f);
            double a, b;
            assert_int_equal(kr_reward_score(&a, w, r), KR_OK);
            assert_int_equal(kr_reward_score(&b, back, r), KR_OK);
            assert_true(a == b);
            kr_report_free(r);
        }
        kr_free(json);
        kr_reward_free(back);
        kr_reward_free(w);
    }
}

int main(void)
{
    ctx = test_context(NULL);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(order_on_grid),
        cmocka_unit_test(order_random),
        cmocka_unit_test(flags_floor_speed),
        cmocka_unit_test(reference_copy_below_honest),
        cmocka_unit_test(no_faster_pays_no_more_than_speed_one),
        cmocka_unit_test(self_timing_passes_no_threshold),
        cmocka_unit_test(issue_examples),
        cmocka_unit_test(configured),
        cmocka_unit_test(json_round_trip),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    kr_context_free(ctx);
    return rc;
}
