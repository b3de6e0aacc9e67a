/* The capabilities query: what this machine offers and why something is
 * missing. */
#include "common/cache.h"
#include "driver/context_impl.h"
#include "driver/cupti_api.h"
#include "driver/nvrtc_api.h"
#include "version_gen.h"

#include <jansson.h>
#include <stdio.h>
#include <unistd.h>

static json_t *device_json(const kr__cuda_api *cu, int ordinal)
{
    CUdevice dev;
    json_t *o = json_object();
    json_object_set_new(o, "ordinal", json_integer(ordinal));
    if (cu->cuDeviceGet(&dev, ordinal) != CUDA_SUCCESS)
        return o;
    char name[256] = "";
    size_t mem = 0;
    int major = 0, minor = 0, sms = 0, l2 = 0, clock = 0, mem_clock = 0, bus = 0, smem_optin = 0;
    cu->cuDeviceGetName(name, sizeof name, dev);
    cu->cuDeviceTotalMem(&mem, dev);
    cu->cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev);
    cu->cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev);
    cu->cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev);
    cu->cuDeviceGetAttribute(&l2, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, dev);
    cu->cuDeviceGetAttribute(&clock, CU_DEVICE_ATTRIBUTE_CLOCK_RATE, dev);
    cu->cuDeviceGetAttribute(&mem_clock, CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE, dev);
    cu->cuDeviceGetAttribute(&bus, CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH, dev);
    cu->cuDeviceGetAttribute(&smem_optin, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, dev);
    char cc[16];
    snprintf(cc, sizeof cc, "%d.%d", major, minor);
    json_object_set_new(o, "name", json_string(name));
    json_object_set_new(o, "compute_capability", json_string(cc));
    json_object_set_new(o, "memory_bytes", json_integer((json_int_t)mem));
    json_object_set_new(o, "multiprocessors", json_integer(sms));
    json_object_set_new(o, "l2_bytes", json_integer(l2));
    json_object_set_new(o, "sm_clock_khz", json_integer(clock));
    json_object_set_new(o, "memory_clock_khz", json_integer(mem_clock));
    json_object_set_new(o, "memory_bus_bits", json_integer(bus));
    json_object_set_new(o, "max_shared_per_block_optin", json_integer(smem_optin));
    return o;
}

static json_t *driver_json(const kr__cuda_api *cu)
{
    json_t *o = json_object();
    json_object_set_new(o, "loaded", json_boolean(cu->loaded));
    if (cu->driver_version) {
        char v[32];
        snprintf(v, sizeof v, "%d.%d", cu->driver_version / 1000, (cu->driver_version % 1000) / 10);
        json_object_set_new(o, "cuda_version", json_string(v));
    }
    if (!cu->loaded)
        json_object_set_new(o, "why", json_string(cu->why));
    json_t *devices = json_array();
    int count = 0;
    if (cu->loaded && cu->cuDeviceGetCount(&count) == CUDA_SUCCESS)
        for (int i = 0; i < count; i++)
            json_array_append_new(devices, device_json(cu, i));
    json_object_set_new(o, "devices", devices);
    return o;
}

static json_t *nvrtc_json(const kr__nvrtc_api *nv)
{
    json_t *o = json_object();
    json_object_set_new(o, "loaded", json_boolean(nv->loaded));
    if (!nv->loaded) {
        json_object_set_new(o, "why", json_string(nv->why));
        return o;
    }
    char v[32];
    snprintf(v, sizeof v, "%d.%d", nv->major, nv->minor);
    json_object_set_new(o, "version", json_string(v));
    json_object_set_new(o, "path", json_string(nv->path));
    json_object_set_new(o, "source", json_string(nv->source));
    if (nv->note[0])
        json_object_set_new(o, "note", json_string(nv->note));
    json_object_set_new(o, "cancellable", json_boolean(nv->nvrtcSetFlowCallback != NULL));
    json_t *archs = json_array();
    for (int i = 0; i < nv->num_archs; i++) {
        char a[16];
        snprintf(a, sizeof a, "sm_%d", nv->archs[i]);
        json_array_append_new(archs, json_string(a));
    }
    json_object_set_new(o, "archs", archs);
    return o;
}

