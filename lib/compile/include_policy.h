/* The include policy (docs/compile-safety.md): what a candidate may
 * #include, checked before NVRTC sees the source, and every header NVRTC may
 * read resolved here and handed to it in memory, so that NVRTC never opens a
 * file itself. */
#ifndef KR_INCLUDE_POLICY_H
#define KR_INCLUDE_POLICY_H

#include "compile/pp_scan.h"
#include "kreward/context.h"

#include <stdint.h>

/* What NVRTC compiles: the candidate with its include names rewritten to
 * the names of the in-memory headers, and those headers. */
typedef struct kr__includes {
    char *source;
    size_t num_headers;
    const char **names;
    const char **texts;
    void *priv;
} kr__includes;

/* The caller's include directories as real paths (missing ones dropped, as
 * NVRTC drops them); refuses "/" and the kernel's pseudo file systems with
 * KR_EINVAL. *out is NULL-terminated; free with kr__include_dirs_free. */
int kr__include_dirs(kr_context *ctx, char ***out, const char *const *dirs, size_t count);
void kr__include_dirs_free(char **dirs);

/* Checks the candidate's own text (scan is its kr__pp_scan): refuses
 * computed, absolute, '..', #include_next/#import/#embed, includes inside
 * parentheses, __has_include that is not a plain allowed name, pragmas that
 * name files, #line naming another file; and, as a second look that does
 * not trust the lexer, any directive-like line or include probe naming an
 * absolute path (kr__pp_absolute_anywhere). KR_ECOMPILE with the message and a
 * log of every refusal (cut at max_log bytes) as the detail. */
int kr__include_check(kr_context *ctx, const char *name, const char *src, size_t len,
                      const kr__pp_scan *scan, uint64_t max_log);

/* Resolves the candidate's includes, and those of every header they reach,
 * against the allowed places: the caller's include directories (dirs, from
 * kr__include_dirs), <cuda_home>/include and include/cccl, the shims.
 * KR_ECOMPILE when the candidate, or a header of the caller's, includes
 * something outside them (or something missing). */
int kr__include_resolve(kr_context *ctx, kr__includes *out, const char *src, size_t len,
                        const char *name, const kr__pp_scan *scan, kr__pp_mode mode,
                        char *const *dirs, uint64_t max_log);
void kr__includes_free(kr__includes *inc);

#endif
