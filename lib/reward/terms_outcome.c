/* Built-in terms about the outcome: compiled, correct, verdict, flags, and
 * CUDA Agent's milestones. */
#include "reward/terms_impl.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- compiled / correct: two values ---- */

typedef struct {
    double yes, no;
} two_values;

static int init_two(const char *config, void **state, char *err, size_t n, const char *yes_key,
                    const char *no_key, double yes, double no)
{
    const char *const keys[] = {yes_key, no_key, NULL};
    kr__cfg c;
    if (kr__cfg_open(&c, config, err, n, keys) != 0)
        return -1;
    two_values *s = malloc(sizeof *s);
    if (s) {
        s->yes = kr__cfg_num(&c, yes_key, yes);
        s->no = kr__cfg_num(&c, no_key, no);
    }
    json_decref(c.root);
    if (!s || c.failed) {
        free(s);
        return -1;
    }
    *state = s;
    return 0;
}

static int init_compiled(const char *config, void **state, char *err, size_t n)
{
    return init_two(config, state, err, n, "ok", "fail", 1, 0);
}

static int eval_compiled(void *state, const kr_report *r, double *v, char *err, size_t n)
{
    (void)err;
    (void)n;
    const two_values *s = state;
    double compiled;
    int ok = kr_report_get(&compiled, r, "compiled") == KR_OK
                 ? compiled != 0
                 : kr_report_verdict(r) != KR_VERDICT_COMPILE_ERROR;
    *v = ok ? s->yes : s->no;
    return 0;
}

static int init_correct(const char *config, void **state, char *err, size_t n)
{
    return init_two(config, state, err, n, "pass", "fail", 1, 0);
}

static int eval_correct(void *state, const kr_report *r, double *v, char *err, size_t n)
{
    (void)err;
    (void)n;
    const two_values *s = state;
    *v = kr_report_verdict(r) == KR_VERDICT_PASSED ? s->yes : s->no;
    return 0;
}

/* ---- verdict: a value per verdict name ---- */

typedef struct {
    double value[16];
} verdict_values;

static int init_verdict(const char *config, void **state, char *err, size_t n)
{
    const char *const keys[] = {"passed", "incorrect", "compile_error", "invalid_plan",
                                "launch_error", "fault", "timeout", "not_run", "error",
                                "default", NULL};
    kr__cfg c;
    if (kr__cfg_open(&c, config, err, n, keys) != 0)
        return -1;
    verdict_values *s = malloc(sizeof *s);
    double dflt = kr__cfg_num(&c, "default", 0);
    for (int v = 0; s && v < 16; v++) {
        const char *name = kr_verdict_name(v);
        s->value[v] = strcmp(name, "unknown") ? kr__cfg_num(&c, name, dflt) : dflt;
    }
    json_decref(c.root);
    if (!s || c.failed) {
        free(s);
        return -1;
    }
    *state = s;
    return 0;
}

static int eval_verdict(void *state, const kr_report *r, double *v, char *err, size_t n)
{
    (void)err;
    (void)n;
    int verdict = kr_report_verdict(r);
    *v = ((verdict_values *)state)->value[verdict >= 0 && verdict < 16 ? verdict : 0];
    return 0;
}

/* ---- flags: a penalty per suspicious flag ---- */

typedef struct {
    double penalty[64];
} flag_penalties;

static int init_flags(const char *config, void **state, char *err, size_t n)
{
    const char *const keys[] = {"penalties", NULL};
    kr__cfg c;
    if (kr__cfg_open(&c, config, err, n, keys) != 0)
        return -1;
    flag_penalties *s = calloc(1, sizeof *s);
    json_t *p = json_object_get(c.root, "penalties");
    if (s && !p) { /* the flags that mean the measurement or the kernel cannot be trusted */
        const char *bad[] = {"implausible_speed", "side_stream", "timed_output_wrong",
                             "out_of_bounds", "input_mutated", "race"};
        for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
            s->penalty[__builtin_ctzll(kr_flag_from_name(bad[i]))] = -1;
    }
    const char *key;
    json_t *v;
    if (s && p && !json_is_object(p)) {
        snprintf(err, n, "\"penalties\" maps flag names to values");
        c.failed = 1;
    }
    json_object_foreach(p, key, v) {
        uint64_t f = kr_flag_from_name(key);
        if (!s || !f || !json_is_number(v)) {
            snprintf(err, n, "penalties: '%s' is not a flag with a number", key);
            c.failed = 1;
            break;
        }
        s->penalty[__builtin_ctzll(f)] = json_number_value(v);
    }
    json_decref(c.root);
    if (!s || c.failed) {
        free(s);
        return -1;
    }
    *state = s;
    return 0;
}

