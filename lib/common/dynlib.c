/* Finding and opening optional run-time libraries (NVRTC, CUPTI): an
 * explicit file, else by soname (CUDA 13, then 12) from the loader's path,
 * the toolkit, or NVIDIA's Python wheels (docs/packaging.md). */
#include "common/dynlib.h"

#include <dlfcn.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
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

void kr__dynlib_site_packages(char *out, size_t size)
{
    Dl_info info;
    out[0] = '\0';
    if (!dladdr((void *)kr__dynlib_site_packages, &info) || !info.dli_fname ||
        info.dli_fname[0] != '/')
        return;
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", info.dli_fname);
    /* the module's folder, then up to two above it (a package's subfolder);
     * only a folder Python made for packages, never an arbitrary ancestor
     * such as /tmp where anyone could put a nvidia/ folder */
    for (int level = 0; level < 3; level++) {
        char *slash = strrchr(dir, '/');
        if (!slash || slash == dir)
            return;
        *slash = '\0';
        const char *base = strrchr(dir, '/') + 1;
        if (strcmp(base, "site-packages") == 0 || strcmp(base, "dist-packages") == 0) {
            snprintf(out, size, "%s", dir);
            return;
        }
    }
}

/* The `why` text grows by one tried place at a time, cut when full. */
typedef struct {
    char *buf;
    size_t size, used, head;
} tried;

static void note_tried(tried *t, const char *fmt, const char *a, const char *b)
{
    if (t->used + 1 >= t->size)
        return;
    int n = snprintf(t->buf + t->used, t->size - t->used, fmt, a, b);
    if (n > 0)
        t->used += (size_t)n < t->size - t->used ? (size_t)n : t->size - t->used - 1;
}

static void *try_path(const char *path, const char *source, int major, kr__dynlib_found *found,
                      tried *t)
{
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        note_tried(t, "%s%s", t->used > t->head ? ", " : "", path);
        return NULL;
    }
    opened_path(lib, path, found->path, sizeof found->path);
    snprintf(found->source, sizeof found->source, "%s", source);
    found->major = major;
    return lib;
}

static void *try_soname(const kr__dynlib_spec *s, size_t i, const char *cuda_home,
                        const char *site, kr__dynlib_found *found, tried *t)
{
    const char *soname = s->sonames[i];
    int major = s->majors[i];
    void *lib = try_path(soname, "loader path", major, found, t);
    for (size_t d = 0; !lib && cuda_home && *cuda_home && s->toolkit_subdirs[d]; d++) {
        char path[4608];
        snprintf(path, sizeof path, "%s/%s/%s", cuda_home, s->toolkit_subdirs[d], soname);
        lib = try_path(path, "toolkit", major, found, t);
    }
    for (size_t d = 0; !lib && site[0] && s->wheel_subdirs[d]; d++) {
        char path[4608];
        snprintf(path, sizeof path, "%s/%s/%s", site, s->wheel_subdirs[d], soname);
        lib = try_path(path, "wheel", major, found, t);
    }
    return lib;
}

void *kr__dynlib_find(const kr__dynlib_spec *s, const char *cuda_home, int driver_major,
                      kr__dynlib_found *found, char *why, size_t why_size)
{
    memset(found, 0, sizeof *found);
    tried t = {why, why_size, 0, 0};
    if (why_size)
        why[0] = '\0';
    const char *env = s->env ? getenv(s->env) : NULL;
    if (env && *env) {
        /* an explicit choice is never silently replaced by another copy */
        char source[64];
        snprintf(source, sizeof source, "$%s", s->env);
        void *lib = try_path(env, source, 0, found, &t);
        if (!lib) {
            const char *err = dlerror();
            snprintf(why, why_size, "cannot load %s named by $%s: %s", s->what, s->env,
                     err ? err : env);
        }
        return lib;
    }
    /* $KREWARD_CUDA_MAJOR=12: that major only (a trainer's CUDA 12 stack
     * beside a CUDA 13 toolkit, say) */
    const char *pin_env = getenv("KREWARD_CUDA_MAJOR");
    int pin = pin_env && *pin_env ? atoi(pin_env) : 0;
    char site[4096];
    kr__dynlib_site_packages(site, sizeof site);
    if (pin)
        note_tried(&t, "cannot load %s of CUDA %s ($KREWARD_CUDA_MAJOR; tried ", s->what,
                   pin_env);
    else
        note_tried(&t, "cannot load %s (tried %s", s->what, "");
    t.head = t.used;
    /* first pass: what the driver can run; second: the rest, as a last
     * resort (it compiles, but the driver may refuse its output) */
    for (int pass = 0; pass < 2; pass++)
        for (size_t i = 0; s->sonames[i]; i++) {
            int too_new = driver_major > 0 && s->majors[i] > driver_major;
            if (too_new != pass || (pin && s->majors[i] != pin))
                continue;
            void *lib = try_soname(s, i, cuda_home, site, found, &t);
            if (!lib)
                continue;
            if (too_new)
                snprintf(found->note, sizeof found->note,
                         "CUDA %d %s with a driver for CUDA %d: no CUDA %d copy found; what "
                         "it builds may not load", s->majors[i], s->what, driver_major,
                         driver_major);
            return lib;
        }
    note_tried(&t, "%s)%s", t.used > t.head ? "" : "nothing", "");
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
