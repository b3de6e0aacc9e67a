/* Rewards: private layout and the built-in terms' registry. */
#ifndef KR_REWARD_IMPL_H
#define KR_REWARD_IMPL_H

#include "kreward/reward.h"
#include "driver/context_impl.h"
#include "report/report_impl.h"

/* A report metric a term reads. missing == NULL: the term cannot score a
 * report without it (scoring fails naming the term and the metric); else
 * what a missing value reads as, in words (docs/rewards.md, kr_reward_json). */
typedef struct kr__need {
    const char *metric;
    const char *missing;
} kr__need;
#define KR__MAX_NEEDS 4

/* What scoring knows of a built-in term beyond its table (terms.c). */
typedef struct kr__term_traits {
    const kr_term_def *def;
    /* non-zero when, with this config, the term pays for speed (reads timing) */
    int (*speed)(const void *state);
    /* the lowest and highest value it gives a candidate it counts for */
    void (*bounds)(const void *state, double *lo, double *hi);
    /* its value for this report were the candidate as slow as can be (NULL: lo) */
    double (*floor)(const void *state, const kr_report *report);
    /* the metrics it reads, at most KR__MAX_NEEDS (NULL: none) */
    size_t (*needs)(const void *state, kr__need *out);
} kr__term_traits;

typedef struct kr__added_term {
    kr_term_def def;          /* copied prefix, newer fields zeroed */
    void *state;
    char *config;             /* as given, for kr_reward_json */
    double weight;
    int gate;
    const kr__term_traits *traits; /* built-in terms only */
    int speed;                /* a speed term: clipped, floored by the floor flags */
    double lo, hi;            /* its value is clipped to [lo, hi] (infinite: not clipped) */
} kr__added_term;

/* Per-term settings from a JSON configuration (kr__reward_add_term). */
typedef struct kr__term_opts {
    int speed;                /* -1: the term's own; 0 or 1: given */
    int has_bounds;
    double lo, hi;
} kr__term_opts;

/* The reward's order: the total of each class of verdict is clamped to
 * [lo, hi], the ranges checked at configuration time to be ordered
 * (compile_error below failed below passed). */
enum { KR__CLASS_COMPILE_ERROR = 0, KR__CLASS_FAILED = 1, KR__CLASS_PASSED = 2, KR__NUM_CLASSES };
typedef struct kr__ladder {
    int on;
    double lo[KR__NUM_CLASSES], hi[KR__NUM_CLASSES];
} kr__ladder;

/* The speed credit: speed terms pay between their floor and their value in
 * proportion to a report metric (its value over full_at, in [0, 1]); a
 * report without the metric keeps full credit. By default custom_share,
 * full at 0.5: a ModelNew candidate whose own kernels did a tenth of its GPU
 * time keeps a fifth of its speed pay (docs/rewards.md, "Order and speed"). */
typedef struct kr__credit {
    int on;
    char metric[64];
    double full_at;
} kr__credit;
/* The credit a report earns under c: 1 without the metric. */
double kr__speed_credit(const kr__credit *c, const kr_report *report);

typedef struct kr__flag_override {
    uint64_t flag;
    double value;
} kr__flag_override;

struct kr_reward {
    kr_context *ctx;
    size_t num_known;
    kr_term_def *known;       /* registered terms (plugins, callers) */
    size_t num_terms;
    kr__added_term *terms;
    int has_fallback;
    double fallback;
    size_t num_overrides;
    kr__flag_override overrides[32];
    void *plugins[16];        /* dlopen handles, closed on free */
    size_t num_plugins;
    uint64_t floor_flags;     /* any of these: every speed term scores its floor */
    kr__ladder ladder;
    kr__credit credit;        /* how much of its speed pay a candidate keeps */
};

/* The built-in term tables, NULL-terminated. */
const kr_term_def *const *kr__builtin_terms(void);
/* The traits of a built-in term table (by address), NULL for others. */
const kr__term_traits *kr__builtin_traits(const kr_term_def *def);
/* The metrics an added term reads (none for terms of the caller's: their
 * table cannot say yet). */
size_t kr__term_needs(const kr__added_term *t, kr__need *out);
int kr__reward_override(kr_reward *r, uint64_t flag, double value);
/* kr_reward_add with the settings a JSON configuration may give (o may be
 * NULL: the term's own). */
int kr__reward_add_term(kr_reward *r, const char *term, const char *config, double weight,
                        int gate, const kr__term_opts *o);
/* The flags that floor speed terms unless a configuration says otherwise. */
uint64_t kr__default_floor_flags(void);
/* Checks and sets the ladder; KR_EINVAL with a message when not ordered. */
int kr__reward_set_ladder(kr_reward *r, const kr__ladder *ladder);
/* The class of a verdict (KR__CLASS_*): not_run, error and none are failed. */
int kr__verdict_class(int verdict);
/* KR_EINVAL with a message when r was made by another context than ctx. */
int kr__reward_check_owner(kr_context *ctx, const kr_reward *r);

#endif
