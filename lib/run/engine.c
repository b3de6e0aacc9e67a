/* The engine's per-context state on the device: created on first use,
 * freed through the destructor it registers with the context. */
#include "run/engine.h"
#include "run/profile.h"
#include "common/clock.h"
#include "common/options.h"
#include "compile/program_impl.h"
#include "driver/trace.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int load_builtins(kr_context *ctx, kr__engine *e)
{
    int rc = kr__builtins_compile(ctx, &e->builtins);
    if (rc != KR_OK)
        return rc;
    if (!e->builtins->module)
        return kr__fail(ctx, KR_ECUDA, "builtin kernels do not load: %s", e->builtins->load_why);
    const struct {
        CUfunction *fn;
        const char *name;
    } fns[] = {{&e->f_generate, "kr_generate"},   {&e->f_compare, "kr_compare"},
               {&e->f_hash, "kr_hash"},           {&e->f_check_bytes, "kr_check_bytes"},
               {&e->f_bitdiff, "kr_bitdiff"},     {&e->f_spin_until, "kr_spin_until"},
               {&e->f_spin_cycles, "kr_spin_cycles"}, {&e->f_fma_peak, "kr_fma_peak"},
               {&e->f_mma_peak, "kr_mma_peak"},
               {&e->f_scrub_shared, "kr_scrub_shared"}, {&e->f_device_write, "kr_device_write"}};
    for (size_t i = 0; i < sizeof fns / sizeof fns[0]; i++)
        KR__CU(ctx, kr__cuda()->cuModuleGetFunction(fns[i].fn, e->builtins->module, fns[i].name),
           "cuModuleGetFunction (builtins)");
    for (size_t i = 0; i < KR__GEN_SPECIAL; i++)
        KR__CU(ctx, kr__cuda()->cuModuleGetFunction(&e->f_gen_special[i], e->builtins->module,
                                                    kr__gen_kernel_name(i)),
           "cuModuleGetFunction (generators)");
    /* the scrub takes the whole of a block's shared memory, the carveout at
     * its largest: one block covers everything an SM's blocks can address */
    const kr__cuda_api *cu = kr__cuda();
    int optin = 0;
    cu->cuDeviceGetAttribute(&optin, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, ctx->dev);
    e->scrub_bytes = optin > 0 ? optin : 48 << 10;
    KR__CU(ctx, cu->cuFuncSetAttribute(e->f_scrub_shared,
                                       CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, e->scrub_bytes),
           "cuFuncSetAttribute (shared memory scrub)");
    cu->cuFuncSetAttribute(e->f_scrub_shared, CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT,
                           CU_SHAREDMEM_CARVEOUT_MAX_SHARED);
    /* the kernels that frame a timed sample, known to the tracer by handle */
    kr__trace_register_marker(e->f_spin_until, KR__MARK_SPIN);
    kr__trace_register_marker(e->f_spin_cycles, KR__MARK_PROBE);
    return KR_OK;
}

