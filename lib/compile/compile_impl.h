/* Shared by compile.c (options, cache, kr_compile) and nvrtc_run.c (one
 * NVRTC compile). */
#ifndef KR_COMPILE_IMPL_H
#define KR_COMPILE_IMPL_H

#include "compile/include_policy.h"
#include "compile/program_impl.h"
#include "driver/context_impl.h"
#include "driver/nvrtc_api.h"

/* The compile log kept per program when the options do not say. */
#define KR__DEFAULT_MAX_LOG ((uint64_t)64 << 10)

/* The NVRTC option list, owned strings. */
typedef struct {
    char **items;
    size_t count;
} optlist;

/* Reads a caller's kr_compile_options by its version (NULL: defaults). */
int kr__compile_options_read(kr_context *ctx, kr_compile_options *dst,
                             const kr_compile_options *src);

/* Compiles inc (the source as the include policy rewrote it, and every
 * header in memory) with NVRTC into prog (image, log, lowered names, time).
 * The log keeps only the candidate's own diagnostics (log_filter.c) and is
 * cut at o->max_log_bytes. Errors are set on ctx, with the log as the
 * detail. o->time_limit_s > 0 cancels through the flow callback. */
int kr__nvrtc_run(kr_context *ctx, const kr__nvrtc_api *nv, const kr__includes *inc,
                  const char *name, const optlist *l, const kr_compile_options *o, int want_cubin,
                  kr_program *prog);

#endif
