/* XXH3-128 content hashes. */
#include "common/hash.h"

#include <stdio.h>

kr__hash128 kr__hash128_of(const void *data, size_t len)
{
    XXH128_hash_t x = XXH3_128bits(data, len);
    kr__hash128 h = {x.low64, x.high64};
    return h;
}

void kr__hash128_hex(kr__hash128 h, char out[33])
{
    snprintf(out, 33, "%016llx%016llx", (unsigned long long)h.hi, (unsigned long long)h.lo);
}

int kr__hash128_equal(kr__hash128 a, kr__hash128 b)
{
    return a.lo == b.lo && a.hi == b.hi;
}

int kr__hasher_init(kr__hasher *h)
{
    h->state = XXH3_createState();
    if (!h->state)
        return -1;
    XXH3_128bits_reset(h->state);
    return 0;
}

void kr__hasher_u64(kr__hasher *h, uint64_t v)
{
    unsigned char b[8];
    for (int i = 0; i < 8; i++)
        b[i] = (unsigned char)(v >> (8 * i));
    XXH3_128bits_update(h->state, b, sizeof b);
}

void kr__hasher_field(kr__hasher *h, const void *data, size_t len)
{
    kr__hasher_u64(h, len);
    if (len)
        XXH3_128bits_update(h->state, data, len);
}

void kr__hasher_str(kr__hasher *h, const char *s)
{
    if (!s) {
        kr__hasher_u64(h, UINT64_MAX);
        return;
    }
    size_t n = 0;
    while (s[n])
        n++;
    kr__hasher_field(h, s, n);
}

kr__hash128 kr__hasher_final(kr__hasher *h)
{
    XXH128_hash_t x = XXH3_128bits_digest(h->state);
    XXH3_freeState(h->state);
    h->state = NULL;
    kr__hash128 r = {x.low64, x.high64};
    return r;
}
