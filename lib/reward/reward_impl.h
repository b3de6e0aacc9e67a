/* Rewards: private layout and the built-in terms' registry. */
#ifndef KR_REWARD_IMPL_H
#define KR_REWARD_IMPL_H

#include "kreward/reward.h"
#include "driver/context_impl.h"
#include "report/report_impl.h"

typedef struct kr__added_term {
    kr_term_def def;          /* copied prefix, newer fields zeroed */
    void *state;
    char *config;             /* as given, for kr_reward_json */
    double weight;
    int gate;
} kr__added_term;

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
};

/* The built-in term tables, NULL-terminated. */
const kr_term_def *const *kr__builtin_terms(void);
int kr__reward_override(kr_reward *r, uint64_t flag, double value);
/* KR_EINVAL with a message when r was made by another context than ctx. */
int kr__reward_check_owner(kr_context *ctx, const kr_reward *r);

#endif