static int eval_flags(void *state, const kr_report *r, double *v, char *err, size_t n)
{
    (void)err;
    (void)n;
    const flag_penalties *s = state;
    uint64_t f = kr_report_flags(r);
    *v = 0;
    for (int i = 0; i < 64; i++)
        if (f & (1ull << i))
            *v += s->penalty[i];
    return 0;
}

/* ---- milestones (CUDA Agent): -1 fails, 1 correct, 2 faster than eager,
 * 3 faster than eager and compiled ---- */

typedef struct {
    double fail, correct, faster, fastest, margin;
} milestones_cfg;

static int init_milestones(const char *config, void **state, char *err, size_t n)
{
    const char *const keys[] = {"fail", "correct", "faster", "fastest", "margin", NULL};
    kr__cfg c;
    if (kr__cfg_open(&c, config, err, n, keys) != 0)
        return -1;
    milestones_cfg *s = malloc(sizeof *s);
    if (s) {
        s->fail = kr__cfg_num(&c, "fail", -1);
        s->correct = kr__cfg_num(&c, "correct", 1);
        s->faster = kr__cfg_num(&c, "faster", 2);
        s->fastest = kr__cfg_num(&c, "fastest", 3);
        s->margin = kr__cfg_num(&c, "margin", 1.05);
    }
    json_decref(c.root);
    if (!s || c.failed) {
        free(s);
        return -1;
    }
    *state = s;
    return 0;
}

static int eval_milestones(void *state, const kr_report *r, double *v, char *err, size_t n)
{
    (void)err;
    (void)n;
    const milestones_cfg *s = state;
    if (kr_report_verdict(r) != KR_VERDICT_PASSED) {
        *v = s->fail;
        return 0;
    }
    double eager = 0, compiled = 0;
    int has_eager = kr_report_get(&eager, r, "speedup") == KR_OK;
    int has_compiled = kr_report_get(&compiled, r, "speedup_vs_compiled") == KR_OK;
    if (has_eager && eager > s->margin)
        *v = has_compiled && compiled > s->margin ? s->fastest : s->faster;
    else
        *v = s->correct;
    return 0;
}

const kr_term_def kr__term_compiled = {
    KR_TERM_VERSION, 0, "compiled",
    "ok if the candidate compiled, else fail",
    init_compiled, eval_compiled, kr__term_free};
const kr_term_def kr__term_correct = {
    KR_TERM_VERSION, 0, "correct",
    "pass if verification passed, else fail",
    init_correct, eval_correct, kr__term_free};
const kr_term_def kr__term_verdict = {
    KR_TERM_VERSION, 0, "verdict",
    "a value per verdict (passed, incorrect, compile_error, ...)",
    init_verdict, eval_verdict, kr__term_free};
const kr_term_def kr__term_flags = {
    KR_TERM_VERSION, 0, "flags",
    "the sum of penalties for suspicious flags",
    init_flags, eval_flags, kr__term_free};
const kr_term_def kr__term_milestones = {
    KR_TERM_VERSION, 0, "milestones",
    "CUDA Agent milestones: fail, correct, faster than eager, than compiled",
    init_milestones, eval_milestones, kr__term_free};

/* Milestones pay for speed above `correct`; as slow as can be, a passing
 * candidate gets the least of correct, faster and fastest. */
static int milestones_speed(const void *state)
{
    (void)state;
    return 1;
}

static void milestones_bounds(const void *state, double *lo, double *hi)
{
    const milestones_cfg *s = state;
    double v[] = {s->fail, s->correct, s->faster, s->fastest};
    *lo = *hi = v[0];
    for (size_t i = 1; i < 4; i++) {
        *lo = v[i] < *lo ? v[i] : *lo;
        *hi = v[i] > *hi ? v[i] : *hi;
    }
}

static double milestones_floor(const void *state, const kr_report *r)
{
    const milestones_cfg *s = state;
    if (kr_report_verdict(r) != KR_VERDICT_PASSED)
        return s->fail;
    double v = s->correct < s->faster ? s->correct : s->faster;
    return v < s->fastest ? v : s->fastest;
}

/* Without speedup_vs_compiled (the library times no torch.compile
 * baseline: the caller sets it) the top milestone is never reached. */
static size_t milestones_needs(const void *state, kr__need *out)
{
    (void)state;
    out[0] = (kr__need){"speedup", "not faster than eager: the correct milestone at most"};
    out[1] = (kr__need){"speedup_vs_compiled",
                        "not faster than torch.compile: the top milestone is not reached"};
    return 2;
}

const kr__term_traits kr__traits_milestones = {&kr__term_milestones, milestones_speed,
                                               milestones_bounds, milestones_floor,
                                               milestones_needs};

static size_t compiled_needs(const void *state, kr__need *out)
{
    (void)state;
    out[0] = (kr__need){"compiled", "the verdict says: compiled unless compile_error"};
    return 1;
}

const kr__term_traits kr__traits_compiled = {&kr__term_compiled, NULL, NULL, NULL,
                                             compiled_needs};
