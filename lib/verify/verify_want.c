/* A verification unit's reference outputs ("want"): computed, hidden while
 * the candidate runs, revealed for the comparison, and downloaded only to
 * explain a failure.
 *
 * A source reference runs into device buffers and its outputs stay there,
 * XOR-masked by kr_mask with the ChaCha20 keystream of a 256-bit key drawn
 * from the OS per candidate run that only the host holds: a kernel that
 * finds the buffer by address arithmetic reads ciphertext, and plaintext it
 * can compute itself tells it nothing about the rest (a 64-bit mixing hash
 * did: its key fell to a 2^32 search from two known words). Copying the
 * outputs to host memory and back instead cost 0.3 s of a 0.4 s evaluation
 * on the H200 for 128 MiB tensors. Golden outputs come from the host (the
 * caller's callback), are uploaded only after the candidate ran and are
 * scrubbed after the comparison. */
#include "verify/verify_impl.h"
#include "common/random.h"

#include <stdlib.h>
#include <string.h>

/* The unit's reference outputs: a source reference runs into want and they
 * stay there; a golden one's come from the host. */
int kr__vwant_compute(vstate *v, vunit *u)
{
    if (v->ref.golden)
        return kr__reference_outputs_host(v->ctx, &v->ref, u->c, u->seed, u->host_want);
    int rc = kr__tset_alloc(v->ctx, &u->want, v->p, u->c, KR__SET_OUTPUTS, "reference output");
    if (rc == KR_OK)
        rc = kr__reference_run(v->ctx, &v->ref, u->c, u->seed, &u->want);
    u->want_on_device = rc == KR_OK;
    return rc;
}

double kr__vunit_share(const vstate *v, const vunit *u)
{
    return u->by_reference ? 1.0 : kr__reference_tolerance_share(&v->ref);
}

const void *kr__vunit_want_host(vstate *v, vunit *u, size_t t)
{
    if (u->host_want[t] || !u->want_on_device || u->masked || !u->want.buf[t].base)
        return u->host_want[t];
    const kr__dbuf *b = &u->want.buf[t];
    void *host = malloc(b->bytes ? b->bytes : 1);
    if (host && kr__engine_wait(v->ctx, 30, "the reference outputs") == KR_OK &&
        kr__cuda()->cuMemcpyDtoH(host, b->ptr, b->bytes) == CUDA_SUCCESS) {
        u->host_want[t] = host;
        return host;
    }
    free(host);
    return NULL;
}

/* XORs every reference output of the unit with the keystream of the unit's
 * key, one stream per tensor (the nonce); masking and unmasking are the
 * same call. */
static int mask_want(vstate *v, vunit *u)
{
    int rc = KR_OK;
    for (size_t t = 0; t < v->p->num_tensors && rc == KR_OK; t++)
        if (u->want.buf[t].base)
            rc = kr__k_mask(v->ctx, u->want.buf[t].ptr, u->want.buf[t].bytes, &u->mask_key,
                            (uint32_t)t, (uint32_t)u->id);
    return rc;
}

/* Before a candidate run: the reference outputs hidden under a fresh key. */
int kr__vwant_hide(vstate *v, vunit *u)
{
    if (!u->want_on_device || u->masked)
        return KR_OK;
    for (size_t i = 0; i < 4; i++) {
        uint64_t r = kr__random64();
        u->mask_key.w[2 * i] = (kr_u32)r;
        u->mask_key.w[2 * i + 1] = (kr_u32)(r >> 32);
    }
    u->masked = 1;
    return mask_want(v, u);
}

/* The reference outputs on the device, for comparing, after the candidate
 * ran: unmasked, or (golden) uploaded. */
int kr__vwant_reveal(vstate *v, vunit *u)
{
    const kr_problem *p = v->p;
    int rc = KR_OK;
    if (u->want_on_device) {
        if (u->masked)
            rc = mask_want(v, u);
        u->masked = 0;
        memset(&u->mask_key, 0, sizeof u->mask_key);
        return rc;
    }
    if (!u->want.buf)
        rc = kr__tset_alloc(v->ctx, &u->want, p, u->c, KR__SET_OUTPUTS, "reference copy");
    for (size_t t = 0; t < p->num_tensors && rc == KR_OK; t++) {
        if (!u->want.buf[t].base)
            continue;
        CUresult r = kr__cuda()->cuMemcpyHtoDAsync(u->want.buf[t].ptr, u->host_want[t],
                                                   u->want.buf[t].bytes, kr__engine_of(v->ctx)->stream);
        if (r != CUDA_SUCCESS)
            rc = kr__cuda_fail(v->ctx, r, "uploading reference outputs");
    }
    return rc;
}

/* After the comparison: golden outputs uploaded for it leave the device
 * (a source reference's are hidden again before the next run). */
int kr__vwant_conceal(vstate *v, vunit *u)
{
    return !u->want_on_device && u->want.buf ? kr__tset_scrub(v->ctx, &u->want) : KR_OK;
}
