/* The lexer's token stream (lexer.h): kr__lex_next, with the line starts,
 * the directive each line is, and the conditional groups around each token;
 * the tokens themselves are read by lexer.c's scanners. */
#include "common/lexer_impl.h"

#include <string.h>

/* A conditional group's byte: the current branch and what earlier branches
 * of the same #if chain settled. */
enum { BR_UNKNOWN = 0, BR_LIVE = 1, BR_DEAD = 2 };
#define G_BRANCH 0x03u
#define G_DONE 0x04u   /* an earlier or the current branch is certainly taken */
#define G_MAYBE 0x08u  /* an earlier branch may have been taken */

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
            q = kr__lex_scan_block_comment(L, q, &f);
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
        end = kr__lex_scan_line_comment(L, p);
    } else if (c == '/' && next == '*') {
        kind = KR__TOK_BLOCK_COMMENT;
        end = kr__lex_scan_block_comment(L, p, &flags);
    } else if (L->line_start && L->directive == KR__DIR_NONE &&
               (c == '#' || (c == '%' && next == ':'))) {
        kind = KR__TOK_DIRECTIVE;
        end = c == '#' ? p + 1 : r + 1;
        L->directive = directive_kind(L, end, &L->expect_name);
        L->cond_opens = L->cond_closes = L->cond_junk = 0;
        L->cond_value = -1;
    } else if (ident_start(c)) {
        end = kr__lex_scan_word(L, p, &kind, &flags);
    } else if (is_digit(c) || (c == '.' && is_digit(next))) {
        kind = KR__TOK_NUMBER;
        end = kr__lex_scan_number(L, p);
    } else if (c == '"' || c == '\'') {
        kind = c == '"' ? KR__TOK_STRING : KR__TOK_CHAR;
        end = kr__lex_scan_quoted(L, p, c, &flags);
    } else {
        end = kr__lex_scan_punct(L, p);
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
        if (n <= sizeof w && kr__lex_is_keyword(w, n))
            kind = KR__TOK_KEYWORD;
    }
    t->kind = kind;
    if (!name && (L->directive == KR__DIR_IF || L->directive == KR__DIR_ELIF))
        condition_token(L, t);
    return kind;
}
