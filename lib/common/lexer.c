/* The C/CUDA lexer (lexer.h): tokens, line splices, comments, literals,
 * directives and the conditional groups around each token. */
#include "common/lexer.h"

#include <stdlib.h>
#include <string.h>

/* A conditional group's byte: the current branch and what earlier branches
 * of the same #if chain settled. */
enum { BR_UNKNOWN = 0, BR_LIVE = 1, BR_DEAD = 2 };
#define G_BRANCH 0x03u
#define G_DONE 0x04u   /* an earlier or the current branch is certainly taken */
#define G_MAYBE 0x08u  /* an earlier branch may have been taken */

/* Past any line splices at p (backslash + \n or \r\n, nothing between). */
static size_t skip_splices(const char *s, size_t n, size_t p)
{
    while (p < n && s[p] == '\\') {
        if (p + 1 < n && s[p + 1] == '\n')
            p += 2;
        else if (p + 2 < n && s[p + 1] == '\r' && s[p + 2] == '\n')
            p += 3;
        else
            break;
    }
    return p;
}

/* The character the compiler sees at *p after splices (*p moves onto it),
 * -1 at the end. */
static int ch(const kr__lexer *L, size_t *p)
{
    *p = skip_splices(L->src, L->len, *p);
    return *p < L->len ? (unsigned char)L->src[*p] : -1;
}

static int is_digit(int c)
{
    return c >= '0' && c <= '9';
}

static int ident_char(int c)
{
    return c == '_' || c == '$' || is_digit(c) || (c >= 'a' && c <= 'z') ||
           (c >= 'A' && c <= 'Z') || c >= 0x80;
}

static int ident_start(int c)
{
    return ident_char(c) && !is_digit(c);
}

/* Keyword-ish names: not renamed by fingerprints, not the source's choice.
 * Sorted (strcmp order) for bsearch. */
static const char *const keywords[] = {
    "_Alignas", "_Alignof", "_Atomic", "_Bool", "_Complex", "_Generic", "_Imaginary", "_Noreturn",
    "_Static_assert", "_Thread_local", "__align__", "__asm__", "__attribute__", "__cluster_dims__",
    "__constant__", "__device__", "__forceinline__", "__global__", "__grid_constant__", "__host__",
    "__inline__", "__launch_bounds__", "__managed__", "__noinline__", "__restrict", "__restrict__",
    "__shared__", "__volatile__", "alignas", "alignof", "asm", "auto", "blockDim", "blockIdx",
    "bool", "break", "case", "catch", "char", "char16_t", "char32_t", "char8_t", "class",
    "co_await", "co_return", "co_yield", "const", "const_cast", "consteval", "constexpr",
    "constinit", "continue", "decltype", "default", "defined", "delete", "do", "double",
    "dynamic_cast", "else", "enum", "explicit", "export", "extern", "false", "float", "for",
    "friend", "goto", "gridDim", "if", "inline", "int", "long", "mutable", "namespace", "new",
    "noexcept", "nullptr", "operator", "private", "protected", "public", "register",
    "reinterpret_cast", "requires", "restrict", "return", "short", "signed", "sizeof", "static",
    "static_assert", "static_cast", "struct", "switch", "template", "this", "threadIdx",
    "thread_local", "throw", "true", "try", "typedef", "typeid", "typename", "union", "unsigned",
    "using", "virtual", "void", "volatile", "warpSize", "wchar_t", "while",
};

typedef struct {
    const char *s;
    size_t n;
} span;

static int cmp_keyword(const void *key, const void *elem)
{
    const span *k = key;
    const char *w = *(const char *const *)elem;
    size_t wn = strlen(w);
    int c = memcmp(k->s, w, k->n < wn ? k->n : wn);
    return c ? c : (k->n > wn) - (k->n < wn);
}

static int is_keyword(const char *s, size_t n)
{
    span k = {s, n};
    return bsearch(&k, keywords, sizeof keywords / sizeof keywords[0], sizeof keywords[0],
                   cmp_keyword) != NULL;
}

