/* Rewards: registering terms, adding them with weights and gates, scoring. */
#include "reward/reward_impl.h"
#include "common/strbuf.h"

#include <dlfcn.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int kr_reward_new(kr_reward **out, kr_context *ctx)
{
    if (!ctx || !out)
        return KR_EINVAL;
    *out = calloc(1, sizeof **out);
    if (!*out)
        return kr__fail(ctx, KR_ENOMEM, "out of memory");
    (*out)->ctx = ctx;
    return KR_OK;
}

int kr__reward_check_owner(kr_context *ctx, const kr_reward *r)
{
    if (r->ctx == ctx)
        return KR_OK;
    return kr__fail(ctx, KR_EINVAL, "the reward was made by another context: a reward can only be "
                    "used with the context it was made with");
}

void kr_reward_free(kr_reward *r)
{
    if (!r)
        return;
    for (size_t i = 0; i < r->num_terms; i++) {
        if (r->terms[i].def.destroy)
            r->terms[i].def.destroy(r->terms[i].state);
        free(r->terms[i].config);
    }
    free(r->terms);
    free(r->known);
    /* plugins last: their code ran the destroy calls above */
    for (size_t i = 0; i < r->num_plugins; i++)
        dlclose(r->plugins[i]);
    free(r);
}

/* Copies the caller's table: the prefix this library knows, the rest zero. */
static int copy_def(kr_context *ctx, const kr_term_def *def, size_t def_size, kr_term_def *out)
{
    if (!def || def_size < offsetof(kr_term_def, evaluate) + sizeof def->evaluate)
        return kr__fail(ctx, KR_EINVAL, "term table too small (%zu bytes)", def_size);
    if (def->version == 0 || def->version > KR_TERM_VERSION)
        return kr__fail(ctx, KR_EVERSION, "term '%s' was built for term table version %u; this "
                        "libkreward (%s) knows up to %u: update libkreward",
                        def->name ? def->name : "?", def->version, kr_version(), KR_TERM_VERSION);
    memset(out, 0, sizeof *out);
    memcpy(out, def, def_size < sizeof *out ? def_size : sizeof *out);
    if (!out->name || !*out->name || !out->evaluate)
        return kr__fail(ctx, KR_EINVAL, "a term needs a name and an evaluate function");
    return KR_OK;
}

static const kr_term_def *find_known(const kr_reward *r, const char *name)
{
    for (size_t i = 0; i < r->num_known; i++)
        if (strcmp(r->known[i].name, name) == 0)
            return &r->known[i];
    for (const kr_term_def *const *b = kr__builtin_terms(); *b; b++)
        if (strcmp((*b)->name, name) == 0)
            return *b;
    return NULL;
}

int kr_reward_register(kr_reward *r, const kr_term_def *def, size_t def_size)
{
    if (!r)
        return KR_EINVAL;
    kr_term_def copy;
    int rc = copy_def(r->ctx, def, def_size, &copy);
    if (rc != KR_OK)
        return rc;
    if (find_known(r, copy.name))
        return kr__fail(r->ctx, KR_EINVAL, "a term named '%s' is already known", copy.name);
    kr_term_def *grown = realloc(r->known, (r->num_known + 1) * sizeof *grown);
    if (!grown)
        return kr__fail(r->ctx, KR_ENOMEM, "out of memory");
    r->known = grown;
    r->known[r->num_known++] = copy;
    return KR_OK;
}

int kr_reward_load_plugin(kr_reward *r, const char *path)
{
    if (!r || !path)
        return KR_EINVAL;
    if (r->num_plugins == sizeof r->plugins / sizeof r->plugins[0])
        return kr__fail(r->ctx, KR_ETOOBIG, "too many plugins");
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        const char *e = dlerror();
        return kr__fail(r->ctx, KR_ENOTFOUND, "cannot load plugin %s: %s", path, e ? e : "?");
    }
    void *sym = dlsym(lib, KR_PLUGIN_ENTRY);
    kr_plugin_entry_fn entry;
    memcpy(&entry, &sym, sizeof sym);
    const kr_plugin_info *info = sym ? entry() : NULL;
    int rc = KR_OK;
    if (!sym)
        rc = kr__fail(r->ctx, KR_EPLUGIN, "%s exports no %s()", path, KR_PLUGIN_ENTRY);
    else if (!info)
        rc = kr__fail(r->ctx, KR_EPLUGIN, "%s: %s() returned nothing", path, KR_PLUGIN_ENTRY);
    else if (info->version == 0 || info->version > KR_PLUGIN_VERSION)
        rc = kr__fail(r->ctx, KR_EVERSION, "plugin %s was built against a newer libkreward "
                      "(plugin format %u, this library knows up to %u)", path, info->version,
                      KR_PLUGIN_VERSION);
    size_t known_before = r->num_known;
    for (uint32_t i = 0; rc == KR_OK && i < info->num_terms; i++) {
        const kr_term_def *def =
            (const kr_term_def *)((const char *)info->terms + (size_t)i * info->term_size);
        rc = kr_reward_register(r, def, info->term_size);
    }
    if (rc != KR_OK) {
        /* the terms registered so far point into the library: forget them
         * before it is unloaded */
        r->num_known = known_before;
        dlclose(lib);
        return rc;
    }
    r->plugins[r->num_plugins++] = lib;
    return KR_OK;
}

