/* The device's measured ceilings, for roofline figures: copy bandwidth
 * (bytes read + written by a large device-to-device copy) and the fp32 FMA
 * rate. Measured once per context with events, in a few milliseconds. */
#include "bench/bench_impl.h"

/* Best of `reps` event-timed runs after one warm-up, in seconds. */
static double best_time(kr_context *ctx, kr__engine *g, int reps, int (*enqueue)(kr__engine *, void *),
                        void *arg, int *rc)
{
    const kr__cuda_api *cu = kr__cuda();
    CUevent e0, e1;
    cu->cuEventCreate(&e0, CU_EVENT_DEFAULT);
    cu->cuEventCreate(&e1, CU_EVENT_DEFAULT);
    double best = 1e30;
    for (int i = 0; i <= reps && *rc == KR_OK; i++) {
        float ms = 0;
        cu->cuEventRecord(e0, g->stream);
        enqueue(g, arg);
        cu->cuEventRecord(e1, g->stream);
        *rc = kr__engine_wait(ctx, 10, "measuring the device's peaks");
        cu->cuEventElapsedTime(&ms, e0, e1);
        if (i > 0 && ms * 1e-3 < best)
            best = ms * 1e-3;
    }
    cu->cuEventDestroy(e0);
    cu->cuEventDestroy(e1);
    return best;
}

typedef struct {
    CUdeviceptr a, b, out;
    size_t bytes;
    int iterations;
    unsigned blocks;
} peak_args;

static int enqueue_copy(kr__engine *g, void *arg)
{
    peak_args *p = arg;
    return kr__cuda()->cuMemcpyDtoDAsync(p->b, p->a, p->bytes, g->stream) == CUDA_SUCCESS ? 0 : -1;
}

static int enqueue_fma(kr__engine *g, void *arg)
{
    peak_args *p = arg;
    void *params[] = {&p->out, &p->iterations};
    return kr__cuda()->cuLaunchKernel(g->f_fma_peak, p->blocks, 1, 1, 1024, 1, 1, 0, g->stream,
                                      params, NULL) == CUDA_SUCCESS ? 0 : -1;
}

static int enqueue_mma(kr__engine *g, void *arg)
{
    peak_args *p = arg;
    void *params[] = {&p->out, &p->iterations};
    return kr__cuda()->cuLaunchKernel(g->f_mma_peak, p->blocks, 1, 1, 256, 1, 1, 0, g->stream,
                                      params, NULL) == CUDA_SUCCESS ? 0 : -1;
}

int kr__peaks(kr_context *ctx)
{
    kr__engine *g;
    int rc = kr__engine_get(ctx, &g);
    if (rc != KR_OK || g->peak_bytes_per_s > 0)
        return rc;
    const kr__cuda_api *cu = kr__cuda();
    peak_args p = {0, 0, 0, (size_t)512 << 20, 4096, (unsigned)(g->sm_count * 8)};
    if (cu->cuMemAlloc(&p.a, p.bytes) != CUDA_SUCCESS || cu->cuMemAlloc(&p.b, p.bytes) != CUDA_SUCCESS ||
        cu->cuMemAlloc(&p.out, 256) != CUDA_SUCCESS)
        rc = kr__fail(ctx, KR_ENOMEM, "no device memory to measure the peaks");
    if (rc == KR_OK) {
        double copy = best_time(ctx, g, 5, enqueue_copy, &p, &rc);
        double fma = best_time(ctx, g, 3, enqueue_fma, &p, &rc);
        g->peak_bytes_per_s = 2.0 * (double)p.bytes / copy;
        /* 8 FMAs (16 flops) per iteration per thread */
        g->peak_flops = 16.0 * p.iterations * (double)p.blocks * 1024 / fma;
        if (ctx->cc_major >= 8) {
            /* 8 mma.sync of 4096 flops per iteration per warp, 8 warps a block */
            double mma = best_time(ctx, g, 3, enqueue_mma, &p, &rc);
            g->peak_mma_flops = 8.0 * 4096.0 * p.iterations * (double)p.blocks * 8 / mma;
        }
    }
    if (p.a)
        cu->cuMemFree(p.a);
    if (p.b)
        cu->cuMemFree(p.b);
    if (p.out)
        cu->cuMemFree(p.out);
    return rc;
}