void kr__lex_init(kr__lexer *L, const char *src, size_t len)
{
    memset(L, 0, sizeof *L);
    L->src = src ? src : "";
    L->len = src ? len : 0;
    L->line = 1;
    L->line_start = 1;
}

/* Moves pos to `to`, counting the line ends passed. */
static void advance(kr__lexer *L, size_t to)
{
    const char *s = L->src;
    for (size_t i = L->pos; i < to; i++)
        L->line += s[i] == '\n';
    L->pos = to;
}

/* ---- conditional groups ---- */

static void set_branch(kr__lexer *L, uint32_t level, unsigned branch)
{
    uint8_t *g = &L->group[level];
    L->dead_levels -= (*g & G_BRANCH) == BR_DEAD;
    *g = (uint8_t)((*g & ~G_BRANCH) | branch);
    L->dead_levels += branch == BR_DEAD;
}

/* v: 1 or 0 when the condition is a literal, -1 when unknown. */
static void apply_conditional(kr__lexer *L, int directive, int v)
{
    if (directive == KR__DIR_IF || directive == KR__DIR_IFDEF || directive == KR__DIR_IFNDEF) {
        if (directive != KR__DIR_IF)
            v = -1;
        if (L->depth < KR__LEX_MAX_NEST) {
            L->group[L->depth] = (uint8_t)((v == 1 ? G_DONE : 0) | (v < 0 ? G_MAYBE : 0));
            set_branch(L, L->depth, v == 1 ? BR_LIVE : v == 0 ? BR_DEAD : BR_UNKNOWN);
        }
        if (L->depth < UINT32_MAX)
            L->depth++;
        return;
    }
    if (L->depth == 0) /* a stray #elif/#else/#endif: the compiler rejects it */
        return;
    uint32_t top = L->depth - 1;
    if (directive == KR__DIR_ENDIF) {
        if (top < KR__LEX_MAX_NEST)
            set_branch(L, top, BR_UNKNOWN);
        L->depth--;
        return;
    }
    if (top >= KR__LEX_MAX_NEST)
        return;
    if (directive == KR__DIR_ELSE)
        v = 1;
    uint8_t g = L->group[top];
    unsigned branch = (g & G_DONE) || v == 0 ? BR_DEAD
                      : v == 1 && !(g & G_MAYBE) ? BR_LIVE : BR_UNKNOWN;
    if (v == 1)
        g |= G_DONE;
    else if (v < 0 && !(g & G_DONE))
        g |= G_MAYBE;
    L->group[top] = g;
    set_branch(L, top, branch);
}

/* The end of a directive's logical line. */
static void finish_directive(kr__lexer *L)
{
    int d = L->directive;
    if (d == KR__DIR_IF || d == KR__DIR_ELIF || d == KR__DIR_IFDEF || d == KR__DIR_IFNDEF ||
        d == KR__DIR_ELSE || d == KR__DIR_ENDIF) {
        int known = !L->cond_junk && L->cond_value >= 0 && L->cond_opens == L->cond_closes;
        apply_conditional(L, d, known ? L->cond_value : -1);
    }
    L->directive = KR__DIR_NONE;
    L->expect_name = 0;
}

/* Whitespace and splices up to the next token; line ends finish directives. */
static void skip_space(kr__lexer *L)
{
    const char *s = L->src;
    for (;;) {
        size_t q = skip_splices(s, L->len, L->pos);
        if (q >= L->len) {
            advance(L, q);
            return;
        }
        char c = s[q];
        if (c == '\n') {
            advance(L, q + 1);
            if (L->directive != KR__DIR_NONE)
                finish_directive(L);
            L->line_start = 1;
        } else if (c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f') {
            advance(L, q + 1);
        } else {
            advance(L, q);
            return;
        }
    }
}

/* ---- token scanners: each starts on a logical character and returns the
 * position after the last one it takes ---- */

