/* Check queueing on the engine's result slots (checks.h). */
#include "run/checks.h"
#include "common/dtype.h"

#include <stdlib.h>
#include <string.h>

/* n zeroed slots (8 bytes each) for one check's results. */
static int take(kr_context *ctx, size_t n, kr__check *out, CUdeviceptr *dev)
{
    kr__engine *e = kr__engine_of(ctx);
    if (e->slots_used + n > KR__SLOTS)
        return kr__fail(ctx, KR_ENOMEM, "too many checks in one batch (%d result slots)", KR__SLOTS);
    *out = e->slots_used;
    *dev = e->slots_dev + e->slots_used * 8;
    e->slots_used += n;
    return KR_OK;
}

/* A slot a kernel lowers with atomicMin starts at ~0. */
static int set_max(kr_context *ctx, CUdeviceptr slot)
{
    CUresult r = kr__cuda()->cuMemsetD8Async(slot, 0xff, 8, kr__engine_of(ctx)->stream);
    return r == CUDA_SUCCESS ? KR_OK : kr__cuda_fail(ctx, r, "cuMemsetD8Async");
}

int kr__checks_begin(kr_context *ctx)
{
    kr__engine *e = kr__engine_of(ctx);
    e->slots_used = 0;
    CUresult r = kr__cuda()->cuMemsetD8Async(e->slots_dev, 0, KR__SLOTS * 8, e->stream);
    return r == CUDA_SUCCESS ? KR_OK : kr__cuda_fail(ctx, r, "cuMemsetD8Async (result slots)");
}

int kr__check_guards(kr_context *ctx, const kr__dbuf *b, kr__check *out)
{
    CUdeviceptr s = 0;
    int rc = take(ctx, 2, out, &s); /* count of changed bytes, lowest offset */
    if (rc == KR_OK)
        rc = set_max(ctx, s + 8);
    if (rc == KR_OK)
        rc = kr__k_check_bytes(ctx, b->base, KR__GUARD_BYTES, KR__CANARY, s, s + 8);
    if (rc == KR_OK)
        rc = kr__k_check_bytes(ctx, b->ptr + b->bytes, b->alloc - KR__GUARD_BYTES - b->bytes,
                               KR__CANARY, s, s + 8);
    return rc;
}

int kr__check_hash(kr_context *ctx, const kr__dbuf *b, uint64_t key, kr__check *out)
{
    CUdeviceptr s = 0;
    int rc = take(ctx, 1, out, &s);
    return rc == KR_OK ? kr__k_hash(ctx, b->ptr, b->bytes, key, s) : rc;
}

int kr__check_compare(kr_context *ctx, const kr__dbuf *got, const kr__dbuf *want,
                      const kr__tensor *x, double share, uint32_t poison, kr__check *out)
{
    CUdeviceptr s = 0;
    int rc = take(ctx, sizeof(kr__cmp_stats) / 8, out, &s);
    if (rc == KR_OK)
        rc = set_max(ctx, s + offsetof(kr__cmp_stats, first_bad));
    uint64_t n = got->bytes / (uint64_t)kr__dtype_size(x->dtype);
    return rc == KR_OK ? kr__k_compare(ctx, got->ptr, want->ptr, n, x->dtype, share * x->rtol,
                                       share * x->atol, poison, s)
                       : rc;
}

int kr__check_bitdiff(kr_context *ctx, const kr__dbuf *a, const kr__dbuf *b, int dtype,
                      kr__check *out)
{
    CUdeviceptr s = 0;
    uint32_t elem = (uint32_t)kr__dtype_size(dtype);
    int rc = take(ctx, 1, out, &s);
    return rc == KR_OK ? kr__k_bitdiff(ctx, a->ptr, b->ptr, a->bytes / elem, elem, s) : rc;
}

int kr__checks_fetch_queued(kr_context *ctx)
{
    kr__engine *e = kr__engine_of(ctx);
    if (!e->slots_used)
        return KR_OK;
    CUresult r = kr__cuda()->cuMemcpyDtoHAsync(e->slots, e->slots_dev, e->slots_used * 8, e->stream);
    return r == CUDA_SUCCESS ? KR_OK : kr__cuda_fail(ctx, r, "cuMemcpyDtoHAsync (check results)");
}

int kr__checks_fetch(kr_context *ctx)
{
    int rc = kr__checks_fetch_queued(ctx);
    if (rc != KR_OK || !kr__engine_of(ctx)->slots_used)
        return rc;
    return kr__engine_wait(ctx, 30, "reading check results");
}

uint64_t *kr__checks_snapshot(kr_context *ctx)
{
    kr__engine *e = kr__engine_of(ctx);
    uint64_t *vals = malloc((e->slots_used ? e->slots_used : 1) * sizeof *vals);
    if (vals)
        memcpy(vals, e->slots, e->slots_used * sizeof *vals);
    return vals;
}

uint64_t kr__check_guard_bytes(kr_context *ctx, kr__check c)
{
    return kr__engine_of(ctx)->slots[c];
}

uint64_t kr__check_value(kr_context *ctx, kr__check c)
{
    return kr__engine_of(ctx)->slots[c];
}

void kr__check_stats(kr_context *ctx, kr__check c, kr__cmp_stats *out)
{
    memcpy(out, &kr__engine_of(ctx)->slots[c], sizeof *out);
}

uint32_t kr__output_poison(const kr__tensor *x, int variant)
{
    return x->role == KR_ROLE_OUT ? kr__poison_bits(x->dtype, variant) : 0xffffffffu;
}
