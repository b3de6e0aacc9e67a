/* Context lifecycle: options, device selection, and the capabilities query. */
#include "driver/context_impl.h"
#include "common/cache.h"
#include "driver/trace.h"
#include "driver/nvrtc_api.h"
#include "common/strbuf.h"
#include "version_gen.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int kr_context_options_init(kr_context_options *opts, uint32_t version)
{
    if (!opts)
        return KR_EINVAL;
    if (version != KR_CONTEXT_OPTIONS_VERSION)
        return KR_EVERSION;
    kr_context_options defaults = KR_CONTEXT_OPTIONS_INIT;
    *opts = defaults;
    return KR_OK;
}

char *kr__resolve_cuda_home(const char *option)
{
    const char *candidates[] = {option, getenv("CUDA_HOME"), getenv("CUDA_PATH"),
                                KR_BUILD_CUDA_HOME, "/usr/local/cuda"};
    for (size_t i = 0; i < sizeof candidates / sizeof candidates[0]; i++) {
        const char *c = candidates[i];
        if (!c || !*c)
            continue;
        char probe[4096];
        snprintf(probe, sizeof probe, "%s/include/cuda_runtime.h", c);
        if (access(probe, R_OK) == 0 || c == option)
            return kr__strdup(c); /* an explicit option wins even when incomplete */
    }
    return kr__strdup("/usr/local/cuda");
}

/* Arch-specific targets ("a") exist from compute capability 9.0 on; they
 * unlock wgmma/TMA and such, and the cubin only has to run on this device. */
static void arch_for(int major, int minor, char *out, size_t size)
{
    snprintf(out, size, "sm_%d%d%s", major, minor, major >= 9 ? "a" : "");
}

static void open_device(kr_context *ctx)
{
    const kr__cuda_api *cu = kr__cuda();
    if (ctx->flags & KR_CONTEXT_NO_DEVICE) {
        const char *env = getenv("KREWARD_DEVICE");
        kr__strlcpy(ctx->device_why, env && !strcmp(env, "none") ? "disabled by KREWARD_DEVICE=none"
                                                                 : "disabled by KR_CONTEXT_NO_DEVICE",
                    sizeof ctx->device_why);
        return;
    }
    if (!cu->loaded) {
        kr__strlcpy(ctx->device_why, cu->why, sizeof ctx->device_why);
        return;
    }
    int count = 0;
    CUresult r = cu->cuDeviceGetCount(&count);
    if (r != CUDA_SUCCESS || count == 0) {
        kr__strlcpy(ctx->device_why, "the driver reports no CUDA device", sizeof ctx->device_why);
        return;
    }
    if (ctx->device_ordinal < 0 || ctx->device_ordinal >= count) {
        snprintf(ctx->device_why, sizeof ctx->device_why,
                 "device %d requested, the driver reports %d device(s)", ctx->device_ordinal, count);
        return;
    }
    char desc[200];
    if ((r = cu->cuDeviceGet(&ctx->dev, ctx->device_ordinal)) != CUDA_SUCCESS ||
        (r = cu->cuDevicePrimaryCtxRetain(&ctx->cu, ctx->dev)) != CUDA_SUCCESS) {
        kr__cuda_describe(r, desc, sizeof desc);
        snprintf(ctx->device_why, sizeof ctx->device_why, "cannot open device %d: %s",
                 ctx->device_ordinal, desc);
        ctx->cu = NULL;
        return;
    }
    cu->cuDeviceGetName(ctx->device_name, sizeof ctx->device_name, ctx->dev);
    cu->cuDeviceGetAttribute(&ctx->cc_major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, ctx->dev);
    cu->cuDeviceGetAttribute(&ctx->cc_minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, ctx->dev);
    arch_for(ctx->cc_major, ctx->cc_minor, ctx->arch, sizeof ctx->arch);
    ctx->has_device = 1;
    /* kernel tracing must start before any module is loaded */
    if (ctx->flags & KR_CONTEXT_NO_TRACE)
        kr__strlcpy(ctx->trace_why, "disabled by KR_CONTEXT_NO_TRACE", sizeof ctx->trace_why);
    else
        kr__trace_start(ctx->cuda_home, ctx->trace_why, sizeof ctx->trace_why);
}

int kr_context_new(kr_context **out, const kr_context_options *opts)
{
    if (!out)
        return KR_EINVAL;
    *out = NULL;
    kr_context_options o = KR_CONTEXT_OPTIONS_INIT;
    if (opts) {
        if (opts->version > KR_CONTEXT_OPTIONS_VERSION || opts->version == 0)
            return KR_EVERSION;
        o = *opts;
    }
    kr_context *ctx = calloc(1, sizeof *ctx);
    if (!ctx)
        return KR_ENOMEM;
    ctx->device_ordinal = o.device;
    ctx->flags = o.flags;
    /* KREWARD_DEVICE=none: compile-only, also for programs that cannot pass options */
    const char *env = getenv("KREWARD_DEVICE");
    if (env && strcmp(env, "none") == 0)
        ctx->flags |= KR_CONTEXT_NO_DEVICE;
    ctx->cuda_home = kr__resolve_cuda_home(o.cuda_home);
    ctx->default_arch = kr__strdup(o.default_arch ? o.default_arch : "sm_90a");
    ctx->cache_dir = o.cache_dir && *o.cache_dir ? kr__strdup(o.cache_dir) : NULL;
    if (!ctx->cuda_home || !ctx->default_arch || (o.cache_dir && *o.cache_dir && !ctx->cache_dir)) {
        kr_context_free(ctx);
        return KR_ENOMEM;
    }
    if (o.cache_memory_bytes > 0 && !(ctx->cache = kr__mem_cache_new(o.cache_memory_bytes))) {
        kr_context_free(ctx);
        return KR_ENOMEM;
    }
    open_device(ctx);
    if (!ctx->has_device)
        kr__strlcpy(ctx->arch, ctx->default_arch, sizeof ctx->arch);
    *out = ctx;
    return KR_OK;
}

void kr_context_free(kr_context *ctx)
{
    if (!ctx)
        return;
    if (ctx->engine_free)
        ctx->engine_free(ctx);
    /* a poisoned context may still run a hung kernel: releasing it would
     * block; the driver reclaims it when the process exits */
    if (ctx->cu && !ctx->poisoned)
        kr__cuda()->cuDevicePrimaryCtxRelease(ctx->dev);
    kr__mem_cache_free(ctx->cache);
    free(ctx->cuda_home);
    free(ctx->default_arch);
    free(ctx->cache_dir);
    free(ctx->errdetail);
    free(ctx);
}

int kr__device_enter(kr_context *ctx)
{
    if (!ctx->has_device)
        return kr__fail(ctx, KR_ENODEVICE, "this needs an NVIDIA GPU: %s", ctx->device_why);
    if (ctx->poisoned)
        return kr__fail(ctx, KR_EPOISONED,
                        "the GPU context is unusable after an earlier fault (%s); create a new "
                        "process (or use isolated workers) to continue", ctx->poison_why);
    CUresult r = kr__cuda()->cuCtxSetCurrent(ctx->cu);
    if (r != CUDA_SUCCESS)
        return kr__cuda_fail(ctx, r, "cuCtxSetCurrent");
    return KR_OK;
}

int kr_context_has_device(const kr_context *ctx)
{
    return ctx && ctx->has_device;
}

const char *kr_context_arch(const kr_context *ctx)
{
    return ctx ? ctx->arch : "";
}