static size_t scan_line_comment(const kr__lexer *L, size_t p)
{
    size_t q = p + 1;
    ch(L, &q); /* onto the second '/' */
    q++;
    /* to the line end; splices on the way (and just before it) are its own */
    for (int c; (c = ch(L, &q)) >= 0 && c != '\n';)
        q++;
    return q;
}

static size_t scan_block_comment(const kr__lexer *L, size_t p, unsigned *flags)
{
    size_t q = p + 1;
    ch(L, &q); /* onto the '*' */
    q++;
    for (int c; (c = ch(L, &q)) >= 0;) {
        q++;
        if (c == '*') {
            size_t r = q;
            if (ch(L, &r) == '/')
                return r + 1;
        }
    }
    *flags |= KR__TOKF_UNTERMINATED;
    return L->len;
}

/* A "..." or '...' from its opening quote at q; cut at an unspliced line end. */
static size_t scan_quoted(const kr__lexer *L, size_t q, int quote, unsigned *flags)
{
    q++;
    for (;;) {
        int c = ch(L, &q);
        if (c < 0 || c == '\n') {
            *flags |= KR__TOKF_UNTERMINATED;
            return q;
        }
        q++;
        if (c == quote)
            return q;
        if (c == '\\') {
            int e = ch(L, &q);
            if (e >= 0 && e != '\n')
                q++;
        }
    }
}

/* R"delim( ... )delim" from the quote at q, read raw (splices are not
 * splices inside). 0 when the delimiter is not valid: not a raw string. */
static size_t scan_raw(const kr__lexer *L, size_t q, unsigned *flags)
{
    const char *s = L->src;
    size_t d = q + 1;
    while (d < L->len && d - (q + 1) <= 16 && s[d] > ' ' && s[d] < 0x7f && s[d] != '(' &&
           s[d] != ')' && s[d] != '\\')
        d++;
    size_t dlen = d - (q + 1);
    if (d >= L->len || dlen > 16 || s[d] != '(')
        return 0;
    const char *delim = s + q + 1;
    for (size_t b = d + 1; b + dlen + 1 < L->len; b++)
        if (s[b] == ')' && memcmp(s + b + 1, delim, dlen) == 0 && s[b + 1 + dlen] == '"')
            return b + 2 + dlen;
    *flags |= KR__TOKF_UNTERMINATED;
    return L->len;
}

static size_t scan_number(const kr__lexer *L, size_t p)
{
    size_t q = p + 1, end = q;
    for (;;) {
        int c = ch(L, &q);
        if (c == 'e' || c == 'E' || c == 'p' || c == 'P') {
            size_t r = q + 1;
            int sign = ch(L, &r);
            end = q = (sign == '+' || sign == '-') ? r + 1 : q + 1;
        } else if (ident_char(c) || c == '.') {
            end = ++q;
        } else if (c == '\'') { /* digit separator: 1'000 */
            size_t r = q + 1;
            if (!ident_char(ch(L, &r)))
                return end;
            end = q = r + 1;
        } else {
            return end;
        }
    }
}

/* The identifier's text when it is short (string prefixes), else "". */
static void short_spell(const kr__lexer *L, size_t start, size_t end, char out[8])
{
    size_t k = 0, q = start;
    while (q < end) {
        q = skip_splices(L->src, end, q);
        if (q >= end)
            break;
        if (k == 7) {
            k = 0;
            break;
        }
        out[k++] = L->src[q++];
    }
    out[k] = '\0';
}

static int one_of(const char *s, const char *const *list)
{
    for (; *list; list++)
        if (strcmp(s, *list) == 0)
            return 1;
    return 0;
}

