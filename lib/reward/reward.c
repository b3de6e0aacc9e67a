/* Rewards: registering terms, adding them with weights and gates, scoring:
 * speed terms clipped and floored by flags, the total kept in its class's
 * range of the ladder (docs/rewards.md, "Order and speed"). */
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
    (*out)->floor_flags = kr__default_floor_flags();
    (*out)->credit = (kr__credit){1, "custom_share", 0.5};
    return KR_OK;
}

double kr__speed_credit(const kr__credit *c, const kr_report *report)
{
    double m;
    if (!c->on || kr_report_get(&m, report, c->metric) != KR_OK || isnan(m))
        return 1;
    double credit = m / c->full_at;
    return credit < 0 ? 0 : credit > 1 ? 1 : credit;
}

uint64_t kr__default_floor_flags(void)
{
    /* the measurement cannot be trusted (implausible_speed, side_stream,
     * timing_mismatch), the problem cannot tell fast from lazy
     * (weak_problem), the candidate is the reference (reference_copy),
     * timing stopped early (slow), or no kernel of the candidate's own did
     * the work, or none could be told apart (torch_fallback, unattributed) */
    static const char *const names[] = {"implausible_speed", "side_stream", "weak_problem",
                                        "reference_copy", "slow", "timing_mismatch",
                                        "torch_fallback", "unattributed"};
    uint64_t f = 0;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        f |= kr_flag_from_name(names[i]);
    return f;
}

int kr__verdict_class(int verdict)
{
    return verdict == KR_VERDICT_PASSED ? KR__CLASS_PASSED
           : verdict == KR_VERDICT_COMPILE_ERROR ? KR__CLASS_COMPILE_ERROR : KR__CLASS_FAILED;
}

static const char *const class_names[KR__NUM_CLASSES] = {"compile_error", "failed", "passed"};

