/* Loads NVRTC on first use. */
#include "driver/nvrtc_api.h"

#include "common/dynlib.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

static kr__nvrtc_api g_nvrtc;
static pthread_mutex_t g_nvrtc_lock = PTHREAD_MUTEX_INITIALIZER;

static const char *const nvrtc_subdirs[] = {"lib64", "lib", "targets/x86_64-linux/lib", NULL};

static int load(const char *cuda_home)
{
    kr__nvrtc_api api;
    memset(&api, 0, sizeof api);
    void *lib = kr__dynlib_open("libnvrtc.so.13", cuda_home, nvrtc_subdirs, api.path,
                                sizeof api.path, api.why, sizeof api.why);
    if (!lib) {
        memcpy(g_nvrtc.why, api.why, sizeof api.why);
        return -1;
    }
#define KR__NVRTC_RESOLVE(name)                                                     \
    if (kr__dynlib_sym(lib, #name, &api.name, sizeof api.name) != 0) {              \
        snprintf(g_nvrtc.why, sizeof g_nvrtc.why, "%s has no %s", api.path, #name); \
        return -1;                                                                  \
    }
    KR_NVRTC_FUNCTIONS(KR__NVRTC_RESOLVE)
#undef KR__NVRTC_RESOLVE
    kr__dynlib_sym(lib, "nvrtcSetFlowCallback", &api.nvrtcSetFlowCallback,
                   sizeof api.nvrtcSetFlowCallback);
    api.nvrtcVersion(&api.major, &api.minor);
    int n = 0;
    if (api.nvrtcGetNumSupportedArchs(&n) == NVRTC_SUCCESS && n > 0 && n <= 64) {
        api.nvrtcGetSupportedArchs(api.archs);
        api.num_archs = n;
    }
    api.loaded = 1;
    g_nvrtc = api;
    return 0;
}

const kr__nvrtc_api *kr__nvrtc(const char *cuda_home)
{
    pthread_mutex_lock(&g_nvrtc_lock);
    if (!g_nvrtc.loaded)
        load(cuda_home);
    pthread_mutex_unlock(&g_nvrtc_lock);
    return &g_nvrtc;
}
