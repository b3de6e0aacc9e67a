/* Loads NVRTC on first use. */
#include "driver/nvrtc_api.h"

#include "common/dynlib.h"
#include "driver/cuda_api.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

static kr__nvrtc_api g_nvrtc;
static pthread_mutex_t g_nvrtc_lock = PTHREAD_MUTEX_INITIALIZER;

static const char *const nvrtc_sonames[] = {"libnvrtc.so.13", "libnvrtc.so.12", NULL};
static const int nvrtc_majors[] = {13, 12, 0};
static const char *const nvrtc_toolkit[] = {"lib64", "lib", "targets/x86_64-linux/lib", NULL};
/* nvidia-cuda-nvrtc (13: nvidia/cu13) and nvidia-cuda-nvrtc-cu12 */
static const char *const nvrtc_wheels[] = {"nvidia/cu13/lib", "nvidia/cuda_nvrtc/lib", NULL};
static const kr__dynlib_spec nvrtc_spec = {"NVRTC", "KREWARD_NVRTC_LIBRARY", nvrtc_sonames,
                                           nvrtc_majors, nvrtc_toolkit, nvrtc_wheels};

static int load(const char *cuda_home)
{
    kr__nvrtc_api api;
    memset(&api, 0, sizeof api);
    kr__dynlib_found found;
    int driver = kr__cuda_driver_version();
    void *lib = kr__dynlib_find(&nvrtc_spec, cuda_home, driver / 1000, &found, api.why,
                                sizeof api.why);
    if (!lib) {
        memcpy(g_nvrtc.why, api.why, sizeof api.why);
        return -1;
    }
    memcpy(api.path, found.path, sizeof api.path);
    memcpy(api.source, found.source, sizeof api.source);
    memcpy(api.note, found.note, sizeof api.note);
#define KR__NVRTC_RESOLVE(name)                                                     \
    if (kr__dynlib_sym(lib, #name, &api.name, sizeof api.name) != 0) {              \
        snprintf(g_nvrtc.why, sizeof g_nvrtc.why, "%s has no %s", api.path, #name); \
        return -1;                                                                  \
    }
    KR_NVRTC_FUNCTIONS(KR__NVRTC_RESOLVE)
#undef KR__NVRTC_RESOLVE
    /* optional (12.8+); older ones compile without cooperative cancellation */
    kr__dynlib_sym(lib, "nvrtcSetFlowCallback", &api.nvrtcSetFlowCallback,
                   sizeof api.nvrtcSetFlowCallback);
    api.nvrtcVersion(&api.major, &api.minor);
    if (api.major < 12) {
        /* an explicit file may be anything: the options we pass and the
         * architectures we target need 12 or newer */
        snprintf(g_nvrtc.why, sizeof g_nvrtc.why, "%s is NVRTC %d.%d; libkreward needs 12 or 13",
                 api.path, api.major, api.minor);
        return -1;
    }
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