/* An identifier, or a literal with an encoding prefix (u8"", L'', R"()"). */
static size_t scan_word(const kr__lexer *L, size_t p, int *kind, unsigned *flags)
{
    size_t q = p + 1, end = q;
    while (ident_char(ch(L, &q)))
        end = ++q;
    *kind = KR__TOK_IDENT;
    int c = ch(L, &q);
    if (c != '"' && c != '\'')
        return end;
    char w[8];
    short_spell(L, p, end, w);
    static const char *const prefixes[] = {"u8", "u", "U", "L", NULL};
    static const char *const raw[] = {"R", "u8R", "uR", "UR", "LR", NULL};
    if (c == '"' && one_of(w, raw)) {
        size_t r = scan_raw(L, q, flags);
        if (r) {
            *kind = KR__TOK_STRING;
            *flags |= KR__TOKF_RAW;
            return r;
        }
    }
    if (one_of(w, prefixes) || (c == '"' && one_of(w, raw))) {
        *kind = c == '"' ? KR__TOK_STRING : KR__TOK_CHAR;
        return scan_quoted(L, q, c, flags);
    }
    return end;
}

static size_t scan_punct(const kr__lexer *L, size_t p)
{
    static const char *const three_four[] = {"%:%:", "<<=", ">>=", "...", "->*", "<=>", NULL};
    static const char two[] = "->++--<<>><=>===!=&&||*=/=%=+=-=&=|=^=##::.*<::><%%>%:";
    char c[5] = {0};
    size_t after[4];
    size_t q = p;
    int n = 0;
    for (; n < 4; n++) {
        int x = ch(L, &q);
        if (x < 0)
            break;
        c[n] = (char)x;
        after[n] = ++q;
    }
    for (const char *const *t = three_four; *t; t++) {
        size_t k = strlen(*t);
        if ((int)k <= n && memcmp(c, *t, k) == 0)
            return after[k - 1];
    }
    for (size_t i = 0; n >= 2 && two[i]; i += 2)
        if (c[0] == two[i] && c[1] == two[i + 1])
            return after[1];
    return after[0];
}

/* The directive named after the # ending at q (looked at, not taken). */
static int directive_kind(const kr__lexer *L, size_t q, int *has_name)
{
    *has_name = 0;
    for (;;) {
        int c = ch(L, &q);
        if (c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f') {
            q++;
            continue;
        }
        size_t r = q + 1;
        if (c == '/' && ch(L, &r) == '*') {
            unsigned f = 0;
            q = scan_block_comment(L, q, &f);
            continue;
        }
        if (c < 0 || c == '\n')
            return KR__DIR_NULL;
        if (!ident_start(c))
            return is_digit(c) ? KR__DIR_OTHER : KR__DIR_NULL;
        break;
    }
    *has_name = 1;
    char name[16];
    size_t k = 0;
    for (int c; ident_char(c = ch(L, &q)) && k < sizeof name - 1; q++)
        name[k++] = (char)c;
    name[k] = '\0';
    static const struct {
        const char *name;
        int kind;
    } names[] = {
        {"if", KR__DIR_IF},       {"ifdef", KR__DIR_IFDEF},     {"ifndef", KR__DIR_IFNDEF},
        {"elif", KR__DIR_ELIF},   {"elifdef", KR__DIR_ELIF},    {"elifndef", KR__DIR_ELIF},
        {"else", KR__DIR_ELSE},   {"endif", KR__DIR_ENDIF},     {"include", KR__DIR_INCLUDE},
        {"include_next", KR__DIR_INCLUDE}, {"import", KR__DIR_INCLUDE},
        {"define", KR__DIR_DEFINE}, {"undef", KR__DIR_UNDEF},   {"pragma", KR__DIR_PRAGMA},
    };
    if (!ident_char(ch(L, &q)))
        for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
            if (strcmp(name, names[i].name) == 0)
                return names[i].kind;
    return KR__DIR_OTHER;
}

/* A #if/#elif condition, one token at a time: known only when it is a
 * literal 0 or 1 (or true/false), in any number of parentheses. */
