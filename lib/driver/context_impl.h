/* The context's private layout, shared by the library's files. */
#ifndef KR_CONTEXT_IMPL_H
#define KR_CONTEXT_IMPL_H

#include "kreward/context.h"
#include "driver/cuda_api.h"

struct kr__mem_cache;

struct kr_context {
    /* options, strings owned */
    int32_t device_ordinal;
    uint32_t flags;
    char *cuda_home;      /* resolved toolkit root */
    char *default_arch;
    char *cache_dir;      /* NULL: no disk cache */
    struct kr__mem_cache *cache;

    /* last error */
    char errmsg[1024];
    char *errdetail;

    /* device; has_device == 0 means compile/score only, device_why says why */
    int has_device;
    char device_why[512];
    CUdevice dev;
    CUcontext cu;         /* the device's primary context, retained */
    int cc_major, cc_minor;
    char device_name[256];
    char arch[32];        /* compile target, e.g. "sm_90a" */
    char trace_why[512];  /* why CUPTI tracing is off, "" when on */

    /* a sticky CUDA error (illegal address, trap) poisons the CUDA context
     * for the rest of the process: every later device call fails with this */
    int poisoned;
    char poison_why[512];

    /* the engine's state on the device (run/engine.h), created by its
     * first use; the engine registers how to free it, so this layer never
     * calls upward */
    void *engine;
    void (*engine_free)(kr_context *ctx);
    /* bytes written by a kernel on stream (src NULL: zeros), where the
     * driver's copies do not reach (a module's padding between the variables
     * it registers: compile/globals.c); set by the engine when it exists */
    int (*device_write)(kr_context *ctx, CUdeviceptr dst, const void *src, size_t bytes,
                        CUstream stream);
};

/* Sets the error text and returns code. */
int kr__fail(kr_context *ctx, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Same, with a detail text (e.g. a compile log) kept beside the message. */
int kr__fail_detail(kr_context *ctx, int code, const char *detail, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
void kr__clear_error(kr_context *ctx);

/* Reports a failed driver call: maps it to a status, poisons the context on
 * sticky errors (KR_EFAULT), and returns the status. */
int kr__cuda_fail(kr_context *ctx, CUresult r, const char *what);

/* Makes the context's device current on this thread; KR_ENODEVICE or
 * KR_EPOISONED with the reason when it cannot. */
int kr__device_enter(kr_context *ctx);

/* Resolved CUDA toolkit root: option, $CUDA_HOME, $CUDA_PATH, build default,
 * /usr/local/cuda. Returns a malloc'd string. */
char *kr__resolve_cuda_home(const char *option);

#endif
