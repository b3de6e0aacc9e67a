/* libkreward: a keystream for masking data that a process must hold before
 * it may read it. The KernelBench input region (docs/kernelbench.md) is its
 * user: the caller writes a timed batch's inputs masked into memory the
 * candidate's worker shares, and the key arrives with the request that
 * starts the clock. A key that repeated over the data gave itself away
 * wherever the values were known (zero padding, the zeros of a triangular
 * input, the high bits of small integers); a stream cipher's does not.
 *
 * An extension call: made for one consumer, not part of the stable API that
 * kreward/kreward.h includes; include <kreward/sys/keystream.h> yourself. Its
 * symbol has the version node KREWARD_SYS_1 of libkreward.sym (a change to
 * it comes with a new node, never under the old one). */
#ifndef KREWARD_SYS_KEYSTREAM_H
#define KREWARD_SYS_KEYSTREAM_H

#include "../common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* XORs bytes bytes at data with the ChaCha keystream (D. J. Bernstein;
 * rounds 8, 12 or 20) of a 256-bit key (the 32 bytes at key), from the
 * start of 64-byte block first_block: masking and unmasking alike. Block b is the ChaCha block of
 * RFC 8439's layout with counter word (uint32_t)b and nonce words
 * (b >> 32, 0, 0); the key's bytes are read as eight little-endian words,
 * and the keystream's words are laid out little-endian. bytes need not be a
 * multiple of 64; a span that starts at byte 64 * first_block of a stream
 * gets that stream's bytes, so one stream can be undone piece by piece.
 * KR_EINVAL for other rounds, a NULL key, or NULL data with bytes > 0. */
KR_API int kr_keystream_xor(void *data, size_t bytes, const void *key, uint64_t first_block,
                            int rounds);

#ifdef __cplusplus
}
#endif
#endif
