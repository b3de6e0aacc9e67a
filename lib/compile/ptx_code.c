/* PTX code (ptx_code.h): functions, their instructions as shapes, and the
 * near-copy test. The text is read once, comments blanked; each function
 * body is split into statements (`;`, and `{` `}` at the start of one as
 * scopes: inline asm opens its own); labels, `.reg`, `.loc`, `.pragma` and
 * the like are not instructions. */
#include "compile/ptx_code.h"
#include "common/hash.h"
#include "common/strbuf.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- growable arrays ---- */

typedef struct {
    uint64_t *v;
    size_t n, cap;
} u64s;

static int push(u64s *a, uint64_t x)
{
    if (a->n == a->cap) {
        size_t cap = a->cap ? a->cap * 2 : 64;
        uint64_t *v = realloc(a->v, cap * sizeof *v);
        if (!v)
            return -1;
        a->v = v;
        a->cap = cap;
    }
    a->v[a->n++] = x;
    return 0;
}

typedef struct {
    char *name;
    int entry;
    size_t instructions;
    u64s shapes, fixed;
    char **calls;
    size_t num_calls;
} function;

typedef struct {
    function *f;
    size_t n;
} functions;

static void function_free(function *f)
{
    free(f->name);
    free(f->shapes.v);
    free(f->fixed.v);
    for (size_t i = 0; i < f->num_calls; i++)
        free(f->calls[i]);
    free(f->calls);
}

/* ---- text ---- */

static int ident_start(int c)
{
    return isalpha(c) || c == '_' || c == '$';
}

static int ident_char(int c)
{
    return isalnum(c) || c == '_' || c == '$';
}

static const char *skip_space(const char *p, const char *end)
{
    while (p < end && isspace((unsigned char)*p))
        p++;
    return p;
}

/* The end of the parenthesised group opening at p (after its ')'), or NULL. */
static const char *close_paren(const char *p, const char *end)
{
    int depth = 0;
    for (; p < end; p++) {
        if (*p == '(')
            depth++;
        else if (*p == ')' && --depth == 0)
            return p + 1;
    }
    return NULL;
}

/* ---- parameters: names declared in a function's head, by position ---- */

typedef struct {
    const char *name[512];
    size_t len[512];
    size_t n;
} params;

/* Each comma-separated declaration of the group [p, end) names one
 * parameter: its last identifier (before any [N]). */
static void read_params(params *ps, const char *p, const char *end)
{
    while (p < end && ps->n < sizeof ps->name / sizeof ps->name[0]) {
        const char *comma = memchr(p, ',', (size_t)(end - p));
        const char *stop = comma ? comma : end, *last = NULL;
        size_t last_len = 0;
        for (const char *q = p; q < stop;) {
            if (*q == '[') { /* an array's length is not its name */
                while (q < stop && *q != ']')
                    q++;
                continue;
            }
            if (ident_start((unsigned char)*q) && (q == p || (q[-1] != '.' && !ident_char((unsigned char)q[-1])))) {
                const char *s = q;
                while (q < stop && ident_char((unsigned char)*q))
                    q++;
                last = s;
                last_len = (size_t)(q - s);
                continue;
            }
            q++;
        }
        if (last) {
            ps->name[ps->n] = last;
            ps->len[ps->n++] = last_len;
        }
        p = stop + 1;
    }
}

static int param_index(const params *ps, const char *s, size_t n)
{
    for (size_t i = 0; i < ps->n; i++)
        if (ps->len[i] == n && memcmp(ps->name[i], s, n) == 0)
            return (int)i;
    return -1;
}

/* ---- one statement as a shape ---- */

static int is_commutative(const char *op, size_t n)
{
    static const char *const bases[] = {"add", "mul", "mul24", "mad", "mad24", "fma", "min",
                                        "max", "and", "or", "xor", "addc", "madc"};
    size_t b = 0;
    while (b < n && op[b] != '.')
        b++;
    for (size_t i = 0; i < sizeof bases / sizeof bases[0]; i++)
        if (strncmp(op, bases[i], b) == 0 && bases[i][b] == '\0')
            return 1;
    /* setp.eq / setp.ne compare symmetrically */
    return n >= 7 && (memcmp(op, "setp.eq", 7) == 0 || memcmp(op, "setp.ne", 7) == 0);
}

