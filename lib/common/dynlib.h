/* Finding and opening optional run-time libraries (NVRTC, CUPTI). */
#ifndef KR_DYNLIB_H
#define KR_DYNLIB_H

#include <stddef.h>

/* One library to find, in every CUDA major version the library supports.
 * Lists end with NULL (majors with 0). */
typedef struct kr__dynlib_spec {
    const char *what;                   /* "NVRTC": for messages */
    const char *env;                    /* names a file to load instead of searching */
    const char *const *sonames;         /* newest first: "libnvrtc.so.13", "libnvrtc.so.12" */
    const int *majors;                  /* the CUDA major of each soname */
    const char *const *toolkit_subdirs; /* under the toolkit root: "lib64", ... */
    const char *const *wheel_subdirs;   /* under site-packages: "nvidia/cu13/lib", ... */
} kr__dynlib_spec;

/* Where a library came from (`kreward info` prints it). */
typedef struct kr__dynlib_found {
    char path[512];
    char source[64]; /* "$KREWARD_NVRTC_LIBRARY", "loader path", "toolkit", "wheel" */
    int major;       /* CUDA major of the soname opened (0 for an explicit file) */
    char note[256];  /* e.g. newer than the driver: its output may not load */
} kr__dynlib_found;

/* Opens the library: the file named by $env when set (and nothing else),
 * else each soname in turn (only those of $KREWARD_CUDA_MAJOR when it is
 * set), newest first but none newer than driver_major
 * (0: no driver, any), from the loader's path, cuda_home/<toolkit_subdirs>,
 * then <site-packages>/<wheel_subdirs> where this library sits in a Python
 * site-packages folder (the kreward wheel beside NVIDIA's wheels). A soname
 * newer than the driver is the last resort, with a note. On failure returns
 * NULL and writes what was tried into why. */
void *kr__dynlib_find(const kr__dynlib_spec *spec, const char *cuda_home, int driver_major,
                      kr__dynlib_found *found, char *why, size_t why_size);

/* The site-packages folder this code was loaded from (a wheel install), or
 * "" when it is not in one: the folder of this module, or up to two above it,
 * named site-packages or dist-packages. */
void kr__dynlib_site_packages(char *out, size_t size);

/* dlsym into a function pointer without a data/function pointer cast. */
int kr__dynlib_sym(void *lib, const char *name, void *fn_out, size_t fn_size);

#endif