static void condition_token(kr__lexer *L, const kr__token *t)
{
    char w[8];
    size_t n = kr__lex_spell(L->src, t, w, sizeof w);
    int is_open = n == 1 && w[0] == '(', is_close = n == 1 && w[0] == ')';
    if (L->cond_value < 0 && is_open) {
        L->cond_opens++;
        return;
    }
    if (L->cond_value >= 0 && is_close) {
        L->cond_closes++;
        return;
    }
    if (L->cond_value < 0 && t->kind == KR__TOK_NUMBER && n < sizeof w) {
        size_t i = 0;
        int value = 0;
        for (; i < n && is_digit(w[i]); i++)
            value |= w[i] != '0';
        while (i > 0 && i < n && w[i] && strchr("uUlL", w[i]))
            i++;
        if (i == n && is_digit(w[0])) {
            L->cond_value = value;
            return;
        }
    }
    if (L->cond_value < 0 && t->kind == KR__TOK_KEYWORD && n < sizeof w &&
        ((n == 4 && memcmp(w, "true", 4) == 0) || (n == 5 && memcmp(w, "false", 5) == 0))) {
        L->cond_value = n == 4;
        return;
    }
    L->cond_junk = 1;
}

int kr__lex_next(kr__lexer *L, kr__token *t)
{
    skip_space(L);
    memset(t, 0, sizeof *t);
    if (L->pos >= L->len) {
        if (L->directive != KR__DIR_NONE)
            finish_directive(L);
        t->kind = KR__TOK_EOF;
        t->start = t->end = L->len;
        t->line = t->end_line = L->line;
        t->cond_depth = L->depth;
        t->flags = L->dead_levels ? KR__TOKF_DEAD : 0;
        return KR__TOK_EOF;
    }
    const char *s = L->src;
    size_t p = L->pos, r = p + 1, end;
    int c = (unsigned char)s[p], next = ch(L, &r), kind = KR__TOK_PUNCT;
    unsigned flags = 0;
    if (c == '/' && next == '/') {
        kind = KR__TOK_LINE_COMMENT;
        end = scan_line_comment(L, p);
    } else if (c == '/' && next == '*') {
        kind = KR__TOK_BLOCK_COMMENT;
        end = scan_block_comment(L, p, &flags);
    } else if (L->line_start && L->directive == KR__DIR_NONE &&
               (c == '#' || (c == '%' && next == ':'))) {
        kind = KR__TOK_DIRECTIVE;
        end = c == '#' ? p + 1 : r + 1;
        L->directive = directive_kind(L, end, &L->expect_name);
        L->cond_opens = L->cond_closes = L->cond_junk = 0;
        L->cond_value = -1;
    } else if (ident_start(c)) {
        end = scan_word(L, p, &kind, &flags);
    } else if (is_digit(c) || (c == '.' && is_digit(next))) {
        kind = KR__TOK_NUMBER;
        end = scan_number(L, p);
    } else if (c == '"' || c == '\'') {
        kind = c == '"' ? KR__TOK_STRING : KR__TOK_CHAR;
        end = scan_quoted(L, p, c, &flags);
    } else {
        end = scan_punct(L, p);
    }
    t->start = p;
    t->end = end;
    t->line = L->line;
    t->cond_depth = L->depth;
    t->directive = L->directive;
    if (L->dead_levels)
        flags |= KR__TOKF_DEAD;
    if (L->line_start)
        flags |= KR__TOKF_LINE_START;
    for (size_t i = p; i + 1 < end && !(flags & KR__TOKF_RAW); i++)
        if (s[i] == '\\' && (s[i + 1] == '\n' || (s[i + 1] == '\r' && i + 2 < end &&
                                                   s[i + 2] == '\n'))) {
            flags |= KR__TOKF_SPLICED;
            break;
        }
    advance(L, end - 1);
    t->end_line = L->line;
    advance(L, end);
    t->kind = kind;
    t->flags = flags;
    if (kind == KR__TOK_LINE_COMMENT || kind == KR__TOK_BLOCK_COMMENT)
        return kind;
    L->line_start = 0;
    if (kind == KR__TOK_DIRECTIVE)
        return kind;
    int name = L->expect_name && kind == KR__TOK_IDENT;
    L->expect_name = 0;
    if (name) {
        kind = KR__TOK_KEYWORD;
    } else if (kind == KR__TOK_IDENT) {
        char w[32];
        size_t n = kr__lex_spell(s, t, w, sizeof w);
        if (n <= sizeof w && is_keyword(w, n))
            kind = KR__TOK_KEYWORD;
    }
    t->kind = kind;
    if (!name && (L->directive == KR__DIR_IF || L->directive == KR__DIR_ELIF))
        condition_token(L, t);
    return kind;
}

