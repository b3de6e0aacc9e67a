/* A growable text buffer, and small string helpers. */
#ifndef KR_STRBUF_H
#define KR_STRBUF_H

#include <stdarg.h>
#include <stddef.h>

typedef struct kr__buf {
    char *data;  /* always NUL-terminated once anything was appended */
    size_t len;
    size_t cap;
    int oom;     /* set once an allocation failed; later appends are dropped */
} kr__buf;

#define KR__BUF_INIT {NULL, 0, 0, 0}

int kr__buf_append(kr__buf *b, const char *s, size_t n);
int kr__buf_puts(kr__buf *b, const char *s);
int kr__buf_printf(kr__buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int kr__buf_vprintf(kr__buf *b, const char *fmt, va_list ap);
/* Hands the text to the caller (malloc'd, "" when empty); NULL when out of
 * memory. The buffer is empty afterwards. */
char *kr__buf_take(kr__buf *b);
void kr__buf_free(kr__buf *b);

char *kr__strdup(const char *s);              /* NULL for NULL */
char *kr__strndup(const char *s, size_t n);
/* Copies with truncation; always NUL-terminates when size > 0. */
void kr__strlcpy(char *dst, const char *src, size_t size);

#endif