/* Memory, synchronisation, calls and returns, tensor cores: what a kernel
 * does beyond its own registers. */
static int is_effect(const char *op, size_t n)
{
    static const char *const bases[] = {
        "ld",       "ldu",       "st",       "atom",     "red",      "cp",        "tex",
        "tld4",     "txq",       "suld",     "sust",     "sured",    "suq",       "shfl",
        "bar",      "barrier",   "membar",   "fence",    "vote",     "match",     "redux",
        "ret",      "exit",      "call",     "trap",     "brkpt",    "wgmma",     "mma",
        "wmma",     "ldmatrix",  "stmatrix", "mbarrier", "elect",    "griddepcontrol",
        "prefetch", "prefetchu", "discard",  "applypriority", "createpolicy", "setmaxnreg",
        "tcgen05",  "multimem",  "nanosleep", "activemask", "mapa",   "getctarank",
        "clusterlaunchcontrol", "tensormap"};
    size_t b = 0;
    while (b < n && op[b] != '.')
        b++;
    for (size_t i = 0; i < sizeof bases / sizeof bases[0]; i++)
        if (strncmp(op, bases[i], b) == 0 && bases[i][b] == '\0')
            return 1;
    return 0;
}

/* A type part of the opcode that is floating point (f16, f32, f64, f16x2,
 * bf16, tf32, e4m3x2, ...). */
static int is_float_op(const char *op, size_t n)
{
    for (size_t i = 0; i < n;) {
        while (i < n && op[i] == '.')
            i++;
        size_t s = i;
        while (i < n && op[i] != '.')
            i++;
        const char *t = op + s;
        size_t k = i - s;
        if ((k >= 2 && t[0] == 'f' && isdigit((unsigned char)t[1])) ||
            (k >= 4 && (memcmp(t, "bf16", 4) == 0 || memcmp(t, "tf32", 4) == 0)) ||
            (k >= 4 && t[0] == 'e' && isdigit((unsigned char)t[1]) && t[2] == 'm') ||
            (k >= 5 && memcmp(t, "ue8m0", 5) == 0))
            return 1;
    }
    return 0;
}

/* Appends the canonical text of one operand [p, end) to b; *fixes is set
 * when it holds a number or a special register (%tid.x, %ctaid.y, ...):
 * what the instruction computes depends on which. */
static void operand_text(kr__buf *b, const char *p, const char *end, const params *ps,
                         int *fixes)
{
    const char *start = p;
    while (p < end) {
        unsigned char c = (unsigned char)*p;
        if (isspace(c)) {
            p++;
        } else if (c == '%') {
            const char *s = ++p;
            while (p < end && ident_char((unsigned char)*p))
                p++;
            const char *d = p;
            while (d > s && isdigit((unsigned char)d[-1]))
                d--;
            /* %r12 -> %r: a register by its class; %tid and the like kept */
            int numbered = d > s && d < p;
            kr__buf_append(b, s - 1, (size_t)((numbered ? d : p) - s) + 1);
            *fixes |= !numbered;
        } else if (ident_start(c)) {
            const char *s = p;
            while (p < end && ident_char((unsigned char)*p))
                p++;
            int i = param_index(ps, s, (size_t)(p - s));
            if (s > start && s[-1] == '.') {
                kr__buf_append(b, s, (size_t)(p - s)); /* a suffix (%tid.x) or a keyword (.b8) */
            } else if (i >= 0) {
                char num[16];
                int n = snprintf(num, sizeof num, "P%d", i);
                kr__buf_append(b, num, (size_t)n);
            } else
                kr__buf_puts(b, "S"); /* a label, a variable, a function: not by name */
        } else if (isdigit(c)) {
            const char *s = p;
            while (p < end && (isalnum((unsigned char)*p) || *p == '.'))
                p++;
            kr__buf_append(b, s, (size_t)(p - s));
            *fixes = 1;
        } else {
            kr__buf_append(b, p, 1);
            p++;
        }
    }
}

