/* The preprocessor's view of a source: directives and include-like
 * operators, found the way NVRTC's front end finds them (translation phases
 * 1-3 of C++: trigraphs by mode, line splices including backslash-CR-LF,
 * comments as white space even across lines, digraphs, raw strings and digit
 * separators by mode). Each rule was checked against NVRTC 13; the unit
 * tests in test_compile_safety.c hold them. */
#include "compile/pp_scan.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_COND 512 /* nested #if groups */

int kr__pp_mode_of_std(const char *std, kr__pp_mode *mode)
{
    static const struct {
        const char *name;
        kr__pp_mode mode;
    } known[] = {
        {"c++03", {0, 0, 1, 0}}, {"c++11", {1, 0, 1, 0}}, {"c++14", {1, 1, 1, 0}},
        {"c++17", {1, 1, 0, 0}}, {"c++20", {1, 1, 0, 0}},
    };
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        if (strcmp(std, known[i].name) == 0) {
            *mode = known[i].mode;
            return 0;
        }
    return -1;
}

/* ---- reading logical characters (line splices removed) ---- */

typedef struct {
    const char *s;
    size_t n;
    size_t i;      /* physical position of the current logical character */
    unsigned line; /* physical line of position i */
} rd;

static void splices(rd *r)
{
    while (r->i < r->n && r->s[r->i] == '\\') {
        size_t j = r->i + 1;
        if (j < r->n && r->s[j] == '\r')
            j++;
        if (j >= r->n || r->s[j] != '\n')
            return;
        r->i = j + 1;
        r->line++;
    }
}

static inline int cur(const rd *r)
{
    return r->i < r->n ? (unsigned char)r->s[r->i] : -1;
}

static inline void adv(rd *r)
{
    if (r->i >= r->n)
        return;
    if (r->s[r->i] == '\n')
        r->line++;
    r->i++;
    if (r->i < r->n && r->s[r->i] == '\\')
        splices(r);
}

static int ahead(const rd *r)
{
    rd t = *r;
    adv(&t);
    return cur(&t);
}

static int is_hspace(int c)
{
    return c == ' ' || c == '\t' || c == '\f' || c == '\v' || c == '\r';
}

static int is_ident_start(int c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == '$' || c >= 0x80;
}

static int is_ident(int c)
{
    return is_ident_start(c) || (c >= '0' && c <= '9');
}

/* ---- the scanner ---- */

typedef struct {
    int at_if;    /* parenthesis depth at the #if */
    int max_end;  /* deepest depth a finished branch left */
    int has_else;
} cond_group;

typedef struct {
    rd r;
    kr__pp_scan *out;
    kr__pp_mode mode;
    int depth;        /* '(' not yet closed in the text outside directives */
    int ncond;
    cond_group cond[MAX_COND];
    int after_defined; /* 1 after `defined`, 2 after `defined (`: an operand follows */
} scanner;

static void refuse(scanner *S, unsigned line, const char *why)
{
    if (S->out->refused || S->mode.lenient)
        return;
    S->out->refused = 1;
    S->out->refused_line = line;
    snprintf(S->out->refused_why, sizeof S->out->refused_why, "%s", why);
}

static int stopped(const scanner *S)
{
    return S->out->refused || S->out->oom;
}

static kr__pp_item *add_item(scanner *S, int kind, unsigned line)
{
    kr__pp_scan *o = S->out;
    if (o->count == o->cap) {
        size_t cap = o->cap ? o->cap * 2 : 16;
        kr__pp_item *grown = realloc(o->items, cap * sizeof *grown);
        if (!grown) {
            o->oom = 1;
            return NULL;
        }
        o->items = grown;
        o->cap = cap;
    }
    kr__pp_item *it = &o->items[o->count++];
    memset(it, 0, sizeof *it);
    it->kind = kind;
    it->line = line;
    return it;
}

static char *dup_n(scanner *S, const char *s, size_t n)
{
    char *p = malloc(n + 1);
    if (!p) {
        S->out->oom = 1;
        return NULL;
    }
    memcpy(p, s, n);
    p[n] = '\0';
    return p;
}

