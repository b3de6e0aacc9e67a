/* Guarded device buffers and poison patterns (dbuf.h). */
#include "run/dbuf.h"
#include "run/profile.h"

#include <string.h>

/* A kept allocation of exactly this size, taken out of the spares. */
static CUdeviceptr take_spare(kr__engine *e, uint64_t alloc)
{
    for (size_t i = 0; i < e->num_spare; i++)
        if (e->spare[i].alloc == alloc) {
            CUdeviceptr base = e->spare[i].base;
            e->spare_bytes -= alloc;
            e->spare[i] = e->spare[--e->num_spare];
            return base;
        }
    return 0;
}

void kr__dbuf_release_spares(kr_context *ctx)
{
    kr__engine *e = kr__engine_of(ctx);
    if (!e)
        return;
    for (size_t i = 0; i < e->num_spare && !ctx->poisoned; i++)
        kr__cuda()->cuMemFree(e->spare[i].base);
    e->num_spare = 0;
    e->spare_bytes = 0;
}

/* The usable bytes between the guards of an allocation at b->base. */
static int place(kr_context *ctx, kr__dbuf *b, uint64_t bytes, uint64_t alloc, double t0)
{
    b->alloc = alloc;
    b->bytes = bytes;
    b->ptr = b->base + KR__GUARD_BYTES;
    int rc = kr__dbuf_reguard(ctx, b);
    kr__prof_add(ctx, KR__PROF_ALLOC, t0);
    return rc;
}

int kr__dbuf_alloc(kr_context *ctx, kr__dbuf *b, uint64_t bytes, const char *what)
{
    const kr__cuda_api *cu = kr__cuda();
    double t0 = kr__now();
    memset(b, 0, sizeof *b);
    uint64_t body = (bytes + 255) / 256 * 256;
    uint64_t alloc = KR__GUARD_BYTES + body + KR__GUARD_BYTES;
    kr__engine *e = kr__engine_of(ctx);
    if ((b->base = take_spare(e, alloc)) != 0)
        return place(ctx, b, bytes, alloc, t0);
    size_t free_b = 0, total = 0;
    cu->cuMemGetInfo(&free_b, &total);
    if (alloc > free_b && e->num_spare) { /* the spares are the first to go */
        kr__dbuf_release_spares(ctx);
        cu->cuMemGetInfo(&free_b, &total);
    }
    if (alloc > free_b)
        return kr__fail(ctx, KR_ENOMEM, "%s needs %.2f GB of device memory; %.2f GB of %.2f GB are "
                        "free", what, (double)alloc / 1e9, (double)free_b / 1e9, (double)total / 1e9);
    e->mem_allocs++;
    CUresult r = cu->cuMemAlloc(&b->base, alloc);
    if (r == CUDA_ERROR_OUT_OF_MEMORY)
        return kr__fail(ctx, KR_ENOMEM, "%s needs %.2f GB of device memory: the allocation failed",
                        what, (double)alloc / 1e9);
    if (r != CUDA_SUCCESS)
        return kr__cuda_fail(ctx, r, "cuMemAlloc");
    return place(ctx, b, bytes, alloc, t0);
}

/* Whether a freed allocation may be kept: room among the spares, under
 * the cap (a quarter of the device's memory at most), and zeroed on the
 * engine's stream, in order before whatever reuses it (a candidate never
 * sees what the last one, or the reference, left in a buffer). */
static int keep_spare(kr_context *ctx, const kr__dbuf *b)
{
    kr__engine *e = kr__engine_of(ctx);
    if (!e || e->num_spare == KR__SPARE_BUFFERS)
        return 0;
    if (!e->spare_cap) { /* the device's memory does not change: asked once */
        size_t free_b = 0, total = 0;
        kr__cuda()->cuMemGetInfo(&free_b, &total);
        e->spare_cap = total / 4 < KR__SPARE_MAX_BYTES ? total / 4 : KR__SPARE_MAX_BYTES;
    }
    if (e->spare_bytes + b->alloc > e->spare_cap || kr__dbuf_scrub(ctx, b) != KR_OK)
        return 0;
    e->spare[e->num_spare].base = b->base;
    e->spare[e->num_spare++].alloc = b->alloc;
    e->spare_bytes += b->alloc;
    return 1;
}

