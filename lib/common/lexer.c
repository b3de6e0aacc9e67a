/* The C/CUDA lexer (lexer.h), one token at a time: line splices, comments,
 * literals, numbers, words and punctuators, keywords, a token's spelling.
 * The token stream (line starts, directives and the conditional groups
 * around each token) is lexer_next.c; questions about a whole source are
 * lexer_query.c. */
#include "common/lexer_impl.h"

#include <stdlib.h>
#include <string.h>

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

int kr__lex_is_keyword(const char *s, size_t n)
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

size_t kr__lex_scan_line_comment(const kr__lexer *L, size_t p)
{
    size_t q = p + 1;
    ch(L, &q); /* onto the second '/' */
    q++;
    /* to the line end; splices on the way (and just before it) are its own */
    for (int c; (c = ch(L, &q)) >= 0 && c != '\n';)
        q++;
    return q;
}

size_t kr__lex_scan_block_comment(const kr__lexer *L, size_t p, unsigned *flags)
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
size_t kr__lex_scan_quoted(const kr__lexer *L, size_t q, int quote, unsigned *flags)
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

size_t kr__lex_scan_number(const kr__lexer *L, size_t p)
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
size_t kr__lex_scan_word(const kr__lexer *L, size_t p, int *kind, unsigned *flags)
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
        return kr__lex_scan_quoted(L, q, c, flags);
    }
    return end;
}

size_t kr__lex_scan_punct(const kr__lexer *L, size_t p)
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
