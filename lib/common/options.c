/* Reading versioned public structs by the caller's version (options.h). */
#include "common/options.h"
#include "kreward/common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int known(const kr__versioned *v, uint32_t version)
{
    return version >= 1 && version <= v->current;
}

int kr__options_read(const kr__versioned *v, void *dst, const void *defaults, const void *src,
                     char *why, size_t why_size)
{
    memcpy(dst, defaults, v->size);
    if (!src)
        return KR_OK;
    uint32_t version;
    memcpy(&version, src, sizeof version);
    if (!known(v, version)) {
        snprintf(why, why_size, "%s version %u is %s (this library knows versions 1 to %u)",
                 v->name, version, version ? "newer than this library" : "not set", v->current);
        return KR_EVERSION;
    }
    memcpy(dst, src, v->sizes[version]);
    memcpy(dst, &v->current, sizeof v->current);
    return KR_OK;
}

int kr__options_init(const kr__versioned *v, void *dst, const void *defaults, uint32_t version)
{
    if (!dst)
        return KR_EINVAL;
    if (!known(v, version))
        return KR_EVERSION;
    memcpy(dst, defaults, v->sizes[version]);
    memcpy(dst, &version, sizeof version);
    return KR_OK;
}

int kr__knob_off(const char *name)
{
    const char *v = getenv(name);
    return v && strcmp(v, "0") == 0;
}
