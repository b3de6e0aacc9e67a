/* Device buffers with canary guard zones before and after, and the poison
 * patterns outputs hold before a candidate writes them. */
#ifndef KR_DBUF_H
#define KR_DBUF_H

#include "run/engine.h"

#define KR__GUARD_BYTES 65536u
#define KR__CANARY 0xC3u

typedef struct kr__dbuf {
    CUdeviceptr base;   /* the allocation */
    CUdeviceptr ptr;    /* what kernels see: base + guard */
    uint64_t bytes;     /* usable bytes */
    uint64_t alloc;     /* allocation size */
} kr__dbuf;

/* Allocates bytes between two guard zones filled with the canary. what
 * names the buffer in an out-of-memory message. A buffer freed earlier with
 * the same allocation size is reused (zeroed when it was freed): every
 * candidate of a problem allocates the same sizes, and cuMemAlloc/cuMemFree
 * were 10 ms of a 70 ms evaluation on the H200. */
int kr__dbuf_alloc(kr_context *ctx, kr__dbuf *b, uint64_t bytes, const char *what);
/* Frees; a no-op on an empty buffer (and after a fault, when the device
 * objects die with the process). The allocation is zeroed and kept for
 * reuse while the spares stay under KR__SPARE_MAX_BYTES. */
void kr__dbuf_free(kr_context *ctx, kr__dbuf *b);
/* A kept allocation's zeroing is queued on the engine's (non-blocking)
 * stream: whoever writes a reused buffer other than through that stream (a
 * synchronous copy goes on the legacy stream) waits for the engine's stream
 * first (kr__engine_wait), or the zeroing lands after the write. */

/* Gives every kept allocation back to the driver. */
void kr__dbuf_release_spares(kr_context *ctx);

/* At most this much device memory is kept in spares, and a quarter of the
 * device's: a GPU worker of a batch serves every problem of it in turn, and
 * an eighth (8 GB at most, 64 buffers) missed 21 allocations a candidate
 * on the pool's 8 problems (a cuMemAlloc and a cuMemFree each: 7 of the
 * worker's 33 ms a candidate, H100, cb07d97). An allocation that does not
 * fit beside them gives them back first (kr__dbuf_alloc). */
#define KR__SPARE_MAX_BYTES (32ull << 30)
/* Refills both guard zones with the canary (queued on the stream). */
int kr__dbuf_reguard(kr_context *ctx, const kr__dbuf *b);
/* Zeroes the whole allocation (queued): for buffers that held the answer. */
int kr__dbuf_scrub(kr_context *ctx, const kr__dbuf *b);
/* Fills the usable bytes with one byte value (queued). */
int kr__dbuf_fill(kr_context *ctx, const kr__dbuf *b, unsigned char value);

/* Fills a tensor buffer with the poison pattern for its dtype (variant 0 or
 * 1: two patterns, so a value that survives both was written by the kernel). */
int kr__poison(kr_context *ctx, const kr__dbuf *b, int dtype, int variant);
/* The per-element bits kr_compare sees in a poisoned element. */
uint32_t kr__poison_bits(int dtype, int variant);

#endif
