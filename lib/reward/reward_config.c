/* Rewards from JSON, and the presets for published reward schemes (their
 * sources and readings are in docs/rewards.md). */
#include "reward/reward_impl.h"
#include "common/strbuf.h"

#include <jansson.h>
#include <math.h>
#include <string.h>

/* Every preset has a ladder (the total's range per class of verdict,
 * ordered) and clipped speed terms; the default floor flags apply. */
static const struct {
    const char *name, *json;
} presets[] = {
    /* Makora (RL fine-tuned GPT-5 for Triton): 10 correct, -10 compile
     * error, -5 failed tests; 5 ln(speedup), speedup read in [0.01, 100];
     * 2 * (-0.1 * GB used); -0.01 per line beyond 100. A passing candidate
     * scores at least 0, a failing one -10 to -5 */
    {"makora",
     "{\"terms\": ["
     "{\"term\": \"verdict\", \"weight\": 1, \"config\": {\"passed\": 10, \"compile_error\": -10, \"default\": -5}},"
     "{\"term\": \"speedup\", \"weight\": 5, \"config\": {\"mode\": \"log\", \"range\": [0.01, 100]}},"
     "{\"term\": \"memory\", \"weight\": 2, \"config\": {\"per_gb\": -0.1}},"
     "{\"term\": \"code_size\", \"weight\": 1, \"gate\": \"compiled\", \"config\": {\"free_lines\": 100, \"per_line\": -0.01}}],"
     " \"ladder\": {\"compile_error\": [-10, -10], \"failed\": [-10, -5], \"passed\": [0, 35]}}"},
    /* KernelGYM / Dr.Kernel recipe: 0.5 correct + 0.5 min(speedup, 3) +
     * 0.5 time_coverage * correct; any failure or decoy scores 0.
     * time_coverage is the caller's to set (nothing here measures it): a
     * report without it gets no coverage pay, never a constant 0.5 */
    {"kernelgym",
     "{\"terms\": ["
     "{\"term\": \"correct\", \"weight\": 0.5},"
     "{\"term\": \"speedup\", \"weight\": 0.5, \"config\": {\"mode\": \"clipped\", \"max\": 3}},"
     "{\"term\": \"metric\", \"weight\": 0.5, \"gate\": \"correct\", \"config\": {\"metric\": \"time_coverage\", \"min\": 0, \"max\": 1}}],"
     " \"flag_overrides\": {\"implausible_speed\": 0, \"side_stream\": 0},"
     " \"ladder\": {\"compile_error\": [0, 0], \"failed\": [0, 0], \"passed\": [0, 2.5]}}"},
    /* KernelGYM default yaml: 0.5 correct + 0.5 [speedup >= 1.01], on the
     * conservative end of the speedup interval */
    {"kernelgym_default",
     "{\"terms\": ["
     "{\"term\": \"correct\", \"weight\": 0.5},"
     "{\"term\": \"threshold\", \"weight\": 0.5, \"config\": {\"metric\": \"speedup_low\", \"threshold\": 1.01}}],"
     " \"ladder\": {\"compile_error\": [0, 0], \"failed\": [0, 0], \"passed\": [0.5, 1]}}"},
    /* KernelGYM "like_kernel" tiers: compile fail -0.5, incorrect -0.3,
     * slower -0.1, 0.2/0.4/0.6/0.8/1.0 at >= 1/1.2/1.5/2/3x (conservative
     * end of the interval); decoy -1 in KernelGYM, here -0.3 (a passing
     * candidate never scores below a failing one) */
    {"kernelgym_tiers",
     "{\"terms\": ["
     "{\"term\": \"verdict\", \"weight\": 1, \"config\": {\"passed\": 0, \"compile_error\": -0.5, \"default\": -0.3}},"
     "{\"term\": \"speedup\", \"weight\": 1, \"config\": {\"mode\": \"tiers\", \"metric\": \"speedup_low\", \"below\": -0.1,"
     " \"tiers\": [[1.0, 0.2], [1.2, 0.4], [1.5, 0.6], [2.0, 0.8], [3.0, 1.0]]}}],"
     " \"flag_overrides\": {\"implausible_speed\": -0.3, \"side_stream\": -0.3},"
     " \"ladder\": {\"compile_error\": [-0.5, -0.5], \"failed\": [-0.3, -0.3], \"passed\": [-0.3, 1]}}"},
    /* CUDA Agent milestones: -1 fails, 1 correct, 2 > 5 % faster than eager,
     * 3 > 5 % faster than eager and torch.compile */
    {"cuda_agent",
     "{\"terms\": [{\"term\": \"milestones\", \"weight\": 1}],"
     " \"ladder\": {\"compile_error\": [-1, -1], \"failed\": [-1, -1], \"passed\": [1, 3]}}"},
    /* Kevin-32B: 0.3 correct + speedup * correct, speedup read in [0.01,
     * 100] (the multi-turn return with gamma 0.4 is the trainer's) */
    {"kevin",
     "{\"terms\": ["
     "{\"term\": \"correct\", \"weight\": 0.3},"
     "{\"term\": \"speedup\", \"weight\": 1, \"config\": {\"mode\": \"linear\", \"range\": [0.01, 100]}}],"
     " \"ladder\": {\"compile_error\": [0, 0], \"failed\": [0, 0], \"passed\": [0.3, 100.3]}}"},
    /* KernelBench-format training (this library's ModelNew reward before
     * the reward table took it over): 0.5 for a correct candidate, rising
     * with log2 of the speedup to 1.0 at 4x; no speed pay where no kernel
     * of its own did the work (torch_fallback, unattributed) or its clock
     * disagreed (timing_mismatch), in proportion to custom_share below one
     * half (the default speed credit) */
    {"kernelbench",
     "{\"terms\": ["
     "{\"term\": \"correct\", \"weight\": 0.5},"
     "{\"term\": \"speedup\", \"weight\": 0.25, \"config\": {\"mode\": \"log\", \"base\": 2, \"range\": [1, 4]}}],"
     " \"ladder\": {\"compile_error\": [0, 0], \"failed\": [0, 0], \"passed\": [0.5, 1]}}"},
    /* KernelBench fast_p at p = 1: correct and faster than the baseline, on
     * the conservative end of the speedup interval */
    {"fast_p",
     "{\"terms\": [{\"term\": \"threshold\", \"weight\": 1,"
     " \"config\": {\"metric\": \"speedup_low\", \"threshold\": 1.0, \"strict\": true}}],"
     " \"ladder\": {\"compile_error\": [0, 0], \"failed\": [0, 0], \"passed\": [0, 1]}}"},
};

