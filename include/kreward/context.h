/* libkreward: the context handle.
 *
 * A context owns the loaded run-time libraries (libcuda, NVRTC, CUPTI), the
 * chosen device and the engine's state on it (stream, builtin kernels), the
 * compile cache and the last error text. It is created on machines without
 * a GPU too: compile and score work there, and calls that need a device
 * fail with KR_ENODEVICE and say why.
 *
 * Threads: a context and everything that runs through it (compile,
 * verify, benchmark, evaluate) is used by one thread at a time; use one
 * context per thread for parallel work. Its compile cache is locked and may
 * be shared with other processes through cache_dir.
 *
 * Lifetimes: programs and rewards made from a context belong to it: free
 * them before it, and pass them only to calls on it (calls on another
 * context fail with KR_EINVAL). Problems, plans and reports are values: they
 * hold no device state and work with any context. */
#ifndef KREWARD_CONTEXT_H
#define KREWARD_CONTEXT_H

#include "common.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kr_context kr_context;

/* Never use a GPU even when one is present. */
#define KR_CONTEXT_NO_DEVICE 0x1u
/* Do not start CUPTI kernel tracing (e.g. to profile the caller with nsys);
 * benchmarks then time with events only. Also: KREWARD_CUPTI=0. */
#define KR_CONTEXT_NO_TRACE 0x2u

#define KR_CONTEXT_OPTIONS_VERSION 1u
typedef struct kr_context_options {
    uint32_t version;            /* KR_CONTEXT_OPTIONS_VERSION */
    int32_t device;              /* CUDA device ordinal (default 0) */
    const char *cuda_home;       /* toolkit root for headers; NULL: $CUDA_HOME, the build's, /usr/local/cuda */
    const char *default_arch;    /* compile target when there is no device; NULL: "sm_90a" */
    uint64_t cache_memory_bytes; /* in-memory compile cache budget; 0 disables it */
    const char *cache_dir;       /* on-disk compile cache directory; NULL: none */
    uint32_t flags;              /* KR_CONTEXT_* */
} kr_context_options;

#define KR_CONTEXT_OPTIONS_INIT \
    { KR_CONTEXT_OPTIONS_VERSION, 0, NULL, NULL, (uint64_t)256 << 20, NULL, 0u }

/* Fills the fields that existed in `version` (<= KR_CONTEXT_OPTIONS_VERSION)
 * with their defaults. */
KR_API int kr_context_options_init(kr_context_options *opts, uint32_t version);

/* Creates a context. opts may be NULL for the defaults. Fails only for bad
 * options or lack of memory: a missing driver or GPU is recorded, not fatal. */
KR_API int kr_context_new(kr_context **out, const kr_context_options *opts);
KR_API void kr_context_free(kr_context *ctx);

/* Message for the last failed call on this context ("" when none). Valid
 * until the next call on the context. */
KR_API const char *kr_context_errmsg(const kr_context *ctx);
/* Longer detail for the last failure, e.g. the whole NVRTC log or the
 * offending text; "" when none. Same lifetime as kr_context_errmsg. */
KR_API const char *kr_context_errdetail(const kr_context *ctx);

/* 1 when the context has a usable GPU, else 0. */
KR_API int kr_context_has_device(const kr_context *ctx);
/* Compile target of the context, e.g. "sm_90a". */
KR_API const char *kr_context_arch(const kr_context *ctx);

/* What was found on this machine, as a JSON object the caller frees with
 * kr_free: driver (loaded, version, why not), devices (count, names, compute
 * capability, memory, SMs, L2), NVRTC (version, supported archs), CUPTI,
 * CUDA headers, and the cache. */
KR_API int kr_context_info_json(char **json_out, kr_context *ctx);

#ifdef __cplusplus
}
#endif
#endif
