/* libkreward: rewards. A reward is a weighted sum of terms; each term reads
 * a report and returns a number. Terms are versioned tables (built-in, from
 * a shared-object plugin, or your own), configured in C or from JSON, with
 * presets for published reward schemes (docs/rewards.md).
 *
 * A reward belongs to the context it was made with (its errors are that
 * context's): free it before the context and score only on the context's
 * thread. Terms may keep state between calls. */
#ifndef KREWARD_REWARD_H
#define KREWARD_REWARD_H

#include "context.h"
#include "report.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kr_reward kr_reward;

/* The term table. Version first; fields are only ever appended. The library
 * copies the prefix it knows, calls optional functions only when present,
 * and refuses a table newer than itself (a silently skipped function could
 * change rewards). */
#define KR_TERM_VERSION 1u
typedef struct kr_term_def {
    uint32_t version;         /* KR_TERM_VERSION the term was built against */
    uint32_t flags;           /* KR_TERM_* */
    const char *name;         /* unique within a reward's registry */
    const char *description;
    /* optional: read the term's JSON config (may be NULL: defaults) */
    int (*init)(const char *config_json, void **state, char *errbuf, size_t errbuf_size);
    /* required: the term's value for a report; 0, or non-zero with a message */
    int (*evaluate)(void *state, const kr_report *report, double *value, char *errbuf,
                    size_t errbuf_size);
    /* optional */
    void (*destroy)(void *state);
} kr_term_def;

/* A speed or quality term: by default it counts only for correct candidates. */
#define KR_TERM_NEEDS_CORRECT 0x1u

/* When a term counts; a term that does not count contributes 0. */
enum kr_gate {
    KR_GATE_DEFAULT = 0,      /* from the term's flags */
    KR_GATE_ALWAYS = 1,
    KR_GATE_COMPILED = 2,     /* only if the candidate compiled */
    KR_GATE_CORRECT = 3,      /* only if the candidate passed verification */
};

/* A shared-object plugin exports one symbol, KR_PLUGIN_ENTRY, a function
 * returning this description of its terms. */
#define KR_PLUGIN_VERSION 1u
typedef struct kr_plugin_info {
    uint32_t version;         /* KR_PLUGIN_VERSION the plugin was built against */
    uint32_t num_terms;
    const kr_term_def *terms; /* num_terms tables of term_size bytes each */
    size_t term_size;         /* sizeof(kr_term_def) when the plugin was built */
    const char *name;
} kr_plugin_info;
#define KR_PLUGIN_ENTRY "kreward_plugin"
typedef const kr_plugin_info *(*kr_plugin_entry_fn)(void);

KR_API int kr_reward_new(kr_reward **out, kr_context *ctx);
KR_API void kr_reward_free(kr_reward *reward);

/* Makes a term known by name (def_size: sizeof(kr_term_def) as the caller
 * compiled it). Built-in terms are always known. */
KR_API int kr_reward_register(kr_reward *reward, const kr_term_def *def, size_t def_size);
/* Loads a plugin and registers its terms. */
KR_API int kr_reward_load_plugin(kr_reward *reward, const char *path);
/* Adds a known term with its config (JSON text or NULL), weight and gate. */
KR_API int kr_reward_add(kr_reward *reward, const char *term, const char *config_json,
                         double weight, int gate);
/* A reward that is NaN or infinite is an error naming the term, unless a
 * fallback is set: then the reward is the fallback. */
KR_API int kr_reward_set_fallback(kr_reward *reward, double fallback);

/* From a JSON configuration (docs/rewards.md) or a preset name ("makora",
 * "kernelgym", "kernelgym_default", "kernelgym_tiers", "cuda_agent", "kevin",
 * "fast_p"). A plugin path in the JSON is loaded. */
KR_API int kr_reward_from_json(kr_reward **out, kr_context *ctx, const char *json, size_t len);
KR_API int kr_reward_preset(kr_reward **out, kr_context *ctx, const char *preset);
/* Names of the presets, NULL-terminated. */
KR_API const char *const *kr_reward_presets(void);

/* Scores a report: writes the reward and the per-term breakdown into it and
 * into *value (may be NULL). On a term error, KR_EPLUGIN names the term. */
KR_API int kr_reward_score(double *value, kr_reward *reward, kr_report *report);
/* The reward's configuration as JSON (caller frees). */
KR_API int kr_reward_json(char **json_out, const kr_reward *reward);

#ifdef __cplusplus
}
#endif
#endif