/* At a comment: skips it and returns 1 (0 when not at one). *newline is set
 * when a block comment spans lines. Comments are most of a header's bytes:
 * they are skipped on physical bytes, minding splices. */
static int skip_comment(scanner *S, int *newline)
{
    rd *r = &S->r;
    if (cur(r) != '/')
        return 0;
    int a = ahead(r);
    if (a != '/' && a != '*')
        return 0;
    adv(r);
    adv(r);
    const char *s = r->s;
    size_t i = r->i, n = r->n;
    if (a == '/') { /* to the newline no splice continues */
        for (; i < n; i++) {
            const char *nl = memchr(s + i, '\n', n - i);
            if (!nl) {
                i = n;
                break;
            }
            i = (size_t)(nl - s);
            size_t b = i;
            if (b > r->i && s[b - 1] == '\r')
                b--;
            if (b > r->i && s[b - 1] == '\\') {
                r->line++;
                continue;
            }
            break;
        }
        r->i = i;
        return 1;
    }
    for (;;) {
        const char *star = memchr(s + i, '*', n - i);
        size_t end = star ? (size_t)(star - s) : n;
        unsigned lines = 0;
        for (const char *nl = s + i; (nl = memchr(nl, '\n', (size_t)(s + end - nl))) != NULL; nl++)
            lines++;
        r->line += lines;
        if (lines && newline)
            *newline = 1;
        if (!star)
            break;
        rd t = {s, n, end + 1, r->line};
        splices(&t);
        if (cur(&t) == '/') {
            r->i = t.i;
            r->line = t.line;
            adv(r);
            return 1;
        }
        i = end + 1;
    }
    r->i = n; /* unterminated: nothing after it is read by anyone */
    return 1;
}

/* White space and comments on a directive line (a block comment may hide
 * newlines: it still counts as one space of the same line). */
static void skip_hspace(scanner *S)
{
    for (;;) {
        int c = cur(&S->r);
        if (is_hspace(c))
            adv(&S->r);
        else if (!skip_comment(S, NULL))
            return;
    }
}

/* Reads an identifier into buf (cut at size-1; the rest is consumed). */
static void read_ident(scanner *S, char *buf, size_t size)
{
    rd *r = &S->r;
    size_t k = 0;
    for (;;) {
        size_t i = r->i;
        while (i < r->n && is_ident((unsigned char)r->s[i])) {
            if (k + 1 < size)
                buf[k++] = r->s[i];
            i++;
        }
        r->i = i;
        if (i < r->n && r->s[i] == '\\') {
            splices(r);
            if (r->i != i) /* spliced: the identifier goes on */
                continue;
        }
        break;
    }
    buf[k] = '\0';
}

/* Bytes that change nothing the scanner tracks outside directives: white
 * space but newlines, and punctuation but / # % " ' ( ) \ ? . */
static const unsigned char inert[256] = {
    [' '] = 1, ['\t'] = 1, ['\f'] = 1, ['\v'] = 1, ['\r'] = 1, [';'] = 1, [','] = 1, ['{'] = 1,
    ['}'] = 1, ['['] = 1, [']'] = 1, ['<'] = 1, ['>'] = 1, ['='] = 1, ['+'] = 1, ['-'] = 1,
    ['*'] = 1, ['&'] = 1, ['|'] = 1, ['!'] = 1, ['~'] = 1, ['^'] = 1, [':'] = 1, ['@'] = 1,
};

/* Skips a run of inert bytes; returns whether anything but white space
 * was among them. */
static int skip_inert(rd *r)
{
    int text = 0;
    size_t i = r->i;
    while (i < r->n && inert[(unsigned char)r->s[i]]) {
        text |= !is_hspace((unsigned char)r->s[i]);
        i++;
    }
    r->i = i;
    if (i < r->n && r->s[i] == '\\')
        splices(r);
    return text;
}