int kr_reward_add(kr_reward *r, const char *term, const char *config, double weight, int gate)
{
    if (!r || !term)
        return KR_EINVAL;
    const kr_term_def *def = find_known(r, term);
    if (!def)
        return kr__fail(r->ctx, KR_ENOTFOUND, "unknown term '%s' (register it or load its plugin)",
                        term);
    if (!isfinite(weight))
        return kr__fail(r->ctx, KR_EINVAL, "term '%s': the weight must be finite", term);
    if (gate < KR_GATE_DEFAULT || gate > KR_GATE_CORRECT)
        return kr__fail(r->ctx, KR_EINVAL, "term '%s': unknown gate %d", term, gate);
    kr__added_term t;
    memset(&t, 0, sizeof t);
    t.def = *def;
    t.weight = weight;
    t.gate = gate != KR_GATE_DEFAULT ? gate
             : (def->flags & KR_TERM_NEEDS_CORRECT) ? KR_GATE_CORRECT : KR_GATE_ALWAYS;
    char err[512] = "";
    if (def->init && def->init(config, &t.state, err, sizeof err) != 0)
        return kr__fail(r->ctx, KR_EPLUGIN, "term '%s': bad config: %s", term,
                        err[0] ? err : "init failed");
    t.config = config ? kr__strdup(config) : NULL;
    kr__added_term *grown = realloc(r->terms, (r->num_terms + 1) * sizeof *grown);
    if (!grown) {
        if (t.def.destroy)
            t.def.destroy(t.state);
        free(t.config);
        return kr__fail(r->ctx, KR_ENOMEM, "out of memory");
    }
    r->terms = grown;
    r->terms[r->num_terms++] = t;
    return KR_OK;
}

int kr_reward_set_fallback(kr_reward *r, double fallback)
{
    if (!r || !isfinite(fallback))
        return KR_EINVAL;
    r->has_fallback = 1;
    r->fallback = fallback;
    return KR_OK;
}

int kr__reward_override(kr_reward *r, uint64_t flag, double value)
{
    if (r->num_overrides == sizeof r->overrides / sizeof r->overrides[0])
        return kr__fail(r->ctx, KR_ETOOBIG, "too many flag overrides");
    r->overrides[r->num_overrides].flag = flag;
    r->overrides[r->num_overrides].value = value;
    r->num_overrides++;
    return KR_OK;
}

static int gate_open(int gate, const kr_report *report)
{
    int v = kr_report_verdict(report);
    switch (gate) {
    case KR_GATE_CORRECT:
        return v == KR_VERDICT_PASSED;
    case KR_GATE_COMPILED:
        return v != KR_VERDICT_COMPILE_ERROR && v != KR_VERDICT_NONE;
    default:
        return 1;
    }
}

int kr_reward_score(double *value, kr_reward *r, kr_report *report)
{
    if (!r || !report)
        return KR_EINVAL;
    kr__clear_error(r->ctx);
    kr__report_clear_terms(report);
    double total = 0;
    int rc = KR_OK;
    for (size_t i = 0; i < r->num_terms && rc == KR_OK; i++) {
        kr__added_term *t = &r->terms[i];
        int counted = gate_open(t->gate, report);
        double v = 0;
        if (counted) {
            char err[512] = "";
            if (t->def.evaluate(t->state, report, &v, err, sizeof err) != 0)
                rc = kr__fail(r->ctx, KR_EPLUGIN, "term '%s' failed: %s", t->def.name,
                              err[0] ? err : "no message");
            else if (!isfinite(v) && !r->has_fallback)
                rc = kr__fail(r->ctx, KR_EPLUGIN, "term '%s' returned %s", t->def.name,
                              isnan(v) ? "NaN" : "an infinity");
        }
        if (rc == KR_OK) {
            kr__report_add_term(report, t->def.name, v, t->weight, counted);
            total += counted ? t->weight * v : 0;
        }
    }
    if (rc == KR_OK && !isfinite(total)) {
        if (r->has_fallback)
            total = r->fallback;
        else
            rc = kr__fail(r->ctx, KR_EPLUGIN, "the reward is not finite");
    }
    /* a flag override replaces the whole reward (e.g. a decoy scores -1) */
    for (size_t i = 0; rc == KR_OK && i < r->num_overrides; i++) {
        if (kr_report_flags(report) & r->overrides[i].flag) {
            total = r->overrides[i].value;
            break;
        }
    }
    if (rc != KR_OK) {
        kr__report_clear_terms(report);
        return rc;
    }
    kr__report_set_reward(report, total);
    if (value)
        *value = total;
    return KR_OK;
}

int kr_reward_json(char **json_out, const kr_reward *r)
{
    if (!r || !json_out)
        return KR_EINVAL;
    static const char *const gates[] = {"default", "always", "compiled", "correct"};
    json_t *o = json_object(), *terms = json_array();
    for (size_t i = 0; i < r->num_terms; i++) {
        json_t *t = json_object();
        json_object_set_new(t, "term", json_string(r->terms[i].def.name));
        json_object_set_new(t, "weight", json_real(r->terms[i].weight));
        json_object_set_new(t, "gate", json_string(gates[r->terms[i].gate]));
        if (r->terms[i].config) {
            json_t *cfg = json_loads(r->terms[i].config, 0, NULL);
            json_object_set_new(t, "config", cfg ? cfg : json_string(r->terms[i].config));
        }
        json_array_append_new(terms, t);
    }
    json_object_set_new(o, "terms", terms);
    if (r->has_fallback)
        json_object_set_new(o, "fallback", json_real(r->fallback));
    json_t *ov = json_object();
    for (size_t i = 0; i < r->num_overrides; i++)
        json_object_set_new(ov, kr_flag_name(r->overrides[i].flag), json_real(r->overrides[i].value));
    json_object_set_new(o, "flag_overrides", ov);
    *json_out = json_dumps(o, JSON_INDENT(2));
    json_decref(o);
    return *json_out ? KR_OK : KR_ENOMEM;
}