/* Splits operands at top-level commas (not inside [], {}, ()). */
static size_t split_operands(const char *p, const char *end, const char **from, const char **to,
                             size_t max)
{
    size_t n = 0;
    int depth = 0;
    const char *s = p;
    for (; p <= end; p++) {
        if (p < end && (*p == '[' || *p == '{' || *p == '('))
            depth++;
        else if (p < end && (*p == ']' || *p == '}' || *p == ')'))
            depth--;
        else if (p == end || (*p == ',' && depth == 0)) {
            if (n < max) {
                from[n] = s;
                to[n] = p;
            }
            n++;
            s = p + 1;
        }
    }
    return n < max ? n : max;
}

typedef struct {
    kr__buf text;
    kr__buf ops[64];
} scratch;

static void reset(kr__buf *b)
{
    b->len = 0;
    kr__buf_append(b, "", 0); /* data non-NULL and "" */
}

/* The shape of the instruction [p, end) (guard, opcode, operands). Sets
 * *fixed and, for a call, *callee to its target's name. */
static uint64_t instruction_shape(scratch *w, const char *p, const char *end, const params *ps,
                                  int *fixed, const char **callee, size_t *callee_len)
{
    kr__buf *t = &w->text;
    reset(t);
    int fixes = 0;
    if (*p == '@') {
        const char *s = p;
        while (p < end && !isspace((unsigned char)*p))
            p++;
        operand_text(t, s, p, ps, &fixes); /* @%p3 -> @%p, @!%p1 -> @!%p */
        kr__buf_puts(t, " ");
        p = skip_space(p, end);
    }
    const char *op = p;
    while (p < end && !isspace((unsigned char)*p))
        p++;
    size_t op_len = (size_t)(p - op);
    kr__buf_append(t, op, op_len);
    const char *from[64], *to[64];
    size_t n = split_operands(skip_space(p, end), end, from, to, 64);
    if (n == 1 && skip_space(from[0], to[0]) == to[0])
        n = 0; /* no operands */
    for (size_t i = 0; i < n; i++) {
        reset(&w->ops[i]);
        operand_text(&w->ops[i], from[i], to[i], ps, &fixes);
    }
    /* the first two sources of a commutative operation in one order */
    if (n >= 3 && is_commutative(op, op_len) && w->ops[1].data && w->ops[2].data &&
        strcmp(w->ops[1].data, w->ops[2].data) > 0) {
        kr__buf tmp = w->ops[1];
        w->ops[1] = w->ops[2];
        w->ops[2] = tmp;
    }
    for (size_t i = 0; i < n; i++) {
        kr__buf_append(t, i ? "," : " ", 1);
        kr__buf_append(t, w->ops[i].data, w->ops[i].len);
    }
    *fixed = fixes || is_effect(op, op_len) || is_float_op(op, op_len);
    *callee = NULL;
    if (op_len >= 4 && memcmp(op, "call", 4) == 0) {
        for (size_t i = 0; i < n; i++) {
            const char *s = skip_space(from[i], to[i]);
            if (s < to[i] && ident_start((unsigned char)*s)) {
                const char *e = s;
                while (e < to[i] && ident_char((unsigned char)*e))
                    e++;
                *callee = s;
                *callee_len = (size_t)(e - s);
                break;
            }
        }
    }
    return t->oom ? 0 : XXH3_64bits(t->data ? t->data : "", t->len);
}

/* Directives inside a body that declare storage: their shape counts (the
 * size and space of a local array are part of the code), the rest (.reg,
 * .loc, .pragma, .param of a call, ...) do not. */
static int is_storage(const char *p, const char *end)
{
    static const char *const d[] = {".local", ".shared", ".const", ".global"};
    for (size_t i = 0; i < sizeof d / sizeof d[0]; i++) {
        size_t n = strlen(d[i]);
        if ((size_t)(end - p) > n && memcmp(p, d[i], n) == 0 && isspace((unsigned char)p[n]))
            return 1;
    }
    return 0;
}

