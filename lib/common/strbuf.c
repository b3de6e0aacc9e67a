/* A growable text buffer, and small string helpers. */
#include "common/strbuf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int reserve(kr__buf *b, size_t extra)
{
    if (b->oom)
        return -1;
    if (b->len + extra + 1 <= b->cap)
        return 0;
    size_t cap = b->cap ? b->cap : 64;
    while (cap < b->len + extra + 1)
        cap *= 2;
    char *p = realloc(b->data, cap);
    if (!p) {
        b->oom = 1;
        return -1;
    }
    b->data = p;
    b->cap = cap;
    return 0;
}

int kr__buf_append(kr__buf *b, const char *s, size_t n)
{
    if (reserve(b, n) != 0)
        return -1;
    if (n)
        memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = '\0';
    return 0;
}

int kr__buf_puts(kr__buf *b, const char *s)
{
    return kr__buf_append(b, s, strlen(s));
}

int kr__buf_vprintf(kr__buf *b, const char *fmt, va_list ap)
{
    va_list copy;
    va_copy(copy, ap);
    int n = vsnprintf(NULL, 0, fmt, copy);
    va_end(copy);
    if (n < 0 || reserve(b, (size_t)n) != 0)
        return -1;
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    b->len += (size_t)n;
    return 0;
}

int kr__buf_printf(kr__buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int r = kr__buf_vprintf(b, fmt, ap);
    va_end(ap);
    return r;
}

char *kr__buf_take(kr__buf *b)
{
    if (b->oom) {
        kr__buf_free(b);
        return NULL;
    }
    char *s = b->data ? b->data : kr__strdup("");
    b->data = NULL;
    b->len = b->cap = 0;
    return s;
}

void kr__buf_free(kr__buf *b)
{
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
    b->oom = 0;
}

char *kr__strdup(const char *s)
{
    return s ? kr__strndup(s, strlen(s)) : NULL;
}

char *kr__strndup(const char *s, size_t n)
{
    char *p = malloc(n + 1);
    if (!p)
        return NULL;
    memcpy(p, s, n);
    p[n] = '\0';
    return p;
}

void kr__strlcpy(char *dst, const char *src, size_t size)
{
    if (size == 0)
        return;
    size_t n = strlen(src);
    if (n >= size)
        n = size - 1;
    memcpy(dst, src, n);
    dst[n] = '\0';
}
