/* The context's last-error slot, and mapping driver errors to statuses
 * (a sticky error poisons the context). */
#include "driver/context_impl.h"
#include "common/strbuf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

static void set_detail(kr_context *ctx, const char *detail)
{
    free(ctx->errdetail);
    ctx->errdetail = detail ? kr__strdup(detail) : NULL;
}

static int vfail(kr_context *ctx, int code, const char *detail, const char *fmt, va_list ap)
{
    if (!ctx)
        return code;
    vsnprintf(ctx->errmsg, sizeof ctx->errmsg, fmt, ap);
    set_detail(ctx, detail);
    return code;
}

int kr__fail(kr_context *ctx, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = vfail(ctx, code, NULL, fmt, ap);
    va_end(ap);
    return rc;
}

int kr__fail_detail(kr_context *ctx, int code, const char *detail, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = vfail(ctx, code, detail, fmt, ap);
    va_end(ap);
    return rc;
}

void kr__clear_error(kr_context *ctx)
{
    if (!ctx)
        return;
    ctx->errmsg[0] = '\0';
    set_detail(ctx, NULL);
}

int kr__cuda_fail(kr_context *ctx, CUresult r, const char *what)
{
    char desc[200];
    kr__cuda_describe(r, desc, sizeof desc);
    if (kr__cuda_is_sticky(r)) {
        ctx->poisoned = 1;
        snprintf(ctx->poison_why, sizeof ctx->poison_why, "%s failed: %s", what, desc);
        return kr__fail(ctx, KR_EFAULT, "%s failed: %s; the CUDA context is now unusable in this "
                        "process", what, desc);
    }
    if (r == CUDA_ERROR_OUT_OF_MEMORY)
        return kr__fail(ctx, KR_ENOMEM, "%s failed: %s", what, desc);
    return kr__fail(ctx, KR_ECUDA, "%s failed: %s", what, desc);
}

const char *kr_context_errmsg(const kr_context *ctx)
{
    return ctx ? ctx->errmsg : "no context";
}

const char *kr_context_errdetail(const kr_context *ctx)
{
    return ctx && ctx->errdetail ? ctx->errdetail : "";
}
