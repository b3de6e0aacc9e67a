/* Running NVRTC on one source: options, the in-memory headers, the flow
 * callback that enforces a time limit, the log (filtered, capped), the
 * image and lowered names. */
#include "compile/compile_impl.h"
#include "compile/log_filter.h"
#include "common/clock.h"
#include "common/strbuf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The first line of the log that reports an error, for the short message. */
static void first_error(const char *log, char *out, size_t size)
{
    const char *line = log;
    while (line && *line) {
        const char *end = strchr(line, '\n');
        size_t n = end ? (size_t)(end - line) : strlen(line);
        const char *hit = strstr(line, "error");
        if (hit && hit < line + n) {
            snprintf(out, size, "%.*s", (int)n, line);
            return;
        }
        line = end ? end + 1 : NULL;
    }
    snprintf(out, size, "see the compile log");
}

static int count_errors(const char *log)
{
    int n = 0;
    for (const char *p = log; (p = strstr(p, "error")) != NULL; p += 5)
        if (p > log && p[-1] == ' ' && p[5] == ':')
            n++;
    return n;
}

typedef struct {
    double deadline;
} flow_payload;

static int flow_callback(void *payload, void *reserved)
{
    (void)reserved;
    return kr__now() > ((const flow_payload *)payload)->deadline;
}

static int nvrtc_fail(kr_context *ctx, const kr__nvrtc_api *nv, nvrtcResult r, const char *what)
{
    return kr__fail(ctx, r == NVRTC_ERROR_OUT_OF_MEMORY ? KR_ENOMEM : KR_EUNAVAILABLE,
                    "%s failed: %s", what, nv->nvrtcGetErrorString(r));
}

/* The program's log: diagnostics in files the candidate did not write
 * withheld (log_filter.c), then cut at max bytes (a flood of warnings or
 * `#pragma message` lines must not become megabytes in every report). */
static char *program_log(const kr__nvrtc_api *nv, nvrtcProgram p, const char *name, uint64_t max)
{
    size_t n = 0;
    if (nv->nvrtcGetProgramLogSize(p, &n) != NVRTC_SUCCESS)
        return kr__strdup("");
    char *raw = malloc(n + 1);
    if (!raw)
        return NULL;
    raw[0] = '\0';
    nv->nvrtcGetProgramLog(p, raw);
    raw[n] = '\0';
    char *log = kr__log_filter(raw, name, NULL);
    free(raw);
    if (!log)
        return NULL;
    size_t len = strlen(log);
    if (len <= max)
        return log;
    kr__buf cut = KR__BUF_INIT;
    kr__buf_append(&cut, log, (size_t)max);
    kr__buf_printf(&cut, "\n[compile log cut: %zu of %zu bytes shown]\n", (size_t)max, len);
    free(log);
    return kr__buf_take(&cut);
}

/* Copies the image and lowered names out of a compiled NVRTC program. */
static int collect_outputs(kr_context *ctx, const kr__nvrtc_api *nv, nvrtcProgram p,
                           const kr_compile_options *o, int want_cubin, kr_program *prog)
{
    size_t n = 0;
    nvrtcResult r = want_cubin ? nv->nvrtcGetCUBINSize(p, &n) : nv->nvrtcGetPTXSize(p, &n);
    if (r != NVRTC_SUCCESS)
        return nvrtc_fail(ctx, nv, r, want_cubin ? "nvrtcGetCUBINSize" : "nvrtcGetPTXSize");
    if (!(prog->image = malloc(n + 1)))
        return kr__fail(ctx, KR_ENOMEM, "out of memory");
    r = want_cubin ? nv->nvrtcGetCUBIN(p, (char *)prog->image) : nv->nvrtcGetPTX(p, (char *)prog->image);
    if (r != NVRTC_SUCCESS)
        return nvrtc_fail(ctx, nv, r, "reading the compiled image");
    prog->image[n] = '\0';
    prog->image_len = want_cubin ? n : strlen((char *)prog->image);
    prog->kind = want_cubin ? KR_BINARY_CUBIN : KR_BINARY_PTX;
    /* beside a CUBIN, the PTX it was made from (NVRTC keeps both): the code
     * as compiled, for its size and for comparing kernels; none is no error */
    size_t ptx_n = 0;
    if (want_cubin && nv->nvrtcGetPTXSize(p, &ptx_n) == NVRTC_SUCCESS && ptx_n > 1 &&
        (prog->ptx = malloc(ptx_n + 1)) != NULL) {
        if (nv->nvrtcGetPTX(p, prog->ptx) == NVRTC_SUCCESS) {
            prog->ptx[ptx_n] = '\0';
            prog->ptx_len = strlen(prog->ptx);
        } else {
            free(prog->ptx);
            prog->ptx = NULL;
        }
    }
    size_t k = o->num_name_expressions;
    prog->lowered_expr = calloc(k ? k : 1, sizeof *prog->lowered_expr);
    prog->lowered_name = calloc(k ? k : 1, sizeof *prog->lowered_name);
    if (!prog->lowered_expr || !prog->lowered_name)
        return kr__fail(ctx, KR_ENOMEM, "out of memory");
    for (size_t i = 0; i < k; i++) {
        const char *lowered = NULL;
        r = nv->nvrtcGetLoweredName(p, o->name_expressions[i], &lowered);
        if (r != NVRTC_SUCCESS)
            return kr__fail(ctx, KR_ECOMPILE, "name expression '%s' has no lowered name: %s",
                            o->name_expressions[i], nv->nvrtcGetErrorString(r));
        prog->lowered_expr[i] = kr__strdup(o->name_expressions[i]);
        prog->lowered_name[i] = kr__strdup(lowered);
        prog->num_lowered++;
        if (!prog->lowered_expr[i] || !prog->lowered_name[i])
            return kr__fail(ctx, KR_ENOMEM, "out of memory");
    }
    return KR_OK;
}