int kr__reward_set_ladder(kr_reward *r, const kr__ladder *l)
{
    if (!l->on) {
        r->ladder.on = 0;
        return KR_OK;
    }
    for (int c = 0; c < KR__NUM_CLASSES; c++)
        if (!isfinite(l->lo[c]) || !isfinite(l->hi[c]) || l->lo[c] > l->hi[c])
            return kr__fail(r->ctx, KR_EINVAL, "ladder: %s is [%g, %g]: a range is two finite "
                            "numbers, the lower first", class_names[c], l->lo[c], l->hi[c]);
    for (int c = 0; c + 1 < KR__NUM_CLASSES; c++)
        if (l->hi[c] > l->lo[c + 1])
            return kr__fail(r->ctx, KR_EINVAL, "ladder: %s reaches %g, above the lowest %s (%g): "
                            "each class must lie at or below the next (compile_error, failed, "
                            "passed)", class_names[c], l->hi[c], class_names[c + 1], l->lo[c + 1]);
    r->ladder = *l;
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

/* The term's speed role and bounds: its own, then what the configuration
 * says; a speed term must have finite bounds (it is clipped and floored). */
static int settle_role(kr_reward *r, kr__added_term *t, const kr__term_opts *o)
{
    const kr__term_traits *tr = t->traits;
    t->speed = tr && tr->speed ? tr->speed(t->state) != 0 : 0;
    t->lo = -INFINITY;
    t->hi = INFINITY;
    if (tr && tr->bounds)
        tr->bounds(t->state, &t->lo, &t->hi);
    if (o && o->speed >= 0)
        t->speed = o->speed;
    if (o && o->has_bounds) {
        if (!(o->lo <= o->hi))
            return kr__fail(r->ctx, KR_EINVAL, "term '%s': bounds [%g, %g]: the lower first",
                            t->def.name, o->lo, o->hi);
        double lo = o->lo > t->lo ? o->lo : t->lo, hi = o->hi < t->hi ? o->hi : t->hi;
        if (lo > hi)
            return kr__fail(r->ctx, KR_EINVAL, "term '%s': bounds [%g, %g] hold none of its "
                            "values [%g, %g]", t->def.name, o->lo, o->hi, t->lo, t->hi);
        t->lo = lo;
        t->hi = hi;
    }
    if (t->speed && !(isfinite(t->lo) && isfinite(t->hi)))
        return kr__fail(r->ctx, KR_EINVAL, "term '%s' pays for speed but has no finite bounds: "
                        "give it \"bounds\": [lowest, highest] (or min and max in its config), "
                        "so that it can be clipped and floored", t->def.name);
    return KR_OK;
}

int kr_reward_add(kr_reward *r, const char *term, const char *config, double weight, int gate)
{
    return kr__reward_add_term(r, term, config, weight, gate, NULL);
}

int kr__reward_add_term(kr_reward *r, const char *term, const char *config, double weight,
                        int gate, const kr__term_opts *o)
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
    t.traits = kr__builtin_traits(def);
    t.weight = weight;
    t.gate = gate != KR_GATE_DEFAULT ? gate
             : (def->flags & KR_TERM_NEEDS_CORRECT) ? KR_GATE_CORRECT : KR_GATE_ALWAYS;
    char err[512] = "";
    if (def->init && def->init(config, &t.state, err, sizeof err) != 0)
        return kr__fail(r->ctx, KR_EPLUGIN, "term '%s': bad config: %s", term,
                        err[0] ? err : "init failed");
    int rc = settle_role(r, &t, o);
    t.config = rc == KR_OK && config ? kr__strdup(config) : NULL;
    kr__added_term *grown = NULL;
    if (rc == KR_OK && (!config || t.config))
        grown = realloc(r->terms, (r->num_terms + 1) * sizeof *grown);
    if (!grown) {
        if (t.def.destroy)
            t.def.destroy(t.state);
        free(t.config);
        return rc != KR_OK ? rc : kr__fail(r->ctx, KR_ENOMEM, "out of memory");
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

/* A speed term's value when a floor flag is set: the least it could pay
 * (its top bound under a negative weight). */
static double speed_floor(const kr__added_term *t, const kr_report *report)
{
    if (t->weight < 0)
        return t->hi;
    double v = t->traits && t->traits->floor ? t->traits->floor(t->state, report) : t->lo;
    return v < t->lo ? t->lo : v > t->hi ? t->hi : v;
}

/* A metric the term cannot do without, missing from the report: an error
 * naming both (a report built by hand often lacks what a benchmark sets). */
static int check_needs(kr_reward *r, const kr__added_term *t, const kr_report *report)
{
    kr__need needs[KR__MAX_NEEDS];
    size_t n = kr__term_needs(t, needs);
    for (size_t i = 0; i < n; i++) {
        double v;
        if (needs[i].missing || kr_report_get(&v, report, needs[i].metric) == KR_OK)
            continue;
        return kr__fail(r->ctx, KR_EPLUGIN, "term '%s' needs the metric '%s', which the report "
                        "lacks (set it with kr_report_set, or give the term a \"missing\" "
                        "value where it takes one)", t->def.name, needs[i].metric);
    }
    return KR_OK;
}

int kr_reward_score(double *value, kr_reward *r, kr_report *report)
{
    if (!r || !report)
        return KR_EINVAL;
    kr__clear_error(r->ctx);
    kr__report_clear_terms(report);
    uint64_t flags = kr_report_flags(report);
    int floored = (flags & r->floor_flags) != 0;
    double credit = kr__speed_credit(&r->credit, report);
    double total = 0;
    int rc = KR_OK;
    for (size_t i = 0; i < r->num_terms && rc == KR_OK; i++) {
        kr__added_term *t = &r->terms[i];
        int counted = gate_open(t->gate, report);
        double v = 0;
        if (counted && t->speed && floored) {
            v = speed_floor(t, report);
        } else if (counted) {
            char err[512] = "";
            if ((rc = check_needs(r, t, report)) != KR_OK)
                break;
            if (t->def.evaluate(t->state, report, &v, err, sizeof err) != 0)
                rc = kr__fail(r->ctx, KR_EPLUGIN, "term '%s' failed: %s", t->def.name,
                              err[0] ? err : "no message");
            else if (!isfinite(v) && !r->has_fallback)
                rc = kr__fail(r->ctx, KR_EPLUGIN, "term '%s' returned %s", t->def.name,
                              isnan(v) ? "NaN" : "an infinity");
            else if (!isnan(v))
                v = v < t->lo ? t->lo : v > t->hi ? t->hi : v;
            /* paid in proportion to the credit, from the floor up */
            if (rc == KR_OK && t->speed && credit < 1 && isfinite(v)) {
                double floor = speed_floor(t, report);
                v = floor + credit * (v - floor);
            }
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
        if (flags & r->overrides[i].flag) {
            total = r->overrides[i].value;
            break;
        }
    }
    if (rc != KR_OK) {
        kr__report_clear_terms(report);
        return rc;
    }
    /* the ladder has the last word: no class ever scores out of order */
    if (r->ladder.on) {
        int c = kr__verdict_class(kr_report_verdict(report));
        total = total < r->ladder.lo[c] ? r->ladder.lo[c]
                : total > r->ladder.hi[c] ? r->ladder.hi[c] : total;
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
        json_object_set_new(t, "speed", json_boolean(r->terms[i].speed));
        if (isfinite(r->terms[i].lo) && isfinite(r->terms[i].hi))
            json_object_set_new(t, "bounds", json_pack("[ff]", r->terms[i].lo, r->terms[i].hi));
        /* what it reads, and what a missing value reads as: written for the
         * reader, ignored when read back (it follows from term and config) */
        kr__need needs[KR__MAX_NEEDS];
        size_t n = kr__term_needs(&r->terms[i], needs);
        json_t *nj = json_object();
        for (size_t k = 0; k < n; k++)
            json_object_set_new(nj, needs[k].metric,
                                json_string(needs[k].missing ? needs[k].missing : "required"));
        json_object_set_new(t, "needs", nj);
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
    json_t *ff = json_array();
    for (int b = 0; b < 64; b++)
        if ((r->floor_flags & (1ull << b)) && kr_flag_name(1ull << b))
            json_array_append_new(ff, json_string(kr_flag_name(1ull << b)));
    json_object_set_new(o, "speed_floor_flags", ff);
    if (r->credit.on)
        json_object_set_new(o, "speed_credit", json_pack("{sssf}", "metric", r->credit.metric,
                                                         "full_at", r->credit.full_at));
    else
        json_object_set_new(o, "speed_credit", json_string("none"));
    if (r->ladder.on) {
        json_t *l = json_object();
        for (int c = 0; c < KR__NUM_CLASSES; c++)
            json_object_set_new(l, class_names[c], json_pack("[ff]", r->ladder.lo[c],
                                                              r->ladder.hi[c]));
        json_object_set_new(o, "ladder", l);
    } else {
        json_object_set_new(o, "ladder", json_string("none"));
    }
    *json_out = json_dumps(o, JSON_INDENT(2));
    json_decref(o);
    return *json_out ? KR_OK : KR_ENOMEM;
}