size_t kr__lex_spell(const char *src, const kr__token *t, char *out, size_t cap)
{
    size_t k = 0;
    int raw = (t->flags & KR__TOKF_RAW) != 0, quoted = 0;
    for (size_t i = t->start; i < t->end;) {
        if (!(raw && quoted)) {
            i = skip_splices(src, t->end, i);
            if (i >= t->end)
                break;
        }
        quoted |= src[i] == '"';
        if (k < cap)
            out[k] = src[i];
        k++;
        i++;
    }
    return k;
}

/* Whether [from, to), space between tokens, holds an unspliced line end. */
static int has_line_end(const char *s, size_t from, size_t to)
{
    for (size_t i = from; i < to; i++)
        if (s[i] == '\n' && !(i >= from + 1 && s[i - 1] == '\\') &&
            !(i >= from + 2 && s[i - 1] == '\r' && s[i - 2] == '\\'))
            return 1;
    return 0;
}

void kr__lex_where_offset(const char *src, size_t len, size_t offset, kr__lex_where *out)
{
    static const int context[] = {
        [KR__TOK_LINE_COMMENT] = KR__AT_LINE_COMMENT,
        [KR__TOK_BLOCK_COMMENT] = KR__AT_BLOCK_COMMENT,
        [KR__TOK_STRING] = KR__AT_STRING,
        [KR__TOK_CHAR] = KR__AT_CHAR,
    };
    kr__lexer L;
    kr__lex_init(&L, src, len);
    kr__token prev = {0}, t;
    int have_prev = 0;
    while (kr__lex_next(&L, &t) != KR__TOK_EOF && offset >= t.end) {
        prev = t;
        have_prev = 1;
    }
    memset(out, 0, sizeof *out);
    out->token_start = t.start;
    const kr__token *from = &t;
    int directive = t.directive;
    if (offset < t.start || t.kind == KR__TOK_EOF) {
        /* between tokens: on the previous token's directive line until its
         * end, else in the state the next token sees (a # starts its
         * directive only at itself) */
        if (have_prev && prev.directive != KR__DIR_NONE && !has_line_end(src, prev.end, offset)) {
            from = &prev;
            directive = prev.directive;
        } else if (t.kind == KR__TOK_DIRECTIVE || t.kind == KR__TOK_EOF) {
            directive = KR__DIR_NONE;
        }
        out->context = offset >= len ? KR__AT_END : KR__AT_CODE;
    } else {
        out->context = context[t.kind];
    }
    out->directive = directive;
    out->cond_depth = from->cond_depth;
    out->dead = (from->flags & KR__TOKF_DEAD) != 0;
}

void kr__lex_where_line(const char *src, size_t len, uint32_t line, kr__lex_where *out)
{
    size_t off = 0;
    uint32_t l = 1;
    while (l < line && off < len)
        l += src[off++] == '\n';
    kr__lex_where_offset(src, len, line == 0 || l < line ? len : off, out);
}

int kr__lex_line_comments(const char *src, size_t len, kr__line_comment_fn fn, void *user)
{
    kr__lexer L;
    kr__lex_init(&L, src, len);
    kr__token t;
    for (int kind; (kind = kr__lex_next(&L, &t)) != KR__TOK_EOF;) {
        if (kind != KR__TOK_LINE_COMMENT)
            continue;
        int rc = fn(user, L.src, &t);
        if (rc)
            return rc;
    }
    return 0;
}