const char *const *kr_reward_presets(void)
{
    static const char *names[sizeof presets / sizeof presets[0] + 1];
    for (size_t i = 0; i < sizeof presets / sizeof presets[0]; i++)
        names[i] = presets[i].name;
    return names;
}

static int gate_from(const char *name)
{
    if (!name)
        return KR_GATE_DEFAULT;
    if (strcmp(name, "always") == 0)
        return KR_GATE_ALWAYS;
    if (strcmp(name, "compiled") == 0)
        return KR_GATE_COMPILED;
    if (strcmp(name, "correct") == 0)
        return KR_GATE_CORRECT;
    if (strcmp(name, "default") == 0)
        return KR_GATE_DEFAULT;
    return -1;
}

static int add_term(kr_reward *r, json_t *t, size_t i)
{
    kr_context *ctx = r->ctx;
    /* "needs" is what kr_reward_json writes for the reader; it follows from
     * the term and its config, so reading it back changes nothing */
    static const char *const keys[] = {"term", "weight", "gate", "config", "speed", "bounds",
                                       "needs"};
    const char *key;
    json_t *v;
    json_object_foreach(t, key, v) {
        int known = 0;
        for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++)
            known |= strcmp(key, keys[k]) == 0;
        if (!known)
            return kr__fail(ctx, KR_EPARSE, "terms[%zu]: unknown field '%s' (term, weight, gate, "
                            "config, speed, bounds)", i, key);
    }
    kr__term_opts o = {-1, 0, 0, 0};
    json_t *speed = json_object_get(t, "speed"), *bounds = json_object_get(t, "bounds");
    if (speed && !json_is_boolean(speed))
        return kr__fail(ctx, KR_EPARSE, "terms[%zu]: \"speed\" is true or false", i);
    if (speed)
        o.speed = json_is_true(speed);
    if (bounds && (json_array_size(bounds) != 2 || !json_is_number(json_array_get(bounds, 0)) ||
                   !json_is_number(json_array_get(bounds, 1))))
        return kr__fail(ctx, KR_EPARSE, "terms[%zu]: \"bounds\" is [lowest, highest]", i);
    if (bounds) {
        o.has_bounds = 1;
        o.lo = json_number_value(json_array_get(bounds, 0));
        o.hi = json_number_value(json_array_get(bounds, 1));
    }
    const char *name = json_string_value(json_object_get(t, "term"));
    json_t *w = json_object_get(t, "weight");
    int gate = gate_from(json_string_value(json_object_get(t, "gate")));
    if (!name)
        return kr__fail(ctx, KR_EPARSE, "terms[%zu]: needs \"term\" (a term name)", i);
    if (w && !json_is_number(w))
        return kr__fail(ctx, KR_EPARSE, "terms[%zu]: \"weight\" must be a number", i);
    if (gate < 0 || (json_object_get(t, "gate") && !json_is_string(json_object_get(t, "gate"))))
        return kr__fail(ctx, KR_EPARSE, "terms[%zu]: \"gate\" is always, compiled, correct or "
                        "default", i);
    json_t *cfg = json_object_get(t, "config");
    char *cfg_text = cfg ? json_dumps(cfg, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
    int rc = kr__reward_add_term(r, name, cfg_text, w ? json_number_value(w) : 1.0, gate, &o);
    free(cfg_text);
    if (rc != KR_OK) {
        char msg[1100];
        snprintf(msg, sizeof msg, "terms[%zu]: %s", i, kr_context_errmsg(ctx));
        return kr__fail(ctx, rc, "%s", msg);
    }
    return KR_OK;
}

