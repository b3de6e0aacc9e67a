/* Shared by the files of the preprocessor's view (pp_scan.h): pp_scan.c
 * (tokens, include-like operators, directives, the scan), pp_lex.c (its
 * lexical reading: comments, identifiers, literals, header names) and
 * pp_absolute.c (the second look). */
#ifndef KR_PP_IMPL_H
#define KR_PP_IMPL_H

#include "compile/pp_scan.h"

#define MAX_COND 512 /* nested #if groups */

/* ---- reading logical characters (line splices removed) ---- */

typedef struct {
    const char *s;
    size_t n;
    size_t i;      /* physical position of the current logical character */
    unsigned line; /* physical line of position i */
} rd;

static inline void splices(rd *r)
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

static inline int ahead(const rd *r)
{
    rd t = *r;
    adv(&t);
    return cur(&t);
}

static inline int is_hspace(int c)
{
    return c == ' ' || c == '\t' || c == '\f' || c == '\v' || c == '\r';
}

static inline int is_ident_start(int c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == '$' || c >= 0x80;
}

static inline int is_ident(int c)
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

/* pp_lex.c: the scanner's lexical reading. */
void kr__pp_refuse(scanner *S, unsigned line, const char *why);
char *kr__pp_dup_n(scanner *S, const char *s, size_t n);
int kr__pp_skip_comment(scanner *S, int *newline);
void kr__pp_skip_hspace(scanner *S);
void kr__pp_read_ident(scanner *S, char *buf, size_t size);
void kr__pp_read_quoted(scanner *S, int quote);
void kr__pp_read_raw(scanner *S);
void kr__pp_read_number(scanner *S);
char *kr__pp_read_header_name(scanner *S, int *delim);
void kr__pp_read_operand(scanner *S, kr__pp_item *it);
int kr__pp_has_include_like(const char *id);
void kr__pp_pragma_words(const char *text, char *out, size_t size);

#endif
