/* The co-running kernel of the robust speedup's "co_running" condition
 * (bench_robust.c): one block per SM that takes all of an SM's shared
 * memory and half its threads, spinning on a flag for the whole
 * measurement, on a stream of its own, as another job's kernel would. */
#include "bench/bench_impl.h"

#include <stdatomic.h>

int kr__bench_occupy_start(bstate *b)
{
    const kr__cuda_api *cu = kr__cuda();
    kr__engine *e = b->e;
    int optin = 0;
    KR__CU(b->ctx, cu->cuDeviceGetAttribute(&optin, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
                                            b->ctx->dev), "cuDeviceGetAttribute");
    /* the most a block may take: no second block of it fits on an SM, so
     * the blocks land on distinct SMs */
    KR__CU(b->ctx, cu->cuFuncSetAttribute(e->f_spin_until,
                                          CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, optin),
           "cuFuncSetAttribute");
    KR__CU(b->ctx, cu->cuStreamCreate(&b->occupy_stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
    int *flag = (int *)((char *)e->flag + KR__OCCUPY_FLAG_OFFSET);
    atomic_store((_Atomic int *)flag, 0);
    CUdeviceptr flag_dev = e->flag_dev + KR__OCCUPY_FLAG_OFFSET;
    /* bounded: released by the flag, or on its own after the measurement's
     * longest possible time */
    uint64_t timeout = (uint64_t)((b->o.max_time_s + 10) * 1e9);
    void *params[] = {&flag_dev, &timeout};
    KR__CU(b->ctx, cu->cuLaunchKernel(e->f_spin_until, b->occupy, 1, 1, 1024, 1, 1, (unsigned)optin,
                                      b->occupy_stream, params, NULL),
           "launching the co-running kernel");
    return KR_OK;
}

void kr__bench_occupy_stop(bstate *b)
{
    const kr__cuda_api *cu = kr__cuda();
    if (!b->occupy_stream)
        return;
    atomic_store((_Atomic int *)((char *)b->e->flag + KR__OCCUPY_FLAG_OFFSET), 1);
    if (!b->ctx->poisoned) {
        cu->cuStreamSynchronize(b->occupy_stream);
        cu->cuStreamDestroy(b->occupy_stream);
    }
    b->occupy_stream = NULL;
}
