/* A verification unit's reference outputs ("want"), computed after the
 * candidate's runs (verify.c), so that no candidate code runs while they
 * exist on the device: nothing to find by address arithmetic, and nothing
 * to hide (they were kept XOR-masked under ChaCha20 through both runs
 * before, five passes over every output a unit; the order alone closes
 * it). A source reference runs into device buffers; golden outputs come
 * from the host (the caller's callback), are uploaded for the comparison
 * and scrubbed after it. Downloaded only to explain a failure. */
#include "verify/verify_impl.h"
#include "common/random.h"

#include <stdlib.h>
#include <string.h>

/* The unit's reference outputs: a source reference's run is queued into
 * want (compare_runs waits for it with its comparison) and they stay there;
 * a golden one's come from the host. */
int kr__vwant_compute(vstate *v, vunit *u)
{
    if (v->ref.golden)
        return kr__reference_outputs_host(v->ctx, &v->ref, u->c, u->seed, u->host_want);
    int rc = kr__tset_alloc(v->ctx, &u->want, v->p, u->c, KR__SET_OUTPUTS, "reference output");
    if (rc == KR_OK)
        rc = kr__reference_queue(v->ctx, &v->ref, u->c, u->seed, &u->want, NULL);
    u->want_on_device = rc == KR_OK;
    return rc;
}

double kr__vunit_share(const vstate *v, const vunit *u)
{
    return u->by_reference ? 1.0 : kr__reference_tolerance_share(&v->ref);
}

const void *kr__vunit_want_host(vstate *v, vunit *u, size_t t)
{
    if (u->host_want[t] || !u->want_on_device || !u->want.buf[t].base)
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

/* The reference outputs on the device, for comparing, after the candidate
 * ran: there already, or (golden) uploaded. */
int kr__vwant_reveal(vstate *v, vunit *u)
{
    const kr_problem *p = v->p;
    int rc = KR_OK;
    if (u->want_on_device)
        return KR_OK;
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
 * (a source reference's are scrubbed with the unit). */
int kr__vwant_conceal(vstate *v, vunit *u)
{
    return !u->want_on_device && u->want.buf ? kr__tset_scrub(v->ctx, &u->want) : KR_OK;
}
