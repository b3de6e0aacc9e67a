/* Reading launch plans: `// kreward:` annotation lines in a source, or JSON.
 *
 *   // kreward: launch KERNEL grid=(X[,Y[,Z]]) block=(X[,Y[,Z]]) [smem=EXPR] args=(A, B, ...)
 *   // kreward: scratch NAME bytes=EXPR [zero|poison]
 *
 * Values are kept as text here; binding to a problem (plan_bind.c) resolves
 * names and compiles the expressions. Plans as JSON: plan_parse_json.c. */
#include "driver/context_impl.h"
#include "problem/plan_impl.h"
#include "common/strbuf.h"
#include "common/lexer.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_LAUNCHES 64

void kr_plan_free(kr_plan *plan)
{
    if (!plan)
        return;
    for (size_t i = 0; i < plan->num_launches; i++) {
        kr__launch_text *l = &plan->launches[i];
        free(l->kernel);
        for (size_t j = 0; j < 3; j++) {
            free(l->grid[j]);
            free(l->block[j]);
        }
        free(l->smem);
        for (size_t j = 0; j < l->num_args; j++)
            free(l->args[j]);
        free(l->args);
    }
    for (size_t i = 0; i < plan->num_scratch; i++) {
        free(plan->scratch[i].name);
        free(plan->scratch[i].bytes);
    }
    free(plan->launches);
    free(plan->scratch);
    free(plan->name);
    free(plan);
}

size_t kr_plan_launch_count(const kr_plan *plan)
{
    return plan ? plan->num_launches : 0;
}

const char *kr_plan_launch_kernel(const kr_plan *plan, size_t i)
{
    return plan && i < plan->num_launches ? plan->launches[i].kernel : NULL;
}

kr__launch_text *kr__plan_new_launch(kr_plan *plan)
{
    if (plan->num_launches == MAX_LAUNCHES)
        return NULL;
    kr__launch_text *grown = realloc(plan->launches, (plan->num_launches + 1) * sizeof *grown);
    if (!grown)
        return NULL;
    plan->launches = grown;
    memset(&grown[plan->num_launches], 0, sizeof *grown);
    return &grown[plan->num_launches++];
}

kr__scratch_text *kr__plan_new_scratch(kr_plan *plan)
{
    if (plan->num_scratch >= KR__PLAN_MAX_SCRATCH)
        return NULL;
    kr__scratch_text *grown = realloc(plan->scratch, (plan->num_scratch + 1) * sizeof *grown);
    if (!grown)
        return NULL;
    plan->scratch = grown;
    memset(&grown[plan->num_scratch], 0, sizeof *grown);
    return &grown[plan->num_scratch++];
}

/* Past the limit it is the plan's fault (invalid_plan), never an
 * environment error a candidate could reach on purpose. */
int kr__plan_scratch_refused(kr_context *ctx, const kr_plan *plan)
{
    if (plan->num_scratch >= KR__PLAN_MAX_SCRATCH)
        return kr__fail(ctx, KR_EPLAN, "%s: more than %d scratch buffers", plan->name,
                        KR__PLAN_MAX_SCRATCH);
    return kr__fail(ctx, KR_ENOMEM, "out of memory");
}

/* Splits "a, cdiv(b, c), d" at top-level commas into trimmed copies. */
static int split_list(const char *s, size_t n, char ***items, size_t *count, size_t max)
{
    *items = NULL;
    *count = 0;
    int depth = 0;
    size_t start = 0;
    for (size_t i = 0; i <= n; i++) {
        char c = i < n ? s[i] : ',';
        if (c == '(')
            depth++;
        else if (c == ')')
            depth--;
        if (c != ',' || depth > 0)
            continue;
        size_t a = start, b = i;
        while (a < b && isspace((unsigned char)s[a]))
            a++;
        while (b > a && isspace((unsigned char)s[b - 1]))
            b--;
        start = i + 1;
        if (a == b && i == n && *count == 0)
            break; /* "()" is an empty list */
        if (a == b || *count == max)
            return -1;
        char **grown = realloc(*items, (*count + 1) * sizeof *grown);
        if (!grown)
            return -1;
        *items = grown;
        if (!((*items)[(*count)++] = kr__strndup(s + a, b - a)))
            return -1;
    }
    return 0;
}

static void free_list(char **items, size_t count)
{
    for (size_t i = 0; i < count; i++)
        free(items[i]);
    free(items);
}