/* "ladder": {"compile_error": [lo, hi], "failed": [...], "passed": [...]}
 * or "none"; "speed_credit": {"metric", "full_at"} or "none";
 * "speed_floor_flags": [flag names]. Each replaces a preset's. */
static int configure_order(kr_reward *r, json_t *root)
{
    kr_context *ctx = r->ctx;
    json_t *ladder = json_object_get(root, "ladder");
    static const char *const classes[] = {"compile_error", "failed", "passed"};
    if (ladder && json_is_string(ladder) && strcmp(json_string_value(ladder), "none") == 0) {
        kr__ladder off = {0};
        kr__reward_set_ladder(r, &off);
    } else if (ladder) {
        kr__ladder l = {1, {0}, {0}};
        int ok = json_is_object(ladder) && json_object_size(ladder) == KR__NUM_CLASSES;
        for (int c = 0; ok && c < KR__NUM_CLASSES; c++) {
            json_t *range = json_object_get(ladder, classes[c]);
            ok = json_array_size(range) == 2 && json_is_number(json_array_get(range, 0)) &&
                 json_is_number(json_array_get(range, 1));
            l.lo[c] = json_number_value(json_array_get(range, 0));
            l.hi[c] = json_number_value(json_array_get(range, 1));
        }
        if (!ok)
            return kr__fail(ctx, KR_EPARSE, "\"ladder\" is \"none\" or {\"compile_error\": "
                            "[lo, hi], \"failed\": [lo, hi], \"passed\": [lo, hi]}");
        if (kr__reward_set_ladder(r, &l) != KR_OK) {
            char msg[1100];
            snprintf(msg, sizeof msg, "%s", kr_context_errmsg(ctx));
            return kr__fail(ctx, KR_EPARSE, "%s", msg);
        }
    }
    json_t *credit = json_object_get(root, "speed_credit");
    if (credit && json_is_string(credit) && strcmp(json_string_value(credit), "none") == 0) {
        r->credit.on = 0;
    } else if (credit) {
        json_t *m = json_object_get(credit, "metric"), *full = json_object_get(credit, "full_at");
        size_t known = (m != NULL) + (full != NULL);
        if (!json_is_object(credit) || json_object_size(credit) != known ||
            (m && (!json_is_string(m) || !*json_string_value(m) ||
                   strlen(json_string_value(m)) >= sizeof r->credit.metric)) ||
            (full && (!json_is_number(full) || !(json_number_value(full) > 0) ||
                      !isfinite(json_number_value(full)))))
            return kr__fail(ctx, KR_EPARSE, "\"speed_credit\" is \"none\" or {\"metric\": "
                            "name, \"full_at\": a number > 0}");
        r->credit.on = 1;
        if (m)
            snprintf(r->credit.metric, sizeof r->credit.metric, "%s", json_string_value(m));
        if (full)
            r->credit.full_at = json_number_value(full);
    }
    json_t *floor = json_object_get(root, "speed_floor_flags");
    if (floor && !json_is_array(floor))
        return kr__fail(ctx, KR_EPARSE, "\"speed_floor_flags\" is an array of flag names");
    if (floor) {
        uint64_t f = 0;
        for (size_t i = 0; i < json_array_size(floor); i++) {
            const char *name = json_string_value(json_array_get(floor, i));
            uint64_t bit = name ? kr_flag_from_name(name) : 0;
            if (!bit)
                return kr__fail(ctx, KR_EPARSE, "speed_floor_flags[%zu]: '%s' is not a flag", i,
                                name ? name : "(not a string)");
            f |= bit;
        }
        r->floor_flags = f;
    }
    return KR_OK;
}

