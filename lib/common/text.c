/* Cleaning and quoting text a candidate controls (text.h). */
#include "common/text.h"
#include "common/strbuf.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Length of the valid UTF-8 sequence at s (1..4), or 0 when invalid. */
static size_t utf8_len(const unsigned char *s, uint32_t *cp)
{
    if (s[0] < 0x80) {
        *cp = s[0];
        return 1;
    }
    size_t n = (s[0] & 0xE0) == 0xC0 ? 2 : (s[0] & 0xF0) == 0xE0 ? 3 : (s[0] & 0xF8) == 0xF0 ? 4 : 0;
    if (!n)
        return 0;
    uint32_t v = s[0] & (0x7F >> n);
    for (size_t i = 1; i < n; i++) {
        if ((s[i] & 0xC0) != 0x80)
            return 0;
        v = v << 6 | (s[i] & 0x3F);
    }
    static const uint32_t least[] = {0, 0, 0x80, 0x800, 0x10000};
    if (v < least[n] || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF))
        return 0; /* overlong, out of range, or a surrogate */
    *cp = v;
    return n;
}

static int unwanted(uint32_t cp)
{
    return (cp < 0x20 && cp != '\n' && cp != '\t') || cp == 0x7F || cp == 0x85 ||
           cp == 0x2028 || cp == 0x2029;
}

static void append_clean(kr__buf *b, const char *text, size_t len)
{
    const unsigned char *s = (const unsigned char *)text;
    for (size_t i = 0; i < len;) {
        uint32_t cp = 0;
        size_t n = utf8_len(s + i, &cp);
        if (n == 0 || i + n > len || unwanted(cp)) {
            kr__buf_append(b, "?", 1);
            i += n ? n : 1;
        } else {
            kr__buf_append(b, (const char *)s + i, n);
            i += n;
        }
    }
}

char *kr__clean_text(const char *text)
{
    kr__buf b = KR__BUF_INIT;
    append_clean(&b, text, strlen(text));
    kr__buf_puts(&b, "");
    return kr__buf_take(&b);
}

char *kr__quote_lines(const char *text, size_t max_bytes, const char *prefix)
{
    kr__buf b = KR__BUF_INIT;
    size_t len = strlen(text), cut = len > max_bytes ? max_bytes : len;
    for (size_t i = 0; i < cut;) {
        const char *nl = memchr(text + i, '\n', cut - i);
        size_t n = nl ? (size_t)(nl - (text + i)) : cut - i;
        kr__buf_puts(&b, prefix);
        append_clean(&b, text + i, n);
        kr__buf_puts(&b, "\n");
        i += n + 1;
    }
    if (cut < len)
        kr__buf_printf(&b, "%s[%zu more bytes cut]\n", prefix, len - cut);
    kr__buf_puts(&b, "");
    return kr__buf_take(&b);
}
