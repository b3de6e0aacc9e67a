/* Resolving the closure for the include policy (include_policy.c): every
 * header the candidate can reach, read to a fixed point, computed includes
 * of toolkit headers evaluated by substituting object-like macros, and the
 * candidate's macros checked against the names those includes are built
 * from. */
#include "compile/include_impl.h"
#include "compile/name_map.h"

#include <stdlib.h>
#include <string.h>

#define MAX_EXPANSIONS 64

static int scan_file(resolver *R, long i)
{
    hfile *f = &R->files[i];
    if (f->scanned)
        return 0;
    kr__pp_mode mode = R->mode;
    if (f->from == FROM_TOOLKIT || f->from == FROM_SHIM)
        mode.lenient = 1; /* trusted text: lexed, never refused */
    if (kr__pp_scan_text(&f->scan, f->text, f->len, mode) != 0)
        return -1;
    f->scanned = 1;
    if (!(f->target = malloc((f->scan.count ? f->scan.count : 1) * sizeof *f->target)))
        return -1;
    for (size_t k = 0; k < f->scan.count; k++)
        f->target[k] = R_NONE;
    return 0;
}

static int push_computed(resolver *R, long file, size_t item)
{
    pending *grown = realloc(R->computed, (R->ncomputed + 1) * sizeof *grown);
    if (!grown)
        return -1;
    R->computed = grown;
    R->computed[R->ncomputed].file = file;
    R->computed[R->ncomputed].item = item;
    R->ncomputed++;
    return 0;
}

/* Resolves the literal names of file i; computed includes of toolkit
 * headers are kept for evaluate_computed. */
static int process_file(resolver *R, long i)
{
    if (scan_file(R, i) != 0)
        return -1;
    int from = R->files[i].from;
    if (R->files[i].scan.refused && from >= 0)
        kr__include_note(R, i, R->files[i].scan.refused_line, "%s is refused",
                         R->files[i].scan.refused_why);
    for (size_t k = 0; k < R->files[i].scan.count; k++) {
        const kr__pp_item *it = &R->files[i].scan.items[k];
        int include = it->kind == KR__PP_INCLUDE;
        if (!include && it->kind != KR__PP_HAS_INCLUDE)
            continue;
        if (!include && from == FROM_CANDIDATE && !kr__include_probe_allowed(it->word))
            continue;
        if (include && strcmp(it->word, "include") != 0) {
            if (from >= 0)
                kr__include_note(R, i, it->line, "#%s is refused", it->word);
            continue;
        }
        if (!it->name) {
            if (include && from == FROM_TOOLKIT && push_computed(R, i, k) != 0)
                return -1;
            if (include && from >= 0)
                kr__include_note(R, i, it->line, "#include of a computed name is refused");
            continue;
        }
        long r = kr__include_resolve_name(R, i, it->delim, it->name);
        if (r == R_OOM)
            return -1;
        if (r <= R_ABSOLUTE) {
            if (from == FROM_CANDIDATE)
                kr__include_note(R, i, it->line, "%c%s%c: %s", it->delim, it->name,
                                 it->delim == '<' ? '>' : '"', kr__include_violation(r));
            else if (from >= 0)
                kr__include_note(R, i, it->line, "an #include in this header was refused: %s",
                                 kr__include_violation(r));
            r = R_MISSING;
        } else if (r == R_MISSING && include && from == FROM_CANDIDATE) {
            kr__include_note(R, i, it->line, "%c%s%c was not found in the caller's include "
                             "directories, the CUDA toolkit (include, include/cccl) or "
                             "libkreward's standard-header shims",
                             it->delim, it->name, it->delim == '<' ? '>' : '"');
        }
        R->files[i].target[k] = r;
    }
    return 0;
}

/* The definitions of object-like macros in every header read so far. */
typedef struct {
    kr__name_map index; /* name -> first definition */
    char **body;
    long *next;
    size_t count;
} deftable;

static void deftable_free(deftable *d)
{
    for (size_t i = 0; i < d->count; i++)
        free(d->body[i]);
    free(d->body);
    free(d->next);
    kr__name_map_free(&d->index);
}

static int deftable_build(resolver *R, deftable *d)
{
    memset(d, 0, sizeof *d);
    for (size_t i = 0; i < R->nfiles; i++) {
        const hfile *f = &R->files[i];
        if (f->from != FROM_TOOLKIT)
            continue;
        for (size_t k = 0; k < f->scan.count; k++) {
            const kr__pp_item *it = &f->scan.items[k];
            if (it->kind != KR__PP_DEFINE || it->function_like || !it->word[0])
                continue;
            char **b = realloc(d->body, (d->count + 1) * sizeof *b);
            long *n = b ? realloc(d->next, (d->count + 1) * sizeof *n) : NULL;
            if (b)
                d->body = b;
            if (n)
                d->next = n;
            if (!b || !n)
                return -1;
            if (!(d->body[d->count] = kr__pp_text(f->text, it->body_start, it->body_end)))
                return -1;
            long first = -1;
            kr__name_map_get(&d->index, it->word, strlen(it->word), &first);
            d->next[d->count] = first;
            if (kr__name_map_put(&d->index, it->word, strlen(it->word), (long)d->count) != 0)
                return -1;
            d->count++;
        }
    }
    return 0;
}

