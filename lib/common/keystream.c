/* kr_keystream_xor (kreward/sys/keystream.h): ChaCha over a host buffer. Eight blocks
 * are computed side by side (each state word an array of eight lanes, which
 * the compiler turns into vector instructions: about 3x one block at a
 * time); kr_chacha.h's block function does the tail and is what the unit
 * test compares against. */
#include "kreward/sys/keystream.h"
#include "common/kr_gen.h"
#include "common/kr_chacha.h"
#include "common/symver.h"

#include <string.h>

#define LANES 8

static kr_u32 le32(const unsigned char *p)
{
    return (kr_u32)p[0] | (kr_u32)p[1] << 8 | (kr_u32)p[2] << 16 | (kr_u32)p[3] << 24;
}

#define LANE_QR(a, b, c, d)                                                         \
    do {                                                                            \
        for (int l = 0; l < LANES; l++) {                                           \
            x[a][l] += x[b][l]; x[d][l] ^= x[a][l]; x[d][l] = KR_CHACHA_ROTL(x[d][l], 16); \
            x[c][l] += x[d][l]; x[b][l] ^= x[c][l]; x[b][l] = KR_CHACHA_ROTL(x[b][l], 12); \
            x[a][l] += x[b][l]; x[d][l] ^= x[a][l]; x[d][l] = KR_CHACHA_ROTL(x[d][l], 8);  \
            x[c][l] += x[d][l]; x[b][l] ^= x[c][l]; x[b][l] = KR_CHACHA_ROTL(x[b][l], 7);  \
        }                                                                           \
    } while (0)

/* The keystream of blocks b .. b + LANES - 1, as bytes. */
static void blocks(const kr_chacha_key *k, uint64_t b, int double_rounds,
                   unsigned char out[LANES * 64])
{
    kr_u32 s[16][LANES], x[16][LANES];
    static const kr_u32 sigma[4] = {0x61707865u, 0x3320646eu, 0x79622d32u, 0x6b206574u};
    for (int l = 0; l < LANES; l++) {
        for (int i = 0; i < 4; i++)
            s[i][l] = sigma[i];
        for (int i = 0; i < 8; i++)
            s[4 + i][l] = k->w[i];
        s[12][l] = (kr_u32)(b + (uint64_t)l);
        s[13][l] = (kr_u32)((b + (uint64_t)l) >> 32);
        s[14][l] = s[15][l] = 0;
    }
    memcpy(x, s, sizeof x);
    for (int round = 0; round < double_rounds; round++) {
        LANE_QR(0, 4, 8, 12);
        LANE_QR(1, 5, 9, 13);
        LANE_QR(2, 6, 10, 14);
        LANE_QR(3, 7, 11, 15);
        LANE_QR(0, 5, 10, 15);
        LANE_QR(1, 6, 11, 12);
        LANE_QR(2, 7, 8, 13);
        LANE_QR(3, 4, 9, 14);
    }
    for (int l = 0; l < LANES; l++)
        for (int i = 0; i < 16; i++) {
            kr_u32 w = x[i][l] + s[i][l];
            unsigned char *o = out + 64 * l + 4 * i;
            o[0] = (unsigned char)w;
            o[1] = (unsigned char)(w >> 8);
            o[2] = (unsigned char)(w >> 16);
            o[3] = (unsigned char)(w >> 24);
        }
}

static void xor_bytes(unsigned char *p, const unsigned char *stream, size_t n)
{
    for (size_t i = 0; i < n; i++)
        p[i] ^= stream[i];
}

KR_API int kr_keystream_xor(void *data, size_t bytes, const void *key, uint64_t first_block,
                            int rounds)
{
    if (!key || (!data && bytes) || (rounds != 8 && rounds != 12 && rounds != 20))
        return KR_EINVAL;
    kr_chacha_key k;
    for (int i = 0; i < 8; i++)
        k.w[i] = le32((const unsigned char *)key + 4 * i);
    unsigned char *p = data, stream[LANES * 64];
    uint64_t b = first_block;
    for (; bytes >= sizeof stream; b += LANES, p += sizeof stream, bytes -= sizeof stream) {
        blocks(&k, b, rounds / 2, stream);
        xor_bytes(p, stream, sizeof stream);
    }
    for (; bytes; b++) { /* the tail, a block at a time */
        const kr_u32 nonce[3] = {(kr_u32)(b >> 32), 0, 0};
        kr_u32 ks[16];
        kr_chacha_block(&k, (kr_u32)b, nonce, rounds / 2, ks);
        for (int i = 0; i < 16; i++)
            for (int j = 0; j < 4; j++)
                stream[4 * i + j] = (unsigned char)(ks[i] >> (8 * j));
        size_t n = bytes < 64 ? bytes : 64;
        xor_bytes(p, stream, n);
        p += n;
        bytes -= n;
    }
    return KR_OK;
}

/* Released in node KREWARD_1.1 (libkreward 0.3.0), now KREWARD_SYS_1. */
KR__SYMVER_COMPAT(kr_keystream_xor, kr__keystream_xor_v1_1, "KREWARD_1.1", "KREWARD_SYS_1");