int kr__nvrtc_run(kr_context *ctx, const kr__nvrtc_api *nv, const kr__includes *inc,
                  const char *name, const optlist *l, const kr_compile_options *o, int want_cubin,
                  kr_program *prog)
{
    nvrtcProgram p = NULL;
    nvrtcResult r = nv->nvrtcCreateProgram(&p, inc->source, name, (int)inc->num_headers,
                                           inc->texts, inc->names);
    if (r != NVRTC_SUCCESS)
        return nvrtc_fail(ctx, nv, r, "nvrtcCreateProgram");
    int rc = KR_OK;
    for (size_t i = 0; i < o->num_name_expressions && rc == KR_OK; i++) {
        if (!o->name_expressions[i] || !*o->name_expressions[i])
            rc = kr__fail(ctx, KR_EINVAL, "name expression %zu is empty", i);
        else if ((r = nv->nvrtcAddNameExpression(p, o->name_expressions[i])) != NVRTC_SUCCESS)
            rc = nvrtc_fail(ctx, nv, r, "nvrtcAddNameExpression");
    }
    flow_payload flow = {kr__now() + o->time_limit_s};
    int can_cancel = o->time_limit_s > 0 && nv->nvrtcSetFlowCallback &&
                     nv->nvrtcSetFlowCallback(p, flow_callback, &flow) == NVRTC_SUCCESS;
    double t0 = kr__now();
    if (rc == KR_OK)
        r = nv->nvrtcCompileProgram(p, (int)l->count, (const char *const *)l->items);
    prog->compile_seconds = kr__now() - t0;
    uint64_t max_log = o->max_log_bytes ? o->max_log_bytes : KR__DEFAULT_MAX_LOG;
    if (rc == KR_OK && !(prog->log = program_log(nv, p, name, max_log)))
        rc = kr__fail(ctx, KR_ENOMEM, "out of memory");
    if (rc != KR_OK) {
        /* nothing more to do */
    } else if (r == NVRTC_ERROR_COMPILATION) {
        char first[512];
        first_error(prog->log, first, sizeof first);
        int errors = count_errors(prog->log);
        rc = kr__fail_detail(ctx, KR_ECOMPILE, prog->log, "%s: compilation failed (%d error%s); %s",
                             name, errors, errors == 1 ? "" : "s", first);
    } else if (r == NVRTC_ERROR_CANCELLED) {
        rc = kr__fail_detail(ctx, KR_ETIMEOUT, prog->log,
                             "%s: compilation cancelled after %.2f s (time limit %.2f s)", name,
                             prog->compile_seconds, o->time_limit_s);
    } else if (r == NVRTC_ERROR_INVALID_OPTION) {
        rc = kr__fail_detail(ctx, KR_EINVAL, prog->log, "NVRTC rejected an option: %s",
                             prog->log[0] ? prog->log : nv->nvrtcGetErrorString(r));
    } else if (r != NVRTC_SUCCESS) {
        rc = kr__fail_detail(ctx, KR_ECOMPILE, prog->log, "%s: nvrtcCompileProgram failed: %s",
                             name, nv->nvrtcGetErrorString(r));
    } else {
        rc = collect_outputs(ctx, nv, p, o, want_cubin, prog);
    }
    if (rc == KR_OK && o->time_limit_s > 0 && !can_cancel && prog->compile_seconds > o->time_limit_s)
        rc = kr__fail(ctx, KR_ETIMEOUT, "%s: compilation took %.2f s, over the %.2f s limit (this "
                      "NVRTC cannot cancel early)", name, prog->compile_seconds, o->time_limit_s);
    nv->nvrtcDestroyProgram(&p);
    return rc;
}

