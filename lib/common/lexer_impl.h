/* Shared by the lexer's files (lexer.h): lexer.c (one token at a time: the
 * token scanners, keywords, spelling) and lexer_next.c (the token stream:
 * line starts, directives, conditional groups). */
#ifndef KR_LEXER_IMPL_H
#define KR_LEXER_IMPL_H

#include "common/lexer.h"

/* Past any line splices at p (backslash + \n or \r\n, nothing between). */
static inline size_t skip_splices(const char *s, size_t n, size_t p)
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
static inline int ch(const kr__lexer *L, size_t *p)
{
    *p = skip_splices(L->src, L->len, *p);
    return *p < L->len ? (unsigned char)L->src[*p] : -1;
}

static inline int is_digit(int c)
{
    return c >= '0' && c <= '9';
}

static inline int ident_char(int c)
{
    return c == '_' || c == '$' || is_digit(c) || (c >= 'a' && c <= 'z') ||
           (c >= 'A' && c <= 'Z') || c >= 0x80;
}

static inline int ident_start(int c)
{
    return ident_char(c) && !is_digit(c);
}

/* lexer.c: whether a name is keyword-ish (KR__TOK_KEYWORD). */
int kr__lex_is_keyword(const char *s, size_t n);

/* ---- token scanners (lexer.c): each starts on a logical character and
 * returns the position after the last one it takes ---- */

size_t kr__lex_scan_line_comment(const kr__lexer *L, size_t p);
size_t kr__lex_scan_block_comment(const kr__lexer *L, size_t p, unsigned *flags);
size_t kr__lex_scan_quoted(const kr__lexer *L, size_t q, int quote, unsigned *flags);
size_t kr__lex_scan_number(const kr__lexer *L, size_t p);
size_t kr__lex_scan_word(const kr__lexer *L, size_t p, int *kind, unsigned *flags);
size_t kr__lex_scan_punct(const kr__lexer *L, size_t p);

#endif
