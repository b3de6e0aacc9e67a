/* Questions about a whole source, answered by lexing it (lexer.h): where
 * an offset or a line falls, and every top-level line comment (plan
 * annotations). */
#include "common/lexer.h"

#include <string.h>

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
