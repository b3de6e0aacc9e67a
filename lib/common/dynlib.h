/* Finding and opening optional run-time libraries (NVRTC, CUPTI). */
#ifndef KR_DYNLIB_H
#define KR_DYNLIB_H

#include <stddef.h>

/* Opens `soname` from the loader's search path, else from each of
 * cuda_home/<subdir>/ in turn. On failure returns NULL and writes the reasons
 * tried into why. On success writes the path that was opened into where. */
void *kr__dynlib_open(const char *soname, const char *cuda_home, const char *const *subdirs,
                      char *where, size_t where_size, char *why, size_t why_size);

/* dlsym into a function pointer without a data/function pointer cast. */
int kr__dynlib_sym(void *lib, const char *name, void *fn_out, size_t fn_size);

#endif
