/* Per-context GPU state: stream, builtin kernels, result slots, buffers
 * with guard zones, poison patterns. */
#include "gpu.h"
#include "clock.h"
#include "program_impl.h"
#include "strbuf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

extern const char kr__src_gen[];
extern const size_t kr__src_gen_len;
extern const char kr__src_device[];
extern const size_t kr__src_device_len;

#define CU(call, what)                                  \
    do {                                                \
        CUresult r_ = (call);                           \
        if (r_ != CUDA_SUCCESS)                         \
            return kr__cuda_fail(ctx, r_, what);        \
    } while (0)

int kr__builtins_compile(kr_context *ctx, kr_program **out)
{
    kr__buf src = KR__BUF_INIT;
    kr__buf_append(&src, kr__src_gen, kr__src_gen_len);
    kr__buf_puts(&src, "\n");
    kr__buf_append(&src, kr__src_device, kr__src_device_len);
    if (src.oom) {
        kr__buf_free(&src);
        return kr__fail(ctx, KR_ENOMEM, "out of memory");
    }
    /* no fused multiply-add: the generator must round exactly as the host */
    const char *extra[] = {"--fmad=false"};
    kr_compile_options o = KR_COMPILE_OPTIONS_INIT;
    o.name = "kreward_builtins.cu";
    o.extra_options = extra;
    o.num_extra_options = 1;
    int rc = kr_compile(ctx, out, src.data, src.len, &o);
    kr__buf_free(&src);
    return rc;
}

static int compile_builtins(kr_context *ctx, kr__gpu *g)
{
    int rc = kr__builtins_compile(ctx, &g->builtins);
    if (rc != KR_OK)
        return rc;
    if (!g->builtins->module)
        return kr__fail(ctx, KR_ECUDA, "builtin kernels do not load: %s", g->builtins->load_why);
    const struct {
        CUfunction *fn;
        const char *name;
    } fns[] = {{&g->f_generate, "kr_generate"},   {&g->f_compare, "kr_compare"},
               {&g->f_hash, "kr_hash"},           {&g->f_check_bytes, "kr_check_bytes"},
               {&g->f_bitdiff, "kr_bitdiff"},     {&g->f_spin_until, "kr_spin_until"},
               {&g->f_spin_cycles, "kr_spin_cycles"}, {&g->f_fma_peak, "kr_fma_peak"}};
    for (size_t i = 0; i < sizeof fns / sizeof fns[0]; i++)
        CU(kr__cuda()->cuModuleGetFunction(fns[i].fn, g->builtins->module, fns[i].name),
           "cuModuleGetFunction (builtins)");
    return KR_OK;
}