static void read_quoted(scanner *S, int quote)
{
    rd *r = &S->r;
    adv(r);
    for (;;) {
        int c = cur(r);
        if (c == -1 || c == '\n')
            return; /* unterminated: NVRTC ends it at the line's end too */
        adv(r);
        if (c == quote)
            return;
        if (c == '\\' && cur(r) != -1 && cur(r) != '\n')
            adv(r);
    }
}

/* R"delim( ... )delim": at the opening quote. Inside, splices are
 * reverted, so the text is read physically. */
static void read_raw(scanner *S)
{
    rd *r = &S->r;
    unsigned line = r->line;
    size_t p = r->i + 1, d = p;
    while (d < r->n && d - p <= 16 && !strchr(" ()\\\t\v\f\r\n", r->s[d]))
        d++;
    if (d >= r->n || r->s[d] != '(' || d - p > 16) {
        refuse(S, line, "a malformed raw string literal");
        adv(r); /* lenient: read on after the quote */
        return;
    }
    size_t dlen = d - p;
    for (size_t q = d + 1; q + 1 + dlen < r->n; q++) {
        if (r->s[q] == ')' && memcmp(r->s + q + 1, r->s + p, dlen) == 0 &&
            r->s[q + 1 + dlen] == '"') {
            for (size_t k = r->i; k < q; k++)
                if (r->s[k] == '\n')
                    r->line++;
            r->i = q + dlen + 2;
            splices(r);
            return;
        }
    }
    refuse(S, line, "an unterminated raw string literal");
    adv(r);
}

static void read_number(scanner *S)
{
    rd *r = &S->r;
    for (;;) {
        int c = cur(r);
        int exponent = c == 'e' || c == 'E' || c == 'p' || c == 'P';
        if (exponent && (ahead(r) == '+' || ahead(r) == '-')) {
            adv(r);
            adv(r);
        } else if (c == '\'' && S->mode.digit_separators && is_ident(ahead(r))) {
            adv(r);
            adv(r);
        } else if (is_ident(c) || c == '.') {
            adv(r);
        } else {
            return;
        }
    }
}

/* A header name: at '<' or '"'; reads to the closing delimiter on the same
 * logical line. Returns the name (malloc'd), NULL when unterminated. */
static char *read_header_name(scanner *S, int *delim)
{
    rd *r = &S->r;
    int open = cur(r), close = open == '<' ? '>' : '"';
    *delim = open;
    adv(r);
    char small[256];
    size_t k = 0, cap = sizeof small;
    char *buf = small;
    for (;;) {
        int c = cur(r);
        if (c == -1 || c == '\n') {
            if (buf != small)
                free(buf);
            return NULL;
        }
        adv(r);
        if (c == close)
            break;
        if (k + 1 >= cap) {
            char *grown = malloc(cap * 2);
            if (!grown) {
                S->out->oom = 1;
                if (buf != small)
                    free(buf);
                return NULL;
            }
            memcpy(grown, buf, k);
            if (buf != small)
                free(buf);
            buf = grown;
            cap *= 2;
        }
        buf[k++] = (char)c;
    }
    char *name = dup_n(S, buf, k);
    if (buf != small)
        free(buf);
    return name;
}

/* The operand of an #include-like directive or __has_include: a literal
 * header name, or anything else (computed, left NULL). */
static void read_operand(scanner *S, kr__pp_item *it)
{
    rd *r = &S->r;
    it->span_start = r->i;
    unsigned line0 = r->line;
    if (cur(r) == '<' || cur(r) == '"') {
        it->name = read_header_name(S, &it->delim);
        it->span_end = r->i;
        it->span_splices = r->line - line0;
        if (!it->name)
            it->delim = 0;
    } else {
        it->span_end = r->i;
    }
}

static int has_include_like(const char *id)
{
    /* the operators and every wrapper of them begin with '_' */
    if (id[0] != '_')
        return 0;
    for (const char *p = id; *p; p++)
        if ((*p == 'h' && strncmp(p, "has_include", 11) == 0) ||
            (*p == 'H' && strncmp(p, "HAS_INCLUDE", 11) == 0))
            return 1;
    return strcmp(id, "__has_embed") == 0;
}

