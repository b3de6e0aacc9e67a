/* Status texts and the context's last-error slot. */
#include "context_impl.h"
#include "strbuf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

static const struct {
    int code;
    const char *name;
    const char *text;
} status_table[] = {
    {KR_OK, "KR_OK", "success"},
    {KR_EINVAL, "KR_EINVAL", "invalid argument"},
    {KR_ENOMEM, "KR_ENOMEM", "out of memory"},
    {KR_EUNAVAILABLE, "KR_EUNAVAILABLE", "a required run-time library is not available"},
    {KR_ENODEVICE, "KR_ENODEVICE", "no usable GPU"},
    {KR_ECOMPILE, "KR_ECOMPILE", "compilation failed"},
    {KR_ETIMEOUT, "KR_ETIMEOUT", "time limit reached"},
    {KR_EPARSE, "KR_EPARSE", "malformed input"},
    {KR_ECUDA, "KR_ECUDA", "CUDA driver error"},
    {KR_EIO, "KR_EIO", "input/output error"},
    {KR_EVERSION, "KR_EVERSION", "version mismatch"},
    {KR_ETOOBIG, "KR_ETOOBIG", "input too large"},
    {KR_EPLAN, "KR_EPLAN", "invalid launch plan"},
    {KR_EPLUGIN, "KR_EPLUGIN", "reward term or plugin error"},
    {KR_EPOISONED, "KR_EPOISONED", "context unusable after an earlier kernel fault"},
    {KR_ENOTFOUND, "KR_ENOTFOUND", "not found"},
    {KR_ERANGE, "KR_ERANGE", "value out of range"},
    {KR_EUNSUPPORTED, "KR_EUNSUPPORTED", "not supported"},
    {KR_ESTATE, "KR_ESTATE", "invalid state for this call"},
    {KR_EFAULT, "KR_EFAULT", "kernel fault"},
    {KR_ECANCELED, "KR_ECANCELED", "cancelled"},
    {KR_EUNSOUND, "KR_EUNSOUND", "the problem can be passed without computing it"},
};

const char *kr_strerror(int code)
{
    for (size_t i = 0; i < sizeof status_table / sizeof status_table[0]; i++)
        if (status_table[i].code == code)
            return status_table[i].text;
    return "unknown status code";
}

const char *kr_status_name(int code)
{
    for (size_t i = 0; i < sizeof status_table / sizeof status_table[0]; i++)
        if (status_table[i].code == code)
            return status_table[i].name;
    return "KR_UNKNOWN";
}

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