static int ident_char(char c, int first)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
           (!first && c >= '0' && c <= '9');
}

/* Every text the operand can become by substituting object-like macros
 * (each definition seen, whatever its #if), up to MAX_EXPANSIONS. Every
 * identifier met on the way joins R->chain: a candidate may not define
 * them (the preprocessor would expand a candidate's `h` in `.h` too). */
static int expand(resolver *R, const deftable *d, const char *text, int depth, char **out,
                  size_t *nout)
{
    if (*nout >= MAX_EXPANSIONS || depth > 8)
        return 0;
    for (const char *p = text; *p;) {
        if (!ident_char(*p, 1) || (p > text && ident_char(p[-1], 0))) {
            p++;
            continue;
        }
        const char *e = p;
        while (ident_char(*e, 0))
            e++;
        if (kr__name_map_put(&R->chain, p, (size_t)(e - p), 1) != 0)
            return -1;
        long def;
        if (!kr__name_map_get(&d->index, p, (size_t)(e - p), &def)) {
            p = e;
            continue;
        }
        for (; def >= 0; def = d->next[def]) {
            kr__buf b = KR__BUF_INIT;
            kr__buf_append(&b, text, (size_t)(p - text));
            kr__buf_puts(&b, d->body[def]);
            kr__buf_puts(&b, e);
            char *s = kr__buf_take(&b);
            if (!s)
                return -1;
            int rc = expand(R, d, s, depth + 1, out, nout);
            free(s);
            if (rc != 0)
                return rc;
        }
        return 0;
    }
    if (*nout < MAX_EXPANSIONS && !(out[(*nout)++] = kr__strdup(text)))
        return -1;
    return 0;
}

static int add_alias(resolver *R, const char *name, long file)
{
    long other;
    if (kr__name_map_get(&R->by_key, name, strlen(name), &other))
        return 0; /* already this file's key, or another file's: left alone */
    alias *grown = realloc(R->aliases, (R->naliases + 1) * sizeof *grown);
    if (!grown)
        return -1;
    R->aliases = grown;
    if (!(R->aliases[R->naliases].name = kr__strdup(name)))
        return -1;
    R->aliases[R->naliases++].file = file;
    return kr__name_map_put(&R->by_key, name, strlen(name), file);
}

/* A computed #include in a toolkit header (Thrust's system headers: the
 * name is a chain of object-like macros). NVRTC will look its expansion up
 * by that literal name, so every expansion that resolves is provided under
 * it. Anything else it could expand to is not in memory and, being
 * relative, cannot be found on disk. */
static int evaluate_computed(resolver *R, const deftable *d, pending p)
{
    const hfile *f = &R->files[p.file];
    const kr__pp_item *it = &f->scan.items[p.item];
    char *operand = kr__pp_text(f->text, it->span_start, it->span_end);
    char *alts[MAX_EXPANSIONS];
    size_t n = 0;
    int rc = operand ? expand(R, d, operand, 0, alts, &n) : -1;
    free(operand);
    for (size_t i = 0; i < n; i++) {
        char *s = alts[i];
        size_t len = strlen(s);
        int literal = len > 2 && ((s[0] == '<' && s[len - 1] == '>') ||
                                  (s[0] == '"' && s[len - 1] == '"'));
        if (rc == 0 && literal) {
            int delim = s[0];
            s[len - 1] = '\0';
            char *name = s + 1;
            char *lit = kr__strdup(s + 1);
            long r = lit ? kr__include_resolve_name(R, p.file, delim, name) : R_OOM;
            if (r == R_OOM || (r >= 0 && add_alias(R, lit, r) != 0))
                rc = -1;
            free(lit);
        }
        free(alts[i]);
    }
    return rc;
}

/* Reads every header the candidate can reach, to a fixed point (computed
 * includes can reach new headers, which can hold more). */
int kr__include_close_over(resolver *R)
{
    size_t done = 0, evaluated = 0;
    for (;;) {
        while (done < R->nfiles)
            if (process_file(R, (long)done++) != 0)
                return -1;
        if (evaluated == R->ncomputed)
            return 0;
        deftable d;
        int rc = deftable_build(R, &d);
        while (rc == 0 && evaluated < R->ncomputed)
            rc = evaluate_computed(R, &d, R->computed[evaluated++]);
        deftable_free(&d);
        if (rc != 0)
            return -1;
    }
}

/* A candidate that redefines a macro a toolkit header builds an include
 * name from could steer that include anywhere (an absolute path). */
void kr__include_check_chain(resolver *R)
{
    const kr__pp_scan *s = &R->files[0].scan;
    for (size_t k = 0; k < s->count; k++) {
        const kr__pp_item *it = &s->items[k];
        long v;
        if ((it->kind == KR__PP_DEFINE || it->kind == KR__PP_UNDEF) && it->word &&
            kr__name_map_get(&R->chain, it->word, strlen(it->word), &v))
            kr__include_note(R, 0, it->line, "#%s %s is refused: a toolkit header builds an "
                             "#include name from this macro",
                             it->kind == KR__PP_DEFINE ? "define" : "undef", it->word);
    }
}