static void has_include_op(scanner *S, const char *id, unsigned line)
{
    kr__pp_item *it = add_item(S, KR__PP_HAS_INCLUDE, line);
    if (!it || !(it->word = dup_n(S, id, strlen(id))))
        return;
    skip_hspace(S);
    if (cur(&S->r) != '(')
        return; /* the operator alone, e.g. an alias: no literal operand */
    adv(&S->r);
    skip_hspace(S);
    read_operand(S, it);
    if (!it->name)
        return;
    skip_hspace(S);
    if (cur(&S->r) != ')') { /* more than a header name: not a literal */
        free(it->name);
        it->name = NULL;
        it->delim = 0;
    }
}

/* The first word of a pragma's text, two for a namespace ("GCC dependency"). */
static void pragma_words(const char *text, char *out, size_t size)
{
    static const char *const namespaces[] = {"GCC", "clang", "nv", "STDC", "omp", "acc"};
    const char *p = text;
    size_t k = 0;
    out[0] = '\0';
    for (int w = 0; w < 2; w++) {
        while (*p == ' ' || *p == '\t')
            p++;
        const char *s = p;
        while (is_ident((unsigned char)*p))
            p++;
        size_t n = (size_t)(p - s);
        if (n == 0 || k + n + 2 > size)
            break;
        if (w)
            out[k++] = ' ';
        memcpy(out + k, s, n);
        k += n;
        out[k] = '\0';
        int space = 0;
        for (size_t i = 0; i < sizeof namespaces / sizeof namespaces[0]; i++)
            space |= strcmp(out, namespaces[i]) == 0;
        if (!space)
            break;
    }
}

/* _Pragma ( string-literal ): the words of a plain literal; "" otherwise. */
static void pragma_op(scanner *S, unsigned line)
{
    kr__pp_item *it = add_item(S, KR__PP_PRAGMA, line);
    if (!it)
        return;
    rd *r = &S->r;
    char text[256], words[64] = "";
    size_t k = 0;
    skip_hspace(S);
    if (cur(r) == '(') {
        adv(r);
        skip_hspace(S);
        char prefix[8];
        if (is_ident_start(cur(r)))
            read_ident(S, prefix, sizeof prefix);
        if (cur(r) == '"') {
            adv(r);
            int c;
            while ((c = cur(r)) != -1 && c != '\n' && c != '"') {
                adv(r);
                if (c == '\\' && (cur(r) == '"' || cur(r) == '\\')) {
                    c = cur(r);
                    adv(r);
                }
                if (k + 1 < sizeof text)
                    text[k++] = (char)c;
            }
            text[k] = '\0';
            if (c == '"') {
                adv(r);
                skip_hspace(S);
                if (cur(r) == ')')
                    pragma_words(text, words, sizeof words);
            }
        }
    }
    it->word = dup_n(S, words, strlen(words));
}

/* One token outside a directive's name (in_directive: on a directive
 * line, where parentheses are not counted). */
static void token(scanner *S, int in_directive)
{
    rd *r = &S->r;
    int c = cur(r);
    unsigned line = r->line;
    if (is_hspace(c)) {
        adv(r);
        return;
    }
    if (c == '/' && skip_comment(S, NULL))
        return;
    if (is_ident_start(c)) {
        char id[64];
        read_ident(S, id, sizeof id);
        if (cur(r) == '\\' && (ahead(r) == 'u' || ahead(r) == 'U')) {
            refuse(S, line, "a universal character name (\\u) outside a literal");
            return;
        }
        if (cur(r) == '"' && S->mode.raw_strings &&
            (!strcmp(id, "R") || !strcmp(id, "u8R") || !strcmp(id, "uR") || !strcmp(id, "UR") ||
             !strcmp(id, "LR"))) {
            S->after_defined = 0;
            read_raw(S);
            return;
        }
        int operand = S->after_defined != 0;
        S->after_defined = id[0] == 'd' && strcmp(id, "defined") == 0;
        if (!operand && has_include_like(id))
            has_include_op(S, id, line);
        else if (!operand && id[0] == '_' && strcmp(id, "_Pragma") == 0)
            pragma_op(S, line);
        return;
    }
    if (c == '\\' && (ahead(r) == 'u' || ahead(r) == 'U')) {
        refuse(S, line, "a universal character name (\\u) outside a literal");
        adv(r);
        return;
    }
    if (c == '(' && S->after_defined == 1) {
        S->after_defined = 2;
        adv(r);
        return;
    }
    S->after_defined = 0;
    if ((c >= '0' && c <= '9') || (c == '.' && ahead(r) >= '0' && ahead(r) <= '9')) {
        read_number(S);
    } else if (c == '"' || c == '\'') {
        read_quoted(S, c);
    } else {
        if (!in_directive && c == '(')
            S->depth++;
        else if (!in_directive && c == ')' && S->depth > 0)
            S->depth--;
        adv(r);
    }
}

