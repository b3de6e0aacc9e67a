/* The ChaCha block function (RFC 8439, section 2.3; 20 rounds, or fewer
 * for ChaCha8/12), in C11 with kr_gen.h's integer types and KR_GEN_FN.
 *
 * Why a real stream cipher: the KernelBench path masks a batch's inputs
 * under a fresh key until the clock starts (kr_keystream_xor, whose
 * reference this is): a candidate that knows a few plaintext words must
 * learn nothing about the rest. A 64-bit mixing hash as keystream gave its
 * key up to a 2^32 search from two known words; ChaCha's 256-bit key does
 * not. */
#ifndef KR_CHACHA_H
#define KR_CHACHA_H

/* kr_gen.h comes first (its types and KR_GEN_FN). */
#ifndef KR_GEN_H
#error "include common/kr_gen.h before common/kr_chacha.h"
#endif

/* 256 bits of key, drawn from the OS per use, held by the host. */
typedef struct kr_chacha_key {
    kr_u32 w[8];
} kr_chacha_key;

#define KR_CHACHA_ROTL(v, n) (((v) << (n)) | ((v) >> (32 - (n))))
#define KR_CHACHA_QR(a, b, c, d)                                  \
    do {                                                          \
        a += b; d ^= a; d = KR_CHACHA_ROTL(d, 16);                \
        c += d; b ^= c; b = KR_CHACHA_ROTL(b, 12);                \
        a += b; d ^= a; d = KR_CHACHA_ROTL(d, 8);                 \
        c += d; b ^= c; b = KR_CHACHA_ROTL(b, 7);                 \
    } while (0)

/* 64 bytes of keystream (16 little-endian words) for block `counter` of
 * the stream named by (key, nonce), after 2 x double_rounds rounds (10:
 * ChaCha20; 4: ChaCha8, for masks undone inside a timed region). */
KR_GEN_FN void kr_chacha_block(const kr_chacha_key *key, kr_u32 counter, const kr_u32 nonce[3],
                               int double_rounds, kr_u32 out[16])
{
    kr_u32 s[16] = {0x61707865u, 0x3320646eu, 0x79622d32u, 0x6b206574u,
                    key->w[0], key->w[1], key->w[2], key->w[3],
                    key->w[4], key->w[5], key->w[6], key->w[7],
                    counter, nonce[0], nonce[1], nonce[2]};
    kr_u32 x[16];
    for (int i = 0; i < 16; i++)
        x[i] = s[i];
    for (int round = 0; round < double_rounds; round++) { /* column, then diagonal */
        KR_CHACHA_QR(x[0], x[4], x[8], x[12]);
        KR_CHACHA_QR(x[1], x[5], x[9], x[13]);
        KR_CHACHA_QR(x[2], x[6], x[10], x[14]);
        KR_CHACHA_QR(x[3], x[7], x[11], x[15]);
        KR_CHACHA_QR(x[0], x[5], x[10], x[15]);
        KR_CHACHA_QR(x[1], x[6], x[11], x[12]);
        KR_CHACHA_QR(x[2], x[7], x[8], x[13]);
        KR_CHACHA_QR(x[3], x[4], x[9], x[14]);
    }
    for (int i = 0; i < 16; i++)
        out[i] = x[i] + s[i];
}

/* ChaCha20 (RFC 8439, section 2.3). */
KR_GEN_FN void kr_chacha20_block(const kr_chacha_key *key, kr_u32 counter, const kr_u32 nonce[3],
                                 kr_u32 out[16])
{
    kr_chacha_block(key, counter, nonce, 10, out);
}

#endif