static int create(kr_context *ctx, kr__engine *e)
{
    const kr__cuda_api *cu = kr__cuda();
    KR__CU(ctx, cu->cuStreamCreate(&e->stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
    KR__CU(ctx, cu->cuMemAlloc(&e->slots_dev, KR__SLOTS * 8), "cuMemAlloc (result slots)");
    void *host = NULL;
    KR__CU(ctx, cu->cuMemHostAlloc(&host, KR__SLOTS * 8, 0), "cuMemHostAlloc (result slots)");
    e->slots = host;
    void *flag = NULL;
    KR__CU(ctx, cu->cuMemHostAlloc(&flag, KR__FLAG_PAGE_BYTES,
                          CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE),
       "cuMemHostAlloc (flag)");
    e->flag = flag;
    memset(flag, 0, KR__FLAG_PAGE_BYTES);
    KR__CU(ctx, cu->cuMemHostGetDevicePointer(&e->flag_dev, flag, 0), "cuMemHostGetDevicePointer");
    /* device printf goes through a FIFO the driver drains at every sync:
     * bound it, so a candidate printing from every thread costs little */
    cu->cuCtxSetLimit(CU_LIMIT_PRINTF_FIFO_SIZE, KR__PRINTF_FIFO_BYTES);
    cu->cuDeviceGetAttribute(&e->sm_count, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, ctx->dev);
    cu->cuDeviceGetAttribute(&e->l2_bytes, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, ctx->dev);
    return load_builtins(ctx, e);
}

static void engine_free(kr_context *ctx)
{
    kr__engine *e = ctx->engine;
    if (!e)
        return;
    ctx->engine = NULL;
    ctx->engine_free = NULL;
    ctx->device_write = NULL;
    if (e->f_spin_until)
        kr__trace_unregister_marker(e->f_spin_until);
    if (e->f_spin_cycles)
        kr__trace_unregister_marker(e->f_spin_cycles);
    kr_program_free(e->builtins);
    free(e->sound);
    free(e->fast);
    for (size_t i = 0; i < e->num_ref_times; i++)
        free(e->ref_times[i].seconds);
    free(e->ref_times);
    free(e->memo);
    if (ctx->poisoned || kr__cuda()->cuCtxSetCurrent(ctx->cu) != CUDA_SUCCESS) {
        free(e); /* the driver objects die with the process */
        return;
    }
    const kr__cuda_api *cu = kr__cuda();
    for (size_t i = 0; i < e->num_spare; i++)
        cu->cuMemFree(e->spare[i].base);
    kr__gpu_timer_free(&e->gpu);
    if (e->stream)
        cu->cuStreamDestroy(e->stream);
    if (e->slots_dev)
        cu->cuMemFree(e->slots_dev);
    if (e->write_staging)
        cu->cuMemFree(e->write_staging);
    if (e->slots)
        cu->cuMemFreeHost(e->slots);
    if (e->flag)
        cu->cuMemFreeHost(e->flag);
    if (e->pinned)
        cu->cuMemFreeHost(e->pinned);
    free(e);
}

int kr__engine_get(kr_context *ctx, kr__engine **out)
{
    int rc = kr__device_enter(ctx);
    if (rc != KR_OK)
        return rc;
    if (!ctx->engine) {
        kr__engine *e = calloc(1, sizeof *e);
        if (!e)
            return kr__fail(ctx, KR_ENOMEM, "out of memory");
        ctx->engine = e;
        ctx->engine_free = engine_free;
        e->gpu.on = e->sites.on = kr__profile_mode() != NULL;
        e->gen_generic_only = kr__knob_off("KR_GEN_SPECIALISED");
        ctx->device_write = kr__k_device_write;
        if ((rc = create(ctx, e)) != KR_OK) {
            engine_free(ctx);
            return rc;
        }
    }
    *out = ctx->engine;
    return KR_OK;
}

/* Restoring a program's globals (the context's device_write hook, set
 * when the engine is made): staged through a device buffer of the
 * engine's, written by its kernel on the caller's stream. */
int kr__k_device_write(kr_context *ctx, CUdeviceptr dst, const void *src, size_t bytes,
                       CUstream stream)
{
    kr__engine *e = kr__engine_of(ctx);
    const kr__cuda_api *cu = kr__cuda();
    CUdeviceptr from = 0;
    if (src && bytes > e->write_staging_bytes) {
        /* the old buffer may still feed a queued write: the stream drains
         * before it goes */
        if (e->write_staging) {
            CUresult r = cu->cuStreamSynchronize(stream);
            if (r != CUDA_SUCCESS)
                return kr__cuda_fail(ctx, r, "restoring a program's globals");
            cu->cuMemFree(e->write_staging);
            e->write_staging = 0;
            e->write_staging_bytes = 0;
        }
        CUresult r = cu->cuMemAlloc(&e->write_staging, bytes);
        if (r != CUDA_SUCCESS)
            return kr__cuda_fail(ctx, r, "cuMemAlloc (a program's globals, staged)");
        e->write_staging_bytes = bytes;
    }
    if (src) {
        /* on the stream: ordered after the write that read the buffer last */
        CUresult r = cu->cuMemcpyHtoDAsync(e->write_staging, src, bytes, stream);
        if (r != CUDA_SUCCESS)
            return kr__cuda_fail(ctx, r, "restoring a program's globals");
        from = e->write_staging;
    }
    uint64_t n = bytes;
    void *params[] = {&dst, &from, &n};
    CUresult r = cu->cuLaunchKernel(e->f_device_write, kr__grid_blocks(e, n), 1, 1, 256, 1, 1, 0,
                                    stream, params, NULL);
    return r == CUDA_SUCCESS ? KR_OK : kr__cuda_fail(ctx, r, "restoring a program's globals");
}

kr__engine *kr__engine_of(kr_context *ctx)
{
    return ctx->engine;
}

int kr__engine_pinned(kr_context *ctx, size_t bytes, void **out)
{
    kr__engine *e = ctx->engine;
    if (bytes > e->pinned_bytes) {
        const kr__cuda_api *cu = kr__cuda();
        if (e->pinned)
            cu->cuMemFreeHost(e->pinned);
        e->pinned = NULL;
        e->pinned_bytes = 0;
        size_t size = bytes + bytes / 4; /* room to grow a little */
        KR__CU(ctx, cu->cuMemHostAlloc(&e->pinned, size, 0), "cuMemHostAlloc (staging)");
        e->pinned_bytes = size;
    }
    *out = e->pinned;
    return KR_OK;
}

const char *const kr__prof_names[KR__PROF_N] = {"alloc", "free", "wait", "reference", "open"};

const char *kr__profile_mode(void)
{
    const char *v = getenv("KR_PROFILE");
    return v && *v && strcmp(v, "0") != 0 ? v : NULL;
}

void kr__prof_add(kr_context *ctx, int which, double t0)
{
    kr__engine *e = ctx ? kr__engine_of(ctx) : NULL;
    if (e && which >= 0 && which < KR__PROF_N)
        e->prof[which] += kr__now() - t0;
}

/* How long a wait polls the stream before it starts sleeping. Most waits
 * (a verification unit's steps, a timed sample) end within a millisecond,
 * and a sleeping poll overshoots by the kernel's timer slack (50 us by
 * default) plus its own doubling nap: with ~100 waits per candidate that
 * was milliseconds of an idle GPU per candidate. KR_WAIT_SPIN_US overrides
 * the default (0: sleep from the start, as before), read once. */
#define WAIT_SPIN_US_DEFAULT 2000

static double wait_spin_s(void)
{
    static double spin = -1;
    if (spin < 0) {
        const char *v = getenv("KR_WAIT_SPIN_US");
        double us = v && *v ? atof(v) : WAIT_SPIN_US_DEFAULT;
        spin = (us > 0 ? us : 0) * 1e-6;
    }
    return spin;
}

/* Whether the stream (ev NULL) or the event is done. */
static CUresult query(const kr__engine *e, CUevent ev)
{
    return ev ? kr__cuda()->cuEventQuery(ev) : kr__cuda()->cuStreamQuery(e->stream);
}

/* Polls until the stream (ev NULL) or the event is done: spinning first,
 * then sleeping with a doubling nap; past the deadline the context is
 * poisoned (a running kernel cannot be stopped from inside the process). */
static int wait_for(kr_context *ctx, CUevent ev, double timeout_s, const char *what)
{
    kr__engine *e = ctx->engine;
    double t0 = kr__now(), deadline = t0 + timeout_s, spin_until = t0 + wait_spin_s();
    struct timespec nap = {0, 20000};
    e->waits++;
    for (;;) {
        CUresult r = query(e, ev);
        if (r == CUDA_SUCCESS) {
            kr__prof_add(ctx, KR__PROF_WAIT, t0);
            kr__wait_sites_note(&e->sites, what, t0, kr__now());
            if (ev)
                kr__gpu_timer_harvest_done(&e->gpu);
            else
                kr__gpu_timer_harvest(&e->gpu);
            return KR_OK;
        }
        if (r != CUDA_ERROR_NOT_READY)
            return kr__cuda_fail(ctx, r, what);
        double now = kr__now();
        if (now > deadline) {
            /* once more: a poller descheduled past the deadline (busy host
             * CPUs) must not call a finished kernel a hang */
            r = query(e, ev);
            if (r == CUDA_SUCCESS || r != CUDA_ERROR_NOT_READY)
                continue;
            ctx->poisoned = 1;
            snprintf(ctx->poison_why, sizeof ctx->poison_why,
                     "%s did not finish within %.2f s (a hang?)", what, timeout_s);
            return kr__fail(ctx, KR_ETIMEOUT, "%s", ctx->poison_why);
        }
        if (now < spin_until)
            continue; /* a query itself takes a microsecond or so */
        nanosleep(&nap, NULL);
        if (nap.tv_nsec < 1000000)
            nap.tv_nsec *= 2;
    }
}

int kr__engine_wait(kr_context *ctx, double timeout_s, const char *what)
{
    return wait_for(ctx, NULL, timeout_s, what);
}

int kr__engine_wait_event(kr_context *ctx, CUevent ev, double timeout_s, const char *what)
{
    return wait_for(ctx, ev, timeout_s, what);
}

int kr__engine_settle_refused(kr_context *ctx, int rc, double timeout_s, const char *what)
{
    if (ctx->poisoned)
        return rc;
    int w = kr__engine_wait(ctx, timeout_s, what);
    return w == KR_ETIMEOUT || w == KR_EFAULT ? w : rc;
}
