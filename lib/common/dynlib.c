/* Finding and opening optional run-time libraries (NVRTC, CUPTI). */
#include "common/dynlib.h"

#include <dlfcn.h>
#include <link.h>
#include <stdio.h>
#include <string.h>

static void opened_path(void *lib, const char *fallback, char *where, size_t where_size)
{
    struct link_map *map = NULL;
    if (where_size == 0)
        return;
    if (dlinfo(lib, RTLD_DI_LINKMAP, &map) == 0 && map && map->l_name && map->l_name[0])
        snprintf(where, where_size, "%s", map->l_name);
    else
        snprintf(where, where_size, "%s", fallback);
}

void *kr__dynlib_open(const char *soname, const char *cuda_home, const char *const *subdirs,
                      char *where, size_t where_size, char *why, size_t why_size)
{
    void *lib = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
    if (lib) {
        opened_path(lib, soname, where, where_size);
        return lib;
    }
    int used = snprintf(why, why_size, "cannot load %s from the library path", soname);
    for (size_t i = 0; cuda_home && subdirs && subdirs[i]; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s/%s", cuda_home, subdirs[i], soname);
        lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        if (lib) {
            opened_path(lib, path, where, where_size);
            return lib;
        }
        if (used >= 0 && (size_t)used < why_size)
            used += snprintf(why + used, why_size - (size_t)used, " nor %s", path);
    }
    return NULL;
}

int kr__dynlib_sym(void *lib, const char *name, void *fn_out, size_t fn_size)
{
    void *sym = dlsym(lib, name);
    if (!sym || fn_size != sizeof sym)
        return -1;
    memcpy(fn_out, &sym, sizeof sym);
    return 0;
}
