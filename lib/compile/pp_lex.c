/* The scanner's lexical reading (pp_scan.c drives it): comments as white
 * space even across lines, identifiers through splices, string, character
 * and raw string literals, numbers with digit separators by mode, header
 * names and operands, the names of include probes, a pragma's first words;
 * and a stretch of text as the preprocessor reads it (kr__pp_text). */
#include "compile/pp_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void kr__pp_refuse(scanner *S, unsigned line, const char *why)
{
    if (S->out->refused || S->mode.lenient)
        return;
    S->out->refused = 1;
    S->out->refused_line = line;
    snprintf(S->out->refused_why, sizeof S->out->refused_why, "%s", why);
}

char *kr__pp_dup_n(scanner *S, const char *s, size_t n)
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
int kr__pp_skip_comment(scanner *S, int *newline)
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
void kr__pp_skip_hspace(scanner *S)
{
    for (;;) {
        int c = cur(&S->r);
        if (is_hspace(c))
            adv(&S->r);
        else if (!kr__pp_skip_comment(S, NULL))
            return;
    }
}

/* Reads an identifier into buf (cut at size-1; the rest is consumed). */
void kr__pp_read_ident(scanner *S, char *buf, size_t size)
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

void kr__pp_read_quoted(scanner *S, int quote)
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
void kr__pp_read_raw(scanner *S)
{
    rd *r = &S->r;
    unsigned line = r->line;
    size_t p = r->i + 1, d = p;
    while (d < r->n && d - p <= 16 && !strchr(" ()\\\t\v\f\r\n", r->s[d]))
        d++;
    if (d >= r->n || r->s[d] != '(' || d - p > 16) {
        kr__pp_refuse(S, line, "a malformed raw string literal");
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
    kr__pp_refuse(S, line, "an unterminated raw string literal");
    adv(r);
}

void kr__pp_read_number(scanner *S)
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
char *kr__pp_read_header_name(scanner *S, int *delim)
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
    char *name = kr__pp_dup_n(S, buf, k);
    if (buf != small)
        free(buf);
    return name;
}

/* The operand of an #include-like directive or __has_include: a literal
 * header name, or anything else (computed, left NULL). */
void kr__pp_read_operand(scanner *S, kr__pp_item *it)
{
    rd *r = &S->r;
    it->span_start = r->i;
    unsigned line0 = r->line;
    if (cur(r) == '<' || cur(r) == '"') {
        it->name = kr__pp_read_header_name(S, &it->delim);
        it->span_end = r->i;
        it->span_splices = r->line - line0;
        if (!it->name)
            it->delim = 0;
    } else {
        it->span_end = r->i;
    }
}

int kr__pp_has_include_like(const char *id)
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

/* The first word of a pragma's text, two for a namespace ("GCC dependency"). */
void kr__pp_pragma_words(const char *text, char *out, size_t size)
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
