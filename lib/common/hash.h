/* XXH3-128 content hashes: the keys of every cache in the library. */
#ifndef KR_HASH_H
#define KR_HASH_H

#include <stddef.h>
#include <stdint.h>
#include <xxhash.h>

typedef struct kr__hash128 {
    uint64_t lo, hi;
} kr__hash128;

kr__hash128 kr__hash128_of(const void *data, size_t len);
/* 32 lowercase hex digits, high half first (the XXH128 canonical order). */
void kr__hash128_hex(kr__hash128 h, char out[33]);
int kr__hash128_equal(kr__hash128 a, kr__hash128 b);

/* Streaming: each field is length-prefixed so ("ab","c") != ("a","bc"). */
typedef struct kr__hasher {
    XXH3_state_t *state;
} kr__hasher;

int kr__hasher_init(kr__hasher *h);
void kr__hasher_field(kr__hasher *h, const void *data, size_t len);
void kr__hasher_str(kr__hasher *h, const char *s); /* NULL hashes differently from "" */
void kr__hasher_u64(kr__hasher *h, uint64_t v);
kr__hash128 kr__hasher_final(kr__hasher *h); /* also frees the state */

#endif