static int configure(kr_reward *r, json_t *root)
{
    kr_context *ctx = r->ctx;
    if (!json_is_object(root))
        return kr__fail(ctx, KR_EPARSE, "a reward configuration is a JSON object");
    static const char *const keys[] = {"preset", "terms", "plugins", "fallback", "flag_overrides",
                                       "version", "ladder", "speed_floor_flags",
                                       "speed_credit"};
    const char *key;
    json_t *v;
    json_object_foreach(root, key, v) {
        int known = 0;
        for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++)
            known |= strcmp(key, keys[k]) == 0;
        if (!known)
            return kr__fail(ctx, KR_EPARSE, "unknown field '%s' (preset, terms, plugins, fallback, "
                            "flag_overrides, ladder, speed_floor_flags, speed_credit)", key);
    }
    json_t *version = json_object_get(root, "version");
    if (version && (!json_is_integer(version) || json_integer_value(version) != 1))
        return kr__fail(ctx, KR_EVERSION, "reward configuration version %lld is not supported "
                        "(this library reads version 1)", (long long)json_integer_value(version));
    json_t *preset = json_object_get(root, "preset");
    if (preset) {
        const char *name = json_string_value(preset);
        size_t i = 0;
        while (name && i < sizeof presets / sizeof presets[0] && strcmp(presets[i].name, name))
            i++;
        if (!name || i == sizeof presets / sizeof presets[0]) {
            char known[256] = "";
            size_t used = 0;
            for (size_t k = 0; k < sizeof presets / sizeof presets[0] && used < sizeof known; k++)
                used += (size_t)snprintf(known + used, sizeof known - used, "%s%s",
                                         k ? ", " : "", presets[k].name);
            return kr__fail(ctx, KR_ENOTFOUND, "unknown preset '%s' (the presets: %s)",
                            name ? name : "(not a string)", known);
        }
        json_t *p = json_loads(presets[i].json, 0, NULL);
        int rc = configure(r, p);
        json_decref(p);
        if (rc != KR_OK)
            return rc;
    }
    json_t *plugins = json_object_get(root, "plugins");
    if (plugins && !json_is_array(plugins))
        return kr__fail(ctx, KR_EPARSE, "\"plugins\" is an array of shared-object paths");
    for (size_t i = 0; i < json_array_size(plugins); i++) {
        const char *path = json_string_value(json_array_get(plugins, i));
        int rc = path ? kr_reward_load_plugin(r, path)
                      : kr__fail(ctx, KR_EPARSE, "plugins[%zu] is not a path", i);
        if (rc != KR_OK)
            return rc;
    }
    json_t *terms = json_object_get(root, "terms");
    if (terms && !json_is_array(terms))
        return kr__fail(ctx, KR_EPARSE, "\"terms\" is an array of {term, weight, gate, config}");
    for (size_t i = 0; i < json_array_size(terms); i++) {
        int rc = json_is_object(json_array_get(terms, i))
                     ? add_term(r, json_array_get(terms, i), i)
                     : kr__fail(ctx, KR_EPARSE, "terms[%zu] is not an object", i);
        if (rc != KR_OK)
            return rc;
    }
    json_t *fallback = json_object_get(root, "fallback");
    if (fallback && (!json_is_number(fallback) ||
                     kr_reward_set_fallback(r, json_number_value(fallback)) != KR_OK))
        return kr__fail(ctx, KR_EPARSE, "\"fallback\" must be a finite number");
    json_t *ov = json_object_get(root, "flag_overrides");
    if (ov && !json_is_object(ov))
        return kr__fail(ctx, KR_EPARSE, "\"flag_overrides\" maps flag names to rewards");
    json_object_foreach(ov, key, v) {
        uint64_t f = kr_flag_from_name(key);
        if (!f || !json_is_number(v))
            return kr__fail(ctx, KR_EPARSE, "flag_overrides: '%s' is not a flag with a number", key);
        int rc = kr__reward_override(r, f, json_number_value(v));
        if (rc != KR_OK)
            return rc;
    }
    int rc = configure_order(r, root);
    if (rc != KR_OK)
        return rc;
    if (!r->num_terms)
        return kr__fail(ctx, KR_EPARSE, "the reward has no terms");
    return KR_OK;
}