static void rest_of_line(scanner *S)
{
    while (!stopped(S) && cur(&S->r) != -1 && cur(&S->r) != '\n')
        token(S, 1);
}

/* #if groups: the text's parenthesis depth after a group is the deepest
 * any of its branches (or skipping it) leaves, so a ')' hidden in a dead
 * branch cannot make an include inside a macro's arguments look outside. */
static void cond_directive(scanner *S, const char *d, unsigned line)
{
    if (!strcmp(d, "if") || !strcmp(d, "ifdef") || !strcmp(d, "ifndef")) {
        if (S->ncond == MAX_COND) {
            refuse(S, line, "#if groups nested too deep");
            return;
        }
        S->cond[S->ncond].at_if = S->depth;
        S->cond[S->ncond].max_end = S->depth;
        S->cond[S->ncond].has_else = 0;
        S->ncond++;
    } else if (S->ncond && (!strcmp(d, "elif") || !strcmp(d, "else") || !strcmp(d, "elifdef") ||
                            !strcmp(d, "elifndef"))) {
        cond_group *g = &S->cond[S->ncond - 1];
        if (S->depth > g->max_end)
            g->max_end = S->depth;
        S->depth = g->at_if;
        if (!strcmp(d, "else"))
            g->has_else = 1;
    } else if (S->ncond && !strcmp(d, "endif")) {
        S->ncond--;
        int end = S->cond[S->ncond].max_end;
        if (S->depth > end)
            end = S->depth;
        S->depth = end;
    }
}

