/* The built-in reward terms' registry: every term in the order presets
 * list them, and the traits (speed terms, gates) the scorer asks about. The
 * terms themselves: terms_outcome.c (did it compile, pass, which verdict,
 * flags, milestones) and terms_speed.c (speedup, thresholds, metrics,
 * roofline, memory, code size), terms_counters.c (dram_bandwidth, occupancy);
 * their shared helpers term_helpers.c;
 * docs/rewards.md lists them. */
#include "reward/terms_impl.h"

#include <stddef.h>

const kr_term_def *const *kr__builtin_terms(void)
{
    static const kr_term_def *const list[] = {
        &kr__term_compiled,
        &kr__term_correct,
        &kr__term_verdict,
        &kr__term_speedup,
        &kr__term_threshold,
        &kr__term_metric_def,
        &kr__term_roofline,
        &kr__term_memory,
        &kr__term_code_size,
        &kr__term_bandwidth,
        &kr__term_occupancy,
        &kr__term_flags,
        &kr__term_milestones,
        NULL,
    };
    return list;
}

const kr__term_traits *kr__builtin_traits(const kr_term_def *def)
{
    static const kr__term_traits *const list[] = {
        &kr__traits_speedup, &kr__traits_threshold, &kr__traits_metric, &kr__traits_roofline,
        &kr__traits_milestones, &kr__traits_memory, &kr__traits_code_size, &kr__traits_compiled,
        &kr__traits_bandwidth, &kr__traits_occupancy,
    };
    for (size_t i = 0; i < sizeof list / sizeof list[0]; i++)
        if (list[i]->def == def)
            return list[i];
    return NULL;
}

size_t kr__term_needs(const kr__added_term *t, kr__need *out)
{
    return t->traits && t->traits->needs ? t->traits->needs(t->state, out) : 0;
}