void kr__dbuf_free(kr_context *ctx, kr__dbuf *b)
{
    double t0 = kr__now();
    if (b->base && !ctx->poisoned && !keep_spare(ctx, b)) {
        kr__engine *e = kr__engine_of(ctx);
        if (e)
            e->mem_frees++;
        /* zeroed before it goes as well: the driver may hand the same
         * memory to the next allocation of this context (a sub-allocated
         * small one), and with a caller's fixed seed what an earlier
         * candidate wrote there would be a later one's answer; cuMemFree
         * waits for the zeroing, queued before it on the stream */
        if (e)
            kr__dbuf_scrub(ctx, b);
        kr__cuda()->cuMemFree(b->base);
    }
    kr__prof_add(ctx, KR__PROF_FREE, t0);
    memset(b, 0, sizeof *b);
}

int kr__dbuf_reguard(kr_context *ctx, const kr__dbuf *b)
{
    const kr__cuda_api *cu = kr__cuda();
    kr__engine *e = kr__engine_of(ctx);
    CUstream s = e->stream;
    kr__gpu_bytes(e, KR__GPU_FILL, (double)(b->alloc - b->bytes));
    int slot = kr__gpu_begin(e, KR__GPU_FILL);
    CUresult r = cu->cuMemsetD8Async(b->base, KR__CANARY, KR__GUARD_BYTES, s);
    if (r == CUDA_SUCCESS)
        r = cu->cuMemsetD8Async(b->ptr + b->bytes, KR__CANARY, b->alloc - KR__GUARD_BYTES - b->bytes, s);
    kr__gpu_end(e, slot);
    return r == CUDA_SUCCESS ? KR_OK : kr__cuda_fail(ctx, r, "cuMemsetD8Async (canary)");
}

int kr__dbuf_scrub(kr_context *ctx, const kr__dbuf *b)
{
    if (!b->base)
        return KR_OK;
    kr__engine *e = kr__engine_of(ctx);
    kr__gpu_bytes(e, KR__GPU_FILL, (double)b->alloc);
    int slot = kr__gpu_begin(e, KR__GPU_FILL);
    CUresult r = kr__cuda()->cuMemsetD8Async(b->base, 0, b->alloc, e->stream);
    kr__gpu_end(e, slot);
    return r == CUDA_SUCCESS ? KR_OK : kr__cuda_fail(ctx, r, "scrubbing a buffer");
}

int kr__dbuf_fill(kr_context *ctx, const kr__dbuf *b, unsigned char value)
{
    KR__CU(ctx, kr__cuda()->cuMemsetD8Async(b->ptr, value, b->bytes, kr__engine_of(ctx)->stream),
       "cuMemsetD8Async");
    return KR_OK;
}

/* NaNs with payloads no arithmetic produces for floats, a byte pattern for
 * integers. */
uint32_t kr__poison_bits(int dtype, int variant)
{
    switch (dtype) {
    case KR_GEN_F32:
        return variant ? 0xFFC0FFEEu : 0x7FBADBADu;
    case KR_GEN_F64:
        return variant ? 0xFFF6FFF6u : 0x7FF47FF4u;
    case KR_GEN_F16:
        return variant ? 0xFDA5u : 0x7E5Au;
    case KR_GEN_BF16:
        return variant ? 0xFFD3u : 0x7FA5u;
    case KR_GEN_FP8_E4M3:
    case KR_GEN_FP8_E5M2:
        return variant ? 0xFFu : 0x7Fu;
    case KR_GEN_I32:
    case KR_GEN_I64:
        return variant ? 0x5A5A5A5Au : 0xA5A5A5A5u;
    default:
        return variant ? 0x5Au : 0xA5u;
    }
}

int kr__poison(kr_context *ctx, const kr__dbuf *b, int dtype, int variant)
{
    const kr__cuda_api *cu = kr__cuda();
    CUstream s = kr__engine_of(ctx)->stream;
    uint32_t bits = kr__poison_bits(dtype, variant);
    int size = kr_gen_dtype_size((kr_u32)dtype);
    kr__engine *e = kr__engine_of(ctx);
    kr__gpu_bytes(e, KR__GPU_FILL, (double)b->bytes);
    int slot = kr__gpu_begin(e, KR__GPU_FILL);
    CUresult r = size == 1 ? cu->cuMemsetD8Async(b->ptr, (unsigned char)bits, b->bytes, s)
               : size == 2 ? cu->cuMemsetD16Async(b->ptr, (unsigned short)bits, b->bytes / 2, s)
                           : cu->cuMemsetD32Async(b->ptr, bits, b->bytes / 4, s);
    kr__gpu_end(e, slot);
    return r == CUDA_SUCCESS ? KR_OK : kr__cuda_fail(ctx, r, "poisoning outputs (cuMemsetAsync)");
}