static void directive(scanner *S)
{
    rd *r = &S->r;
    unsigned line = r->line;
    if (cur(r) == '%')
        adv(r);
    adv(r);
    skip_hspace(S);
    int c = cur(r);
    if (c == '\\' && (ahead(r) == 'u' || ahead(r) == 'U')) {
        refuse(S, line, "a universal character name (\\u) in a directive name");
        return;
    }
    if (c >= '0' && c <= '9') { /* # 12 "file": a line marker */
        read_number(S);
        skip_hspace(S);
        kr__pp_item *it = add_item(S, KR__PP_LINE, line);
        if (it && cur(r) == '"') {
            int delim;
            it->word = read_header_name(S, &delim);
        }
        rest_of_line(S);
        return;
    }
    if (!is_ident_start(c)) {
        rest_of_line(S);
        return;
    }
    char d[32];
    read_ident(S, d, sizeof d);
    if (cur(r) == '\\' && (ahead(r) == 'u' || ahead(r) == 'U')) {
        refuse(S, line, "a universal character name (\\u) in a directive name");
        return;
    }
    S->after_defined = 0;
    if (strstr(d, "include") || !strcmp(d, "import") || !strcmp(d, "embed")) {
        kr__pp_item *it = add_item(S, KR__PP_INCLUDE, line);
        if (!it || !(it->word = dup_n(S, d, strlen(d))))
            return;
        it->in_parens = S->depth > 0;
        skip_hspace(S);
        read_operand(S, it);
        if (!it->name) { /* computed: the operand is the rest of the line */
            size_t at = (size_t)(it - S->out->items);
            rest_of_line(S); /* may grow (move) the items */
            if (!stopped(S))
                S->out->items[at].span_end = r->i;
            return;
        }
    } else if (!strcmp(d, "define") || !strcmp(d, "undef")) {
        skip_hspace(S);
        kr__pp_item *it = add_item(S, d[0] == 'd' ? KR__PP_DEFINE : KR__PP_UNDEF, line);
        if (!it)
            return;
        char name[128];
        read_ident(S, name, sizeof name);
        if (!(it->word = dup_n(S, name, strlen(name))))
            return;
        if (d[0] == 'd' && cur(r) == '(') {
            it->function_like = 1;
            while (cur(r) != -1 && cur(r) != '\n' && cur(r) != ')')
                adv(r);
            if (cur(r) == ')')
                adv(r);
        }
        it->body_start = r->i;
        size_t at = (size_t)(it - S->out->items);
        rest_of_line(S); /* may grow (move) the items */
        if (!S->out->oom)
            S->out->items[at].body_end = r->i;
        return;
    } else if (!strcmp(d, "pragma")) {
        skip_hspace(S);
        size_t start = r->i;
        char text[128];
        size_t k = 0;
        while (cur(r) != -1 && cur(r) != '\n' && k + 1 < sizeof text && r->i - start < 512) {
            int ch = cur(r);
            text[k++] = is_hspace(ch) ? ' ' : (char)ch;
            adv(r);
        }
        text[k] = '\0';
        char words[64];
        pragma_words(text, words, sizeof words);
        kr__pp_item *it = add_item(S, KR__PP_PRAGMA, line);
        if (it)
            it->word = dup_n(S, words, strlen(words));
    } else if (!strcmp(d, "line")) {
        skip_hspace(S);
        read_number(S);
        skip_hspace(S);
        kr__pp_item *it = add_item(S, KR__PP_LINE, line);
        if (it && cur(r) == '"') {
            int delim;
            it->word = read_header_name(S, &delim);
        }
    } else {
        cond_directive(S, d, line);
        if (!strcmp(d, "ifdef") || !strcmp(d, "ifndef") || !strcmp(d, "elifdef") ||
            !strcmp(d, "elifndef"))
            S->after_defined = 1;
    }
    rest_of_line(S);
    S->after_defined = 0;
}

static void check_trigraphs(scanner *S)
{
    const char *s = S->r.s;
    unsigned line = 1;
    for (size_t i = 0; i + 2 < S->r.n; i++) {
        if (s[i] == '\n')
            line++;
        if (s[i] == '?' && s[i + 1] == '?' && strchr("=/'()!<>-", s[i + 2]) && s[i + 2]) {
            refuse(S, line, "a trigraph (??x), which NVRTC translates in this language mode");
            return;
        }
    }
}

int kr__pp_scan_text(kr__pp_scan *scan, const char *text, size_t len, kr__pp_mode mode)
{
    memset(scan, 0, sizeof *scan);
    scanner *S = calloc(1, sizeof *S);
    if (!S)
        return -1;
    S->r.s = text;
    S->r.n = len;
    S->r.line = 1;
    S->out = scan;
    S->mode = mode;
    if (mode.trigraphs && !mode.lenient)
        check_trigraphs(S);
    splices(&S->r);
    int at_bol = 1;
    while (!stopped(S) && cur(&S->r) != -1) {
        int c = cur(&S->r);
        if (c == '\n') {
            at_bol = 1;
            adv(&S->r);
        } else if (inert[c]) {
            if (skip_inert(&S->r)) {
                at_bol = 0;
                S->after_defined = 0;
            }
        } else if (c == '/' && (ahead(&S->r) == '/' || ahead(&S->r) == '*')) {
            int nl = 0;
            skip_comment(S, &nl);
            if (nl)
                at_bol = 1;
        } else if (at_bol && (c == '#' || (c == '%' && ahead(&S->r) == ':'))) {
            directive(S);
            at_bol = 0;
        } else {
            at_bol = 0;
            token(S, 0);
        }
    }
    free(S);
    return scan->oom ? -1 : 0;
}