static int add_call(function *f, const char *name, size_t n)
{
    for (size_t i = 0; i < f->num_calls; i++)
        if (strlen(f->calls[i]) == n && memcmp(f->calls[i], name, n) == 0)
            return 0;
    char **c = realloc(f->calls, (f->num_calls + 1) * sizeof *c);
    if (!c)
        return -1;
    f->calls = c;
    if (!(c[f->num_calls] = kr__strndup(name, n)))
        return -1;
    f->num_calls++;
    return 0;
}

/* A directive that ends with its line, not with `;` (.loc and .file: the
 * debug lines -lineinfo writes before an instruction). */
static int line_directive(const char *p, const char *end)
{
    return (end - p > 4 && memcmp(p, ".loc", 4) == 0 && isspace((unsigned char)p[4])) ||
           (end - p > 5 && memcmp(p, ".file", 5) == 0 && isspace((unsigned char)p[5]));
}

/* One statement of a body, [p, end) without its `;`: line directives and
 * labels first. */
static int statement(function *f, scratch *w, const char *p, const char *end, const params *ps)
{
    for (;;) {
        p = skip_space(p, end);
        if (line_directive(p, end)) {
            while (p < end && *p != '\n')
                p++;
            continue;
        }
        const char *s = p;
        while (p < end && ident_char((unsigned char)*p))
            p++;
        const char *colon = skip_space(p, end);
        if (p > s && ident_start((unsigned char)*s) && colon < end && *colon == ':' &&
            (colon + 1 >= end || colon[1] != ':')) {
            p = colon + 1; /* a label */
            continue;
        }
        p = s;
        break;
    }
    while (end > p && isspace((unsigned char)end[-1]))
        end--;
    if (p >= end)
        return 0;
    int fixed = 0;
    const char *callee = NULL;
    size_t callee_len = 0;
    uint64_t h;
    if (*p == '.') {
        if (!is_storage(p, end))
            return 0;
        int fixes = 0;
        reset(&w->text);
        operand_text(&w->text, p, end, ps, &fixes);
        h = XXH3_64bits(w->text.data ? w->text.data : "", w->text.len);
        fixed = 1;
    } else {
        h = instruction_shape(w, p, end, ps, &fixed, &callee, &callee_len);
        f->instructions++;
    }
    if (w->text.oom || push(&f->shapes, h) != 0 || (fixed && push(&f->fixed, h) != 0))
        return -1;
    return callee ? add_call(f, callee, callee_len) : 0;
}

/* The body [p, end) between a function's braces. */
static int body(function *f, scratch *w, const char *p, const char *end, const params *ps)
{
    const char *s = p;
    int vector = 0; /* braces inside a statement: a vector operand */
    for (; p < end; p++) {
        if (*p == '"') { /* a string (.pragma "nounroll") is not split */
            for (p++; p < end && *p != '"'; p++)
                ;
            continue;
        }
        if ((*p == '{' || *p == '}') && !vector && skip_space(s, p) == p) {
            s = p + 1; /* a scope, at the start of a statement */
            continue;
        }
        if (*p == '{')
            vector++;
        else if (*p == '}' && vector)
            vector--;
        else if (*p == ';') {
            if (statement(f, w, s, p, ps) != 0)
                return -1;
            s = p + 1;
            vector = 0;
        }
    }
    return statement(f, w, s, end, ps);
}

/* The function whose head begins at p (just after `.entry` or `.func`):
 * its name, parameters and body; *next is where scanning resumes. A
 * declaration without a body (`.extern .func ...;`) gives no function. */
