/* Loads CUPTI on first use. */
#include "driver/cupti_api.h"

#include "common/dynlib.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

static kr__cupti_api g_cupti;
static pthread_mutex_t g_cupti_lock = PTHREAD_MUTEX_INITIALIZER;

static const char *const cupti_subdirs[] = {"lib64", "lib", "extras/CUPTI/lib64",
                                            "targets/x86_64-linux/lib", NULL};

static void load(const char *cuda_home)
{
    kr__cupti_api api;
    memset(&api, 0, sizeof api);
    void *lib = kr__dynlib_open("libcupti.so.13", cuda_home, cupti_subdirs, api.path,
                                sizeof api.path, api.why, sizeof api.why);
    if (!lib) {
        memcpy(g_cupti.why, api.why, sizeof api.why);
        return;
    }
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
