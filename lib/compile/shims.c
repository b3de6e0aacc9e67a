/* The standard-header shims, embedded at build time from lib/compile/shims/
 * by scripts/embed.py as kr__shim_<i>, i the position in shim_headers in
 * lib/meson.build (this list has the same order; the unit test checks each
 * text names its header). */
#include "compile/shims.h"
#include "common/hash.h"

#include <string.h>

#define SHIMS(X) X(0, "algorithm") X(1, "array") X(2, "assert.h") X(3, "cassert") \
    X(4, "cfloat") X(5, "climits") X(6, "cmath") X(7, "cstdbool") X(8, "cstddef") \
    X(9, "cstdint") X(10, "cstdio") X(11, "cstdlib") X(12, "cstring") X(13, "float.h") \
    X(14, "initializer_list") X(15, "kreward/minmax.h") X(16, "limits") X(17, "limits.h") \
    X(18, "math.h") X(19, "stdbool.h") X(20, "stddef.h") X(21, "stdint.h") X(22, "stdio.h") \
    X(23, "stdlib.h") X(24, "string.h") X(25, "type_traits") X(26, "utility")

#define DECLARE(i, name) extern const char kr__shim_##i[]; extern const size_t kr__shim_##i##_len;
SHIMS(DECLARE)

static const struct {
    const char *name;
    const char *text;
    const size_t *len;
} shims[] = {
#define ENTRY(i, name) {name, kr__shim_##i, &kr__shim_##i##_len},
    SHIMS(ENTRY)
};

size_t kr__shim_count(void)
{
    return sizeof shims / sizeof shims[0];
}

const char *kr__shim_at(size_t i, const char **text, size_t *len)
{
    if (i >= kr__shim_count())
        return NULL;
    if (text)
        *text = shims[i].text;
    if (len)
        *len = *shims[i].len;
    return shims[i].name;
}

long kr__shim_find(const char *name)
{
    for (size_t i = 0; i < kr__shim_count(); i++)
        if (strcmp(shims[i].name, name) == 0)
            return (long)i;
    return -1;
}

void kr__shims_digest(uint64_t *lo, uint64_t *hi)
{
    kr__hasher h;
    *lo = *hi = 0;
    if (kr__hasher_init(&h) != 0)
        return;
    for (size_t i = 0; i < kr__shim_count(); i++) {
        kr__hasher_str(&h, shims[i].name);
        kr__hasher_field(&h, shims[i].text, *shims[i].len);
    }
    kr__hash128 d = kr__hasher_final(&h);
    *lo = d.lo;
    *hi = d.hi;
}