static int create(kr_context *ctx, kr__gpu *g)
{
    const kr__cuda_api *cu = kr__cuda();
    CU(cu->cuStreamCreate(&g->stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
    CU(cu->cuMemAlloc(&g->slots_dev, KR__SLOTS * 8), "cuMemAlloc (result slots)");
    void *host = NULL;
    CU(cu->cuMemHostAlloc(&host, KR__SLOTS * 8, 0), "cuMemHostAlloc (result slots)");
    g->slots = host;
    void *flag = NULL;
    CU(cu->cuMemHostAlloc(&flag, 64, CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE),
       "cuMemHostAlloc (flag)");
    g->flag = flag;
    CU(cu->cuMemHostGetDevicePointer(&g->flag_dev, flag, 0), "cuMemHostGetDevicePointer");
    cu->cuDeviceGetAttribute(&g->sm_count, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, ctx->dev);
    cu->cuDeviceGetAttribute(&g->l2_bytes, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, ctx->dev);
    return compile_builtins(ctx, g);
}

int kr__gpu_get(kr_context *ctx, kr__gpu **out)
{
    int rc = kr__device_enter(ctx);
    if (rc != KR_OK)
        return rc;
    if (!ctx->gpu) {
        kr__gpu *g = calloc(1, sizeof *g);
        if (!g)
            return kr__fail(ctx, KR_ENOMEM, "out of memory");
        ctx->gpu = g;
        if ((rc = create(ctx, g)) != KR_OK) {
            kr__gpu_free(ctx);
            return rc;
        }
    }
    *out = ctx->gpu;
    return KR_OK;
}

void kr__gpu_free(kr_context *ctx)
{
    kr__gpu *g = ctx->gpu;
    if (!g)
        return;
    ctx->gpu = NULL;
    kr_program_free(g->builtins);
    if (ctx->poisoned || kr__cuda()->cuCtxSetCurrent(ctx->cu) != CUDA_SUCCESS) {
        free(g); /* the driver objects die with the process */
        return;
    }
    const kr__cuda_api *cu = kr__cuda();
    if (g->stream)
        cu->cuStreamDestroy(g->stream);
    if (g->slots_dev)
        cu->cuMemFree(g->slots_dev);
    if (g->slots)
        cu->cuMemFreeHost(g->slots);
    if (g->flag)
        cu->cuMemFreeHost(g->flag);
    if (g->pinned)
        cu->cuMemFreeHost(g->pinned);
    free(g);
}

int kr__gpu_pinned(kr_context *ctx, size_t bytes, void **out)
{
    kr__gpu *g = ctx->gpu;
    if (bytes > g->pinned_bytes) {
        const kr__cuda_api *cu = kr__cuda();
        if (g->pinned)
            cu->cuMemFreeHost(g->pinned);
        g->pinned = NULL;
        g->pinned_bytes = 0;
        size_t size = bytes + bytes / 4; /* room to grow a little */
        CU(cu->cuMemHostAlloc(&g->pinned, size, 0), "cuMemHostAlloc (staging)");
        g->pinned_bytes = size;
    }
    *out = g->pinned;
    return KR_OK;
}

int kr__gpu_wait(kr_context *ctx, double timeout_s, const char *what)
{
    const kr__cuda_api *cu = kr__cuda();
    double deadline = kr__now() + timeout_s;
    struct timespec nap = {0, 20000};
    for (;;) {
        CUresult r = cu->cuStreamQuery(ctx->gpu->stream);
        if (r == CUDA_SUCCESS)
            return KR_OK;
        if (r != CUDA_ERROR_NOT_READY)
            return kr__cuda_fail(ctx, r, what);
        if (kr__now() > deadline) {
            /* a running kernel cannot be stopped from inside the process */
            ctx->poisoned = 1;
            snprintf(ctx->poison_why, sizeof ctx->poison_why,
                     "%s did not finish within %.1f s (a hang?)", what, timeout_s);
            return kr__fail(ctx, KR_ETIMEOUT, "%s", ctx->poison_why);
        }
        nanosleep(&nap, NULL);
        if (nap.tv_nsec < 1000000)
            nap.tv_nsec *= 2;
    }
}

int kr__gpu_slots_reset(kr_context *ctx, kr__gpu *g)
{
    g->slots_used = 0;
    CU(kr__cuda()->cuMemsetD8Async(g->slots_dev, 0, KR__SLOTS * 8, g->stream), "cuMemsetD8Async");
    return KR_OK;
}

CUdeviceptr kr__gpu_slot(kr__gpu *g, size_t n, size_t *index)
{
    if (g->slots_used + n > KR__SLOTS)
        return 0;
    *index = g->slots_used;
    g->slots_used += n;
    return g->slots_dev + *index * 8;
}

int kr__gpu_fetch_slots(kr_context *ctx, kr__gpu *g)
{
    if (!g->slots_used)
        return KR_OK;
    CU(kr__cuda()->cuMemcpyDtoHAsync(g->slots, g->slots_dev, g->slots_used * 8, g->stream),
       "cuMemcpyDtoHAsync (results)");
    return kr__gpu_wait(ctx, 30, "reading check results");
}

static unsigned blocks_for(const kr__gpu *g, uint64_t n)
{
    uint64_t b = (n + 255) / 256, cap = (uint64_t)(g->sm_count > 0 ? g->sm_count : 1) * 16;
    return (unsigned)(b < 1 ? 1 : b > cap ? cap : b);
}

static int launch(kr_context *ctx, CUfunction fn, uint64_t n, void **params, const char *what)
{
    kr__gpu *g = ctx->gpu;
    CU(kr__cuda()->cuLaunchKernel(fn, blocks_for(g, n), 1, 1, 256, 1, 1, 0, g->stream, params, NULL),
       what);
    return KR_OK;
}

int kr__k_generate(kr_context *ctx, CUdeviceptr out, uint64_t n, const kr_gen_dist *d,
                   uint64_t seed, uint32_t tensor)
{
    kr_gen_dist dist = *d;
    void *params[] = {&out, &n, &dist, &seed, &tensor};
    uint64_t groups = n / (uint64_t)kr_gen_per_call(d) + 1;
    return launch(ctx, ctx->gpu->f_generate, groups, params, "generating inputs");
}

int kr__k_hash(kr_context *ctx, CUdeviceptr p, uint64_t bytes, uint64_t key, CUdeviceptr out)
{
    void *params[] = {&p, &bytes, &key, &out};
    return launch(ctx, ctx->gpu->f_hash, bytes / 4 + 4, params, "hashing inputs");
}

int kr__k_check_bytes(kr_context *ctx, CUdeviceptr p, uint64_t n, unsigned value,
                      CUdeviceptr count, CUdeviceptr first)
{
    void *params[] = {&p, &n, &value, &count, &first};
    return launch(ctx, ctx->gpu->f_check_bytes, n, params, "checking canaries");
}

int kr__k_compare(kr_context *ctx, CUdeviceptr got, CUdeviceptr want, uint64_t n, int dtype,
                  double rtol, double atol, uint32_t poison, CUdeviceptr stats)
{
    uint32_t dt = (uint32_t)dtype;
    void *params[] = {&got, &want, &n, &dt, &rtol, &atol, &poison, &stats};
    return launch(ctx, ctx->gpu->f_compare, n, params, "comparing outputs");
}

int kr__k_bitdiff(kr_context *ctx, CUdeviceptr a, CUdeviceptr b, uint64_t n, uint32_t elem,
                  CUdeviceptr count)
{
    void *params[] = {&a, &b, &n, &elem, &count};
    return launch(ctx, ctx->gpu->f_bitdiff, n, params, "comparing runs");
}

int kr__dbuf_alloc(kr_context *ctx, kr__dbuf *b, uint64_t bytes, const char *what)
{
    const kr__cuda_api *cu = kr__cuda();
    memset(b, 0, sizeof *b);
    uint64_t body = (bytes + 255) / 256 * 256;
    b->alloc = KR__GUARD_BYTES + body + KR__GUARD_BYTES;
    b->bytes = bytes;
    size_t free_b = 0, total = 0;
    cu->cuMemGetInfo(&free_b, &total);
    if (b->alloc > free_b)
        return kr__fail(ctx, KR_ENOMEM, "%s needs %.2f GB of device memory; %.2f GB of %.2f GB are "
                        "free", what, (double)b->alloc / 1e9, (double)free_b / 1e9, (double)total / 1e9);
    CUresult r = cu->cuMemAlloc(&b->base, b->alloc);
    if (r == CUDA_ERROR_OUT_OF_MEMORY)
        return kr__fail(ctx, KR_ENOMEM, "%s needs %.2f GB of device memory: the allocation failed",
                        what, (double)b->alloc / 1e9);
    if (r != CUDA_SUCCESS)
        return kr__cuda_fail(ctx, r, "cuMemAlloc");
    b->ptr = b->base + KR__GUARD_BYTES;
    CUstream s = ctx->gpu->stream;
    CU(cu->cuMemsetD8Async(b->base, KR__CANARY, KR__GUARD_BYTES, s), "cuMemsetD8Async (canary)");
    CU(cu->cuMemsetD8Async(b->ptr + bytes, KR__CANARY, b->alloc - KR__GUARD_BYTES - bytes, s),
       "cuMemsetD8Async (canary)");
    return KR_OK;
}

void kr__dbuf_free(kr_context *ctx, kr__dbuf *b)
{
    if (b->base && !ctx->poisoned)
        kr__cuda()->cuMemFree(b->base);
    memset(b, 0, sizeof *b);
}

int kr__dbuf_check_guards(kr_context *ctx, kr__gpu *g, const kr__dbuf *b, size_t *slot)
{
    CUdeviceptr s = kr__gpu_slot(g, 2, slot);
    if (!s)
        return kr__fail(ctx, KR_ENOMEM, "too many checks in one run");
    /* first offset starts at ~0 so atomicMin finds the lowest */
    CU(kr__cuda()->cuMemsetD8Async(s + 8, 0xff, 8, g->stream), "cuMemsetD8Async");
    int rc = kr__k_check_bytes(ctx, b->base, KR__GUARD_BYTES, KR__CANARY, s, s + 8);
    if (rc == KR_OK)
        rc = kr__k_check_bytes(ctx, b->ptr + b->bytes, b->alloc - KR__GUARD_BYTES - b->bytes,
                               KR__CANARY, s, s + 8);
    return rc;
}

/* Poison patterns: NaNs with payloads no arithmetic produces for floats, a
 * byte pattern for integers; two variants so a value that survives both
 * was written by the kernel. */
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
    CUstream s = ctx->gpu->stream;
    uint32_t bits = kr__poison_bits(dtype, variant);
    int size = kr_gen_dtype_size((kr_u32)dtype);
    if (size == 1)
        CU(cu->cuMemsetD8Async(b->ptr, (unsigned char)bits, b->bytes, s), "cuMemsetD8Async (poison)");
    else if (size == 2)
        CU(cu->cuMemsetD16Async(b->ptr, (unsigned short)bits, b->bytes / 2, s), "cuMemsetD16Async (poison)");
    else
        CU(cu->cuMemsetD32Async(b->ptr, bits, b->bytes / 4, s), "cuMemsetD32Async (poison)");
    return KR_OK;
}
