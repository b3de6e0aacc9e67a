/* Loads libcuda.so.1 once per process and resolves the driver table. */
#include "driver/cuda_api.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

static kr__cuda_api g_cuda;
static pthread_once_t g_cuda_once = PTHREAD_ONCE_INIT;

static int resolve_all(PFN_cuGetProcAddress_v12000 get_proc)
{
#define KR__CUDA_RESOLVE(name, ver)                                                            \
    {                                                                                          \
        CUdriverProcAddressQueryResult found = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;           \
        void *fn = NULL;                                                                       \
        CUresult r = get_proc(#name, &fn, ver, CU_GET_PROC_ADDRESS_DEFAULT, &found);           \
        if (r != CUDA_SUCCESS || fn == NULL || found != CU_GET_PROC_ADDRESS_SUCCESS) {          \
            snprintf(g_cuda.why, sizeof g_cuda.why,                                            \
                     "the driver has no %s (version %d); driver too old?", #name, ver);        \
            return -1;                                                                         \
        }                                                                                      \
        memcpy(&g_cuda.name, &fn, sizeof fn);                                                  \
    }
    KR_CUDA_FUNCTIONS(KR__CUDA_RESOLVE)
#undef KR__CUDA_RESOLVE
    return 0;
}

static void load_once(void)
{
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        const char *err = dlerror();
        snprintf(g_cuda.why, sizeof g_cuda.why, "no NVIDIA driver: cannot load libcuda.so.1 (%s)",
                 err ? err : "unknown reason");
        return;
    }
    void *sym = dlsym(lib, "cuGetProcAddress_v2");
    if (!sym) {
        snprintf(g_cuda.why, sizeof g_cuda.why,
                 "libcuda.so.1 has no cuGetProcAddress_v2: driver older than CUDA 12");
        return; /* the handle stays open: unloading a driver is never safe */
    }
    PFN_cuGetProcAddress_v12000 get_proc;
    memcpy(&get_proc, &sym, sizeof sym);
    if (resolve_all(get_proc) != 0)
        return;
    g_cuda.cuDriverGetVersion(&g_cuda.driver_version);
    if (g_cuda.driver_version < 12040) {
        snprintf(g_cuda.why, sizeof g_cuda.why,
                 "driver supports CUDA %d.%d; libkreward needs 12.4 or newer",
                 g_cuda.driver_version / 1000, (g_cuda.driver_version % 1000) / 10);
        return;
    }
    CUresult r = g_cuda.cuInit(0);
    g_cuda.init_result = (int)r;
    if (r != CUDA_SUCCESS) {
        char desc[160];
        kr__cuda_describe(r, desc, sizeof desc);
        snprintf(g_cuda.why, sizeof g_cuda.why, "cuInit failed: %s", desc);
        return;
    }
    g_cuda.loaded = 1;
}

const kr__cuda_api *kr__cuda(void)
{
    pthread_once(&g_cuda_once, load_once);
    return &g_cuda;
}

static int g_driver_version;
static pthread_once_t g_version_once = PTHREAD_ONCE_INIT;

static void version_once(void)
{
    /* the handle stays open, as kr__cuda's does: unloading a driver is never safe */
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    void *sym = lib ? dlsym(lib, "cuDriverGetVersion") : NULL;
    CUresult (*get)(int *);
    int v = 0;
    if (sym) {
        memcpy(&get, &sym, sizeof sym);
        if (get(&v) != CUDA_SUCCESS)
            v = 0;
    }
    g_driver_version = v;
}

int kr__cuda_driver_version(void)
{
    pthread_once(&g_version_once, version_once);
    return g_driver_version;
}

void kr__cuda_describe(CUresult r, char *buf, size_t size)
{
    const char *name = NULL, *text = NULL;
    if (g_cuda.cuGetErrorName) {
        g_cuda.cuGetErrorName(r, &name);
        g_cuda.cuGetErrorString(r, &text);
    }
    if (name && text)
        snprintf(buf, size, "%s (%s)", name, text);
    else
        snprintf(buf, size, "CUresult %d", (int)r);
}

int kr__cuda_is_sticky(CUresult r)
{
    switch (r) {
    case CUDA_ERROR_ILLEGAL_ADDRESS:
    case CUDA_ERROR_LAUNCH_FAILED:
    case CUDA_ERROR_HARDWARE_STACK_ERROR:
    case CUDA_ERROR_ILLEGAL_INSTRUCTION:
    case CUDA_ERROR_MISALIGNED_ADDRESS:
    case CUDA_ERROR_INVALID_ADDRESS_SPACE:
    case CUDA_ERROR_INVALID_PC:
    case CUDA_ERROR_ASSERT:
    case CUDA_ERROR_ECC_UNCORRECTABLE:
    case CUDA_ERROR_CONTEXT_IS_DESTROYED:
        return 1;
    default:
        return 0;
    }
}
