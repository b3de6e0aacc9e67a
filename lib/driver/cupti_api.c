/* Loads CUPTI on first use. */
#include "driver/cupti_api.h"

#include "common/dynlib.h"
#include "driver/cuda_api.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

static kr__cupti_api g_cupti;
static pthread_mutex_t g_cupti_lock = PTHREAD_MUTEX_INITIALIZER;

static const char *const cupti_sonames[] = {"libcupti.so.13", "libcupti.so.12", NULL};
static const int cupti_majors[] = {13, 12, 0};
static const char *const cupti_toolkit[] = {"lib64", "lib", "extras/CUPTI/lib64",
                                            "targets/x86_64-linux/lib", NULL};
/* nvidia-cuda-cupti (13: nvidia/cu13) and nvidia-cuda-cupti-cu12 */
static const char *const cupti_wheels[] = {"nvidia/cu13/lib", "nvidia/cuda_cupti/lib", NULL};
static const kr__dynlib_spec cupti_spec = {"CUPTI", "KREWARD_CUPTI_LIBRARY", cupti_sonames,
                                           cupti_majors, cupti_toolkit, cupti_wheels};

static void load(const char *cuda_home)
{
    kr__cupti_api api;
    memset(&api, 0, sizeof api);
    kr__dynlib_found found;
    int driver = kr__cuda_driver_version();
    void *lib = kr__dynlib_find(&cupti_spec, cuda_home, driver / 1000, &found, api.why,
                                sizeof api.why);
    if (!lib) {
        memcpy(g_cupti.why, api.why, sizeof api.why);
        return;
    }
    memcpy(api.path, found.path, sizeof api.path);
    memcpy(api.source, found.source, sizeof api.source);
    memcpy(api.note, found.note, sizeof api.note);
#define KR__CUPTI_RESOLVE(name)                                                     \
    if (kr__dynlib_sym(lib, #name, &api.name, sizeof api.name) != 0) {              \
        snprintf(g_cupti.why, sizeof g_cupti.why, "%s has no %s", api.path, #name); \
        return;                                                                     \
    }
    KR_CUPTI_FUNCTIONS(KR__CUPTI_RESOLVE)
#undef KR__CUPTI_RESOLVE
    api.cuptiGetVersion(&api.version);
    api.loaded = 1;
    g_cupti = api;
}

const kr__cupti_api *kr__cupti(const char *cuda_home)
{
    pthread_mutex_lock(&g_cupti_lock);
    if (!g_cupti.loaded)
        load(cuda_home);
    pthread_mutex_unlock(&g_cupti_lock);
    return &g_cupti;
}