/* One key=value of a directive; value is "(...)" (a list) or an expression. */
static int next_pair(const char **p, char *key, size_t key_size, const char **val, size_t *val_len)
{
    const char *s = *p;
    while (isspace((unsigned char)*s))
        s++;
    if (!*s)
        return 0;
    const char *k = s;
    while (*s && *s != '=' && !isspace((unsigned char)*s))
        s++;
    snprintf(key, key_size, "%.*s", (int)(s - k), k);
    if (*s != '=') {
        *val = NULL;
        *val_len = 0;
        *p = s;
        return 1; /* a bare word, e.g. "zero" */
    }
    s++;
    if (*s == '(') {
        int depth = 0;
        const char *v = s + 1;
        for (; *s; s++) {
            if (*s == '(')
                depth++;
            else if (*s == ')' && --depth == 0)
                break;
        }
        if (!*s)
            return -1;
        *val = v;
        *val_len = (size_t)(s - v);
        s++;
    } else {
        /* a bare value ends at a space outside parentheses: smem=min(N, 1024)*4 */
        int depth = 0;
        *val = s;
        for (; *s && (depth > 0 || !isspace((unsigned char)*s)); s++)
            depth += (*s == '(') - (*s == ')');
        if (depth != 0)
            return -1;
        *val_len = (size_t)(s - *val);
    }
    *p = s;
    return 1;
}

static int set_dims(char **dst, size_t *num, const char *v, size_t n)
{
    char **items;
    size_t count;
    if (split_list(v, n, &items, &count, 3) != 0 || count == 0) {
        free_list(items, count);
        return -1;
    }
    for (size_t i = 0; i < count; i++)
        dst[i] = items[i];
    free(items);
    *num = count;
    return 0;
}

static int parse_launch(kr_context *ctx, kr_plan *plan, const char *rest, int line)
{
    kr__launch_text *l = kr__plan_new_launch(plan);
    if (!l)
        return kr__fail(ctx, KR_EPLAN, "%s: more than %d launches", plan->name, MAX_LAUNCHES);
    snprintf(l->where, sizeof l->where, "plan line %d", line);
    while (isspace((unsigned char)*rest))
        rest++;
    const char *k = rest;
    while (*rest && !isspace((unsigned char)*rest))
        rest++;
    if (rest == k)
        return kr__fail(ctx, KR_EPLAN, "%s: %s: launch needs a kernel name", plan->name, l->where);
    if (!(l->kernel = kr__strndup(k, (size_t)(rest - k))))
        return kr__fail(ctx, KR_ENOMEM, "out of memory");
    int have_args = 0;
    for (;;) {
        char key[32];
        const char *v;
        size_t n;
        int r = next_pair(&rest, key, sizeof key, &v, &n);
        if (r == 0)
            break;
        if (r < 0 || !v)
            return kr__fail(ctx, KR_EPLAN, "%s: %s: expected key=value or key=(...) at '%s'",
                            plan->name, l->where, key);
        int bad = 0;
        int repeated = (strcmp(key, "grid") == 0 && l->num_grid) ||
                       (strcmp(key, "block") == 0 && l->num_block) ||
                       (strcmp(key, "smem") == 0 && l->smem) || (strcmp(key, "args") == 0 && have_args);
        if (repeated)
            return kr__fail(ctx, KR_EPLAN, "%s: %s: %s given twice", plan->name, l->where, key);
        if (strcmp(key, "grid") == 0)
            bad = set_dims(l->grid, &l->num_grid, v, n);
        else if (strcmp(key, "block") == 0)
            bad = set_dims(l->block, &l->num_block, v, n);
        else if (strcmp(key, "smem") == 0)
            bad = !(l->smem = kr__strndup(v, n));
        else if (strcmp(key, "args") == 0) {
            bad = split_list(v, n, &l->args, &l->num_args, KR__PLAN_MAX_ARGS);
            have_args = 1;
        } else
            return kr__fail(ctx, KR_EPLAN, "%s: %s: unknown key '%s' (grid, block, smem, args)",
                            plan->name, l->where, key);
        if (bad)
            return kr__fail(ctx, KR_EPLAN, "%s: %s: malformed %s (expected 1 to 3 values for "
                            "grid/block, up to %d args)", plan->name, l->where, key,
                            KR__PLAN_MAX_ARGS);
    }
    if (!l->num_grid || !l->num_block || !have_args)
        return kr__fail(ctx, KR_EPLAN, "%s: %s: launch %s needs grid=(...), block=(...) and "
                        "args=(...)", plan->name, l->where, l->kernel);
    return KR_OK;
}