static json_t *cupti_json(const kr__cupti_api *cp)
{
    json_t *o = json_object();
    json_object_set_new(o, "loaded", json_boolean(cp->loaded));
    if (cp->loaded) {
        json_object_set_new(o, "api_version", json_integer(cp->version));
        json_object_set_new(o, "path", json_string(cp->path));
        json_object_set_new(o, "source", json_string(cp->source));
        if (cp->note[0])
            json_object_set_new(o, "note", json_string(cp->note));
    } else {
        json_object_set_new(o, "why", json_string(cp->why));
    }
    return o;
}

static json_t *toolkit_json(const kr_context *ctx)
{
    char probe[4200];
    json_t *o = json_object();
    json_object_set_new(o, "cuda_home", json_string(ctx->cuda_home));
    snprintf(probe, sizeof probe, "%s/include/cuda_fp16.h", ctx->cuda_home);
    json_object_set_new(o, "headers", json_boolean(access(probe, R_OK) == 0));
    snprintf(probe, sizeof probe, "%s/include/cccl/cuda/std/type_traits", ctx->cuda_home);
    json_object_set_new(o, "cccl", json_boolean(access(probe, R_OK) == 0));
    return o;
}

static json_t *cache_json(const kr_context *ctx)
{
    json_t *o = json_object();
    uint64_t used = 0, entries = 0, budget = 0;
    if (ctx->cache)
        kr__mem_cache_stats(ctx->cache, &used, &entries, &budget);
    json_object_set_new(o, "memory_budget_bytes", json_integer((json_int_t)budget));
    json_object_set_new(o, "memory_used_bytes", json_integer((json_int_t)used));
    json_object_set_new(o, "memory_entries", json_integer((json_int_t)entries));
    json_object_set_new(o, "dir", ctx->cache_dir ? json_string(ctx->cache_dir) : json_null());
    return o;
}

int kr_context_info_json(char **json_out, kr_context *ctx)
{
    if (!ctx || !json_out)
        return KR_EINVAL;
    kr__clear_error(ctx);
    json_t *o = json_object();
    json_t *lib = json_object();
    json_object_set_new(lib, "version", json_string(KR_VERSION_STRING));
    json_object_set_new(lib, "abi", json_integer(KR_ABI_VERSION));
    json_object_set_new(o, "library", lib);
    json_object_set_new(o, "driver", driver_json(kr__cuda()));
    json_t *dev = json_object();
    json_object_set_new(dev, "ordinal", json_integer(ctx->device_ordinal));
    json_object_set_new(dev, "usable", json_boolean(ctx->has_device));
    if (ctx->has_device)
        json_object_set_new(dev, "name", json_string(ctx->device_name));
    else
        json_object_set_new(dev, "why", json_string(ctx->device_why));
    json_object_set_new(dev, "compile_arch", json_string(ctx->arch));
    json_object_set_new(o, "device", dev);
    json_object_set_new(o, "nvrtc", nvrtc_json(kr__nvrtc(ctx->cuda_home)));
    json_t *cupti = cupti_json(kr__cupti(ctx->cuda_home));
    json_object_set_new(cupti, "tracing", json_boolean(ctx->has_device && !ctx->trace_why[0]));
    if (ctx->trace_why[0])
        json_object_set_new(cupti, "tracing_why", json_string(ctx->trace_why));
    json_object_set_new(o, "cupti", cupti);
    json_object_set_new(o, "toolkit", toolkit_json(ctx));
    json_object_set_new(o, "cache", cache_json(ctx));
    *json_out = json_dumps(o, JSON_INDENT(2));
    json_decref(o);
    return *json_out ? KR_OK : kr__fail(ctx, KR_ENOMEM, "out of memory");
}