int kr_reward_from_json(kr_reward **out, kr_context *ctx, const char *json, size_t len)
{
    if (!ctx || !out || !json)
        return KR_EINVAL;
    *out = NULL;
    kr__clear_error(ctx);
    json_error_t e;
    json_t *root = json_loadb(json, len ? len : strlen(json), JSON_REJECT_DUPLICATES, &e);
    if (!root)
        return kr__fail(ctx, KR_EPARSE, "reward configuration:%d:%d: %s", e.line, e.column, e.text);
    kr_reward *r;
    int rc = kr_reward_new(&r, ctx);
    if (rc == KR_OK)
        rc = configure(r, root);
    json_decref(root);
    if (rc != KR_OK) {
        kr_reward_free(r);
        return rc;
    }
    *out = r;
    return KR_OK;
}

int kr_reward_preset(kr_reward **out, kr_context *ctx, const char *preset)
{
    if (!ctx || !out || !preset)
        return KR_EINVAL;
    char json[256];
    json_t *s = json_string(preset);
    char *quoted = json_dumps(s, JSON_ENCODE_ANY);
    snprintf(json, sizeof json, "{\"preset\": %s}", quoted ? quoted : "\"\"");
    free(quoted);
    json_decref(s);
    return kr_reward_from_json(out, ctx, json, 0);
}
