/* Where a field is in JSON text, for error messages. */
#include "common/json_locate.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const char *s;
    size_t len, pos;
} scan;

static void ws(scan *sc)
{
    while (sc->pos < sc->len && isspace((unsigned char)sc->s[sc->pos]))
        sc->pos++;
}

/* Skips white space, then the one character c: 0, or -1 where c is not next. */
static int expect(scan *sc, char c)
{
    ws(sc);
    if (sc->pos >= sc->len || sc->s[sc->pos] != c)
        return -1;
    sc->pos++;
    return 0;
}

static int skip_string(scan *sc)
{
    if (sc->pos >= sc->len || sc->s[sc->pos] != '"')
        return -1;
    for (sc->pos++; sc->pos < sc->len; sc->pos++) {
        if (sc->s[sc->pos] == '\\')
            sc->pos++;
        else if (sc->s[sc->pos] == '"') {
            sc->pos++;
            return 0;
        }
    }
    return -1;
}

/* Skips one value of any kind. */
static int skip_value(scan *sc)
{
    ws(sc);
    if (sc->pos >= sc->len)
        return -1;
    char c = sc->s[sc->pos];
    if (c == '"')
        return skip_string(sc);
    if (c == '{' || c == '[') {
        int depth = 0;
        while (sc->pos < sc->len) {
            char d = sc->s[sc->pos];
            if (d == '"') {
                if (skip_string(sc) != 0)
                    return -1;
                continue;
            }
            if (d == '{' || d == '[')
                depth++;
            else if (d == '}' || d == ']') {
                if (--depth == 0) {
                    sc->pos++;
                    return 0;
                }
            }
            sc->pos++;
        }
        return -1;
    }
    while (sc->pos < sc->len && !strchr(",]} \t\r\n", sc->s[sc->pos]))
        sc->pos++;
    return 0;
}

/* Moves to the value of `key` in the object starting at pos. */
static int enter_key(scan *sc, const char *key, size_t klen)
{
    if (expect(sc, '{') != 0)
        return -1;
    for (;;) {
        ws(sc);
        size_t start = sc->pos + 1;
        if (skip_string(sc) != 0) /* also where the key is not a string */
            return -1;
        size_t n = sc->pos - 1 - start;
        if (expect(sc, ':') != 0)
            return -1;
        ws(sc);
        if (n == klen && memcmp(sc->s + start, key, klen) == 0)
            return 0;
        if (skip_value(sc) != 0 || expect(sc, ',') != 0)
            return -1;
    }
}

static int enter_index(scan *sc, long index)
{
    if (expect(sc, '[') != 0)
        return -1;
    for (long i = 0; i < index; i++) {
        if (skip_value(sc) != 0 || expect(sc, ',') != 0)
            return -1;
    }
    ws(sc);
    return sc->pos < sc->len && sc->s[sc->pos] != ']' ? 0 : -1;
}

static void position(const scan *sc, size_t pos, int *line, int *col)
{
    *line = 1;
    *col = 1;
    for (size_t i = 0; i < pos && i < sc->len; i++) {
        if (sc->s[i] == '\n') {
            (*line)++;
            *col = 1;
        } else {
            (*col)++;
        }
    }
}

int kr__json_locate(const char *text, size_t len, const char *path, int *line, int *col)
{
    scan sc = {text, len, 0};
    ws(&sc);
    size_t found = sc.pos;
    const char *p = path;
    int rc = 0;
    while (*p && rc == 0) {
        if (*p == '.') {
            p++;
            continue;
        }
        if (*p == '[') {
            char *end;
            long index = strtol(p + 1, &end, 10);
            p = *end == ']' ? end + 1 : end;
            rc = enter_index(&sc, index);
        } else {
            size_t n = strcspn(p, ".[");
            rc = enter_key(&sc, p, n);
            p += n;
        }
        if (rc == 0)
            found = sc.pos;
    }
    position(&sc, found, line, col);
    return rc;
}