static int read_function(functions *fs, scratch *w, const char *p, const char *end, int entry,
                         const char **next)
{
    params ps;
    ps.n = 0;
    p = skip_space(p, end);
    if (!entry && p < end && *p == '(') { /* a .func's return values */
        const char *q = close_paren(p, end);
        if (!q)
            return -1;
        read_params(&ps, p + 1, q - 1);
        p = skip_space(q, end);
    }
    const char *name = p;
    while (p < end && ident_char((unsigned char)*p))
        p++;
    size_t name_len = (size_t)(p - name);
    if (!name_len)
        return -1;
    p = skip_space(p, end);
    if (p < end && *p == '(') {
        const char *q = close_paren(p, end);
        if (!q)
            return -1;
        read_params(&ps, p + 1, q - 1);
        p = q;
    }
    while (p < end && *p != '{' && *p != ';')
        p++; /* performance directives: .maxntid, .reqntid, .noreturn, ... */
    if (p >= end || *p == ';') {
        *next = p < end ? p + 1 : end;
        return 0;
    }
    const char *open = p;
    int depth = 0;
    for (; p < end; p++) {
        if (*p == '{')
            depth++;
        else if (*p == '}' && --depth == 0)
            break;
    }
    if (p >= end)
        return -1;
    function *grown = realloc(fs->f, (fs->n + 1) * sizeof *grown);
    if (!grown)
        return -1;
    fs->f = grown;
    function *f = &fs->f[fs->n];
    memset(f, 0, sizeof *f);
    fs->n++;
    f->entry = entry;
    if (!(f->name = kr__strndup(name, name_len)) || body(f, w, open + 1, p, &ps) != 0)
        return -1;
    *next = p + 1;
    return 0;
}