static int parse_scratch(kr_context *ctx, kr_plan *plan, const char *rest, int line)
{
    kr__scratch_text *s = kr__plan_new_scratch(plan);
    if (!s)
        return kr__plan_scratch_refused(ctx, plan);
    snprintf(s->where, sizeof s->where, "plan line %d", line);
    s->zero = 1;
    while (isspace((unsigned char)*rest))
        rest++;
    const char *k = rest;
    while (*rest && !isspace((unsigned char)*rest))
        rest++;
    if (rest == k || !(s->name = kr__strndup(k, (size_t)(rest - k))))
        return kr__fail(ctx, KR_EPLAN, "%s: %s: scratch needs a name", plan->name, s->where);
    for (;;) {
        char key[32];
        const char *v;
        size_t n;
        int r = next_pair(&rest, key, sizeof key, &v, &n);
        if (r == 0)
            break;
        if (r > 0 && v && strcmp(key, "bytes") == 0 && !s->bytes)
            s->bytes = kr__strndup(v, n);
        else if (r > 0 && !v && (strcmp(key, "zero") == 0 || strcmp(key, "poison") == 0))
            s->zero = strcmp(key, "zero") == 0;
        else
            return kr__fail(ctx, KR_EPLAN, "%s: %s: scratch takes bytes=EXPR and zero or poison, "
                            "not '%s'", plan->name, s->where, key);
    }
    if (!s->bytes)
        return kr__fail(ctx, KR_EPLAN, "%s: %s: scratch %s needs bytes=EXPR", plan->name,
                        s->where, s->name);
    return KR_OK;
}

static int parse_line(kr_context *ctx, kr_plan *plan, const char *line, size_t n, int lineno,
                      int *found)
{
    char buf[2048];
    if (n >= sizeof buf)
        n = sizeof buf - 1;
    memcpy(buf, line, n);
    buf[n] = '\0';
    char *c = strstr(buf, "//");
    if (!c)
        return KR_OK;
    c += 2;
    while (isspace((unsigned char)*c))
        c++;
    if (strncmp(c, "kreward:", 8) != 0)
        return KR_OK;
    *found = 1;
    c += 8;
    while (isspace((unsigned char)*c))
        c++;
    if (strncmp(c, "launch", 6) == 0 && isspace((unsigned char)c[6]))
        return parse_launch(ctx, plan, c + 6, lineno);
    if (strncmp(c, "scratch", 7) == 0 && isspace((unsigned char)c[7]))
        return parse_scratch(ctx, plan, c + 7, lineno);
    return kr__fail(ctx, KR_EPLAN, "%s: plan line %d: unknown kreward directive (launch, scratch)",
                    plan->name, lineno);
}

typedef struct {
    kr_context *ctx;
    kr_plan *plan;
    int found;
    int rc;
} annotations;

/* One top-level `//` comment (the lexer never hands over one inside a block
 * comment or a string literal: those are not annotations). An annotation
 * must be live whatever the macros say: inside a conditional group, on a
 * directive's line or continued by a splice, it is refused. */
static int annotation(void *user, const char *src, const kr__token *t)
{
    annotations *a = user;
    const char *c = src + t->start + 2;
    size_t n = t->end - t->start - 2;
    while (n && isspace((unsigned char)*c)) {
        c++;
        n--;
    }
    if (n < 8 || strncmp(c, "kreward:", 8) != 0)
        return 0;
    const char *why = (t->flags & KR__TOKF_DEAD) || t->cond_depth ? "inside #if/#ifdef (it would be "
                                                                    "live or dead by macro)"
                    : t->directive ? "on a preprocessor directive's line"
                    : t->end_line > t->line ? "continued onto the next line by a backslash"
                                            : NULL;
    if (why) {
        a->found = 1;
        return a->rc = kr__fail(a->ctx, KR_EPLAN, "%s: plan line %u: a kreward annotation %s is "
                                "refused: put it on a line of its own at the top level",
                                a->plan->name, t->line, why);
    }
    a->rc = parse_line(a->ctx, a->plan, src + t->start, t->end - t->start, (int)t->line, &a->found);
    return a->rc;
}

kr_plan *kr__plan_new(const char *name)
{
    kr_plan *plan = calloc(1, sizeof *plan);
    if (plan && !(plan->name = kr__strdup(name ? name : "plan"))) {
        free(plan);
        plan = NULL;
    }
    return plan;
}

int kr_plan_from_source(kr_plan **out, kr_context *ctx, const char *source, size_t len,
                        const char *name)
{
    if (!ctx || !out || !source)
        return KR_EINVAL;
    *out = NULL;
    kr__clear_error(ctx);
    if (len == 0)
        len = strlen(source);
    kr_plan *plan = kr__plan_new(name ? name : "candidate.cu");
    if (!plan)
        return kr__fail(ctx, KR_ENOMEM, "out of memory");
    annotations a = {ctx, plan, 0, KR_OK};
    int rc = kr__lex_line_comments(source, len, annotation, &a);
    int found = a.found;
    if (rc == KR_OK && plan->num_launches == 0)
        rc = kr__fail(ctx, found ? KR_EPLAN : KR_ENOTFOUND,
                      "%s: no launch plan: add a line such as "
                      "// kreward: launch KERNEL grid=(cdiv(N,256)) block=(256) args=(x, y, N)",
                      plan->name);
    if (rc != KR_OK) {
        kr_plan_free(plan);
        return rc;
    }
    *out = plan;
    return KR_OK;
}