void kr__pp_scan_free(kr__pp_scan *scan)
{
    for (size_t i = 0; i < scan->count; i++) {
        free(scan->items[i].word);
        free(scan->items[i].name);
    }
    free(scan->items);
    memset(scan, 0, sizeof *scan);
}

char *kr__pp_text(const char *text, size_t start, size_t end)
{
    char *out = malloc(end - start + 1);
    if (!out)
        return NULL;
    rd r = {text, end, start, 0};
    splices(&r);
    size_t k = 0;
    while (cur(&r) != -1) {
        int c = cur(&r);
        if (c == '/' && ahead(&r) == '/')
            break; /* a line comment runs to the body's end */
        if (c == '/' && ahead(&r) == '*') {
            adv(&r);
            adv(&r);
            while (cur(&r) != -1 && !(cur(&r) == '*' && ahead(&r) == '/'))
                adv(&r);
            adv(&r);
            adv(&r);
            c = ' ';
        } else {
            adv(&r);
        }
        if (is_hspace(c) || c == '\n')
            c = ' ';
        if (c == ' ' && (k == 0 || out[k - 1] == ' '))
            continue;
        out[k++] = (char)c;
    }
    while (k && out[k - 1] == ' ')
        k--;
    out[k] = '\0';
    return out;
}

/* ---- a second look, independent of the lexer's state ---- */

static void skip_blank_raw(rd *r)
{
    for (;;) {
        int c = cur(r);
        if (is_hspace(c)) {
            adv(r);
        } else if (c == '/' && ahead(r) == '*') {
            adv(r);
            adv(r);
            while (cur(r) != -1 && !(cur(r) == '*' && ahead(r) == '/'))
                adv(r);
            adv(r);
            adv(r);
        } else {
            return;
        }
    }
}

/* At '<' or '"': whether the name starts with '/'. */
static int absolute_operand(rd *r)
{
    if (cur(r) != '<' && cur(r) != '"')
        return 0;
    adv(r);
    while (is_hspace(cur(r)))
        adv(r);
    return cur(r) == '/';
}

unsigned kr__pp_absolute_anywhere(const char *text, size_t len)
{
    rd r = {text, len, 0, 1};
    splices(&r);
    int bol = 1;
    while (cur(&r) != -1) {
        int c = cur(&r);
        unsigned line = r.line;
        if (c == '\n') {
            bol = 1;
            adv(&r);
            continue;
        }
        if (is_hspace(c)) {
            adv(&r);
            continue;
        }
        int hash = c == '#' || (c == '%' && ahead(&r) == ':') ||
                   (c == '?' && ahead(&r) == '?');
        if (bol && hash) {
            adv(&r);
            while (cur(&r) == ':' || cur(&r) == '?' || cur(&r) == '=')
                adv(&r);
            skip_blank_raw(&r);
            char id[32];
            size_t k = 0;
            while (is_ident(cur(&r))) {
                if (k + 1 < sizeof id)
                    id[k++] = (char)cur(&r);
                adv(&r);
            }
            id[k] = '\0';
            skip_blank_raw(&r);
            if ((strstr(id, "include") || strstr(id, "import") || strstr(id, "embed")) &&
                absolute_operand(&r))
                return line;
            bol = 0;
            continue;
        }
        bol = 0;
        if (is_ident_start(c)) {
            char id[64];
            size_t k = 0;
            while (is_ident(cur(&r))) {
                if (k + 1 < sizeof id)
                    id[k++] = (char)cur(&r);
                adv(&r);
            }
            id[k] = '\0';
            if (strstr(id, "has_include") || strstr(id, "HAS_INCLUDE") || strstr(id, "has_embed")) {
                skip_blank_raw(&r);
                if (cur(&r) == '(') {
                    adv(&r);
                    skip_blank_raw(&r);
                    if (absolute_operand(&r))
                        return line;
                }
            }
            continue;
        }
        adv(&r);
    }
    return 0;
}