/* `.entry` or `.func` as a word at module scope. */
static int head_at(const char *text, const char *p, const char *end, int *entry)
{
    if (p > text && (ident_char((unsigned char)p[-1]) || p[-1] == '.'))
        return 0;
    size_t left = (size_t)(end - p);
    if (left > 6 && memcmp(p, ".entry", 6) == 0 && isspace((unsigned char)p[6])) {
        *entry = 1;
        return 6;
    }
    if (left > 5 && memcmp(p, ".func", 5) == 0 && (isspace((unsigned char)p[5]) || p[5] == '(')) {
        *entry = 0;
        return 5;
    }
    return 0;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

static int append(u64s *dst, const u64s *src)
{
    for (size_t i = 0; i < src->n; i++)
        if (push(dst, src->v[i]) != 0)
            return -1;
    return 0;
}

static size_t find_function(const functions *fs, const char *name)
{
    for (size_t i = 0; i < fs->n; i++)
        if (strcmp(fs->f[i].name, name) == 0)
            return i;
    return SIZE_MAX;
}

/* An entry's code: its body and every function it reaches through calls,
 * each once. */
static int kernel_of(const functions *fs, size_t entry, kr__ptx_kernel *k)
{
    u64s shapes = {0}, fixed = {0};
    size_t *stack = malloc((fs->n + 1) * sizeof *stack);
    char *seen = calloc(fs->n + 1, 1);
    int rc = stack && seen ? 0 : -1;
    size_t top = 0;
    if (rc == 0) {
        stack[top++] = entry;
        seen[entry] = 1;
    }
    while (rc == 0 && top) {
        const function *f = &fs->f[stack[--top]];
        k->instructions += f->instructions;
        rc = append(&shapes, &f->shapes) || append(&fixed, &f->fixed) ? -1 : 0;
        for (size_t c = 0; rc == 0 && c < f->num_calls; c++) {
            size_t i = find_function(fs, f->calls[c]);
            if (i != SIZE_MAX && !seen[i]) {
                seen[i] = 1;
                stack[top++] = i;
            }
        }
    }
    free(stack);
    free(seen);
    if (rc == 0 && !(k->name = kr__strdup(fs->f[entry].name)))
        rc = -1;
    if (rc != 0) {
        free(shapes.v);
        free(fixed.v);
        return -1;
    }
    if (shapes.n) /* an empty body has no array to sort */
        qsort(shapes.v, shapes.n, sizeof *shapes.v, cmp_u64);
    if (fixed.n)
        qsort(fixed.v, fixed.n, sizeof *fixed.v, cmp_u64);
    k->shapes = shapes.v;
    k->num_shapes = shapes.n;
    k->fixed = fixed.v;
    k->num_fixed = fixed.n;
    return 0;
}

void kr__ptx_code_free(kr__ptx_code *c)
{
    if (!c)
        return;
    for (size_t i = 0; i < c->num_kernels; i++) {
        free(c->kernels[i].name);
        free(c->kernels[i].shapes);
        free(c->kernels[i].fixed);
    }
    free(c->kernels);
    memset(c, 0, sizeof *c);
}

int kr__ptx_code_read(const char *ptx, size_t len, kr__ptx_code *out, char *why, size_t why_size)
{
    memset(out, 0, sizeof *out);
    functions fs = {NULL, 0};
    scratch w;
    memset(&w, 0, sizeof w);
    char *text = ptx ? kr__ptx_blank_comments(ptx, len) : NULL;
    int rc = text ? 0 : -1;
    const char *end = text ? text + len : NULL;
    int depth = 0;
    for (const char *p = text; rc == 0 && p && p < end;) {
        int entry = 0, n = 0;
        if (*p == '"') {
            for (p++; p < end && *p != '"'; p++)
                ;
            p++;
        } else if (*p == '{' || *p == '}') {
            depth += *p == '{' ? 1 : -1; /* not a function's: already skipped */
            p++;
        } else if (depth == 0 && *p == '.' && (n = head_at(text, p, end, &entry)) > 0) {
            const char *next = end;
            if (read_function(&fs, &w, p + n, end, entry, &next) != 0) {
                snprintf(why, why_size, "a %s the PTX reader cannot follow",
                         entry ? ".entry" : ".func");
                rc = -2;
            }
            p = next;
        } else {
            p++;
        }
    }
    for (size_t i = 0; rc == 0 && i < fs.n; i++) {
        out->instructions += fs.f[i].instructions;
        if (!fs.f[i].entry)
            continue;
        kr__ptx_kernel *k = realloc(out->kernels, (out->num_kernels + 1) * sizeof *k);
        if (!k) {
            rc = -1;
            break;
        }
        out->kernels = k;
        memset(&k[out->num_kernels], 0, sizeof *k);
        rc = kernel_of(&fs, i, &k[out->num_kernels]);
        out->num_kernels++;
    }
    if (rc == -1)
        snprintf(why, why_size, "out of memory");
    for (size_t i = 0; i < fs.n; i++)
        function_free(&fs.f[i]);
    free(fs.f);
    kr__buf_free(&w.text);
    for (size_t i = 0; i < sizeof w.ops / sizeof w.ops[0]; i++)
        kr__buf_free(&w.ops[i]);
    free(text);
    if (rc != 0) {
        kr__ptx_code_free(out);
        return -1;
    }
    return 0;
}

size_t kr__ptx_statement_count(const char *ptx, size_t len)
{
    char *text = ptx ? kr__ptx_blank_comments(ptx, len) : NULL;
    size_t n = 0;
    for (size_t i = 0; text && i < len; i++)
        n += text[i] == ';';
    if (ptx && !text) /* out of memory: every ';' then */
        for (size_t i = 0; i < len; i++)
            n += ptx[i] == ';';
    free(text);
    return n;
}

const kr__ptx_kernel *kr__ptx_code_kernel(const kr__ptx_code *c, const char *name)
{
    for (size_t i = 0; c && name && i < c->num_kernels; i++)
        if (strcmp(c->kernels[i].name, name) == 0)
            return &c->kernels[i];
    return NULL;
}

/* The size of the intersection of two sorted multisets. */
static size_t common(const uint64_t *a, size_t na, const uint64_t *b, size_t nb)
{
    size_t i = 0, j = 0, n = 0;
    while (i < na && j < nb) {
        if (a[i] < b[j]) {
            i++;
        } else if (b[j] < a[i]) {
            j++;
        } else {
            n++;
            i++;
            j++;
        }
    }
    return n;
}

double kr__ptx_similarity(const kr__ptx_kernel *a, const kr__ptx_kernel *b)
{
    size_t most = a->num_shapes > b->num_shapes ? a->num_shapes : b->num_shapes;
    if (!most)
        return 1;
    return (double)common(a->shapes, a->num_shapes, b->shapes, b->num_shapes) / (double)most;
}

int kr__ptx_near_copy(const kr__ptx_kernel *k, const kr__ptx_kernel *ref)
{
    if (common(k->fixed, k->num_fixed, ref->fixed, ref->num_fixed) != ref->num_fixed)
        return 0;
    return kr__ptx_similarity(k, ref) >= KR__PTX_NEAR_COPY;
}
