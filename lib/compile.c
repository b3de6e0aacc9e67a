/* kr_compile: CUDA C++ source to a program through NVRTC, with the cache. */
#include "cache.h"
#include "clock.h"
#include "context_impl.h"
#include "nvrtc_api.h"
#include "program_impl.h"
#include "strbuf.h"
#include "version_gen.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULT_MAX_SOURCE ((uint64_t)1 << 20)

int kr_compile_options_init(kr_compile_options *opts, uint32_t version)
{
    if (!opts)
        return KR_EINVAL;
    if (version != KR_COMPILE_OPTIONS_VERSION)
        return KR_EVERSION;
    kr_compile_options defaults = KR_COMPILE_OPTIONS_INIT;
    *opts = defaults;
    return KR_OK;
}

/* The NVRTC option list, owned strings. */
typedef struct {
    char **items;
    size_t count;
} optlist;

static int optlist_add(optlist *l, const char *fmt, const char *value)
{
    char **grown = realloc(l->items, (l->count + 1) * sizeof *grown);
    if (!grown)
        return -1;
    l->items = grown;
    kr__buf b = KR__BUF_INIT;
    kr__buf_printf(&b, fmt, value);
    if (!(l->items[l->count] = kr__buf_take(&b)))
        return -1;
    l->count++;
    return 0;
}

static void optlist_free(optlist *l)
{
    for (size_t i = 0; i < l->count; i++)
        free(l->items[i]);
    free(l->items);
}

static int valid_identifier(const char *s, size_t n)
{
    if (n == 0 || !(isalpha((unsigned char)s[0]) || s[0] == '_'))
        return 0;
    for (size_t i = 1; i < n; i++)
        if (!(isalnum((unsigned char)s[i]) || s[i] == '_'))
            return 0;
    return 1;
}

/* "sm_90a" -> 90 when NVRTC knows it; -1 otherwise. */
static int check_arch(const kr__nvrtc_api *nv, const char *arch)
{
    const char *digits;
    if (strncmp(arch, "sm_", 3) == 0)
        digits = arch + 3;
    else if (strncmp(arch, "compute_", 8) == 0)
        digits = arch + 8;
    else
        return -1;
    char *end;
    long num = strtol(digits, &end, 10);
    if (end == digits || (*end && !((*end == 'a' || *end == 'f') && end[1] == '\0')))
        return -1;
    for (int i = 0; i < nv->num_archs; i++)
        if (nv->archs[i] == num)
            return (int)num;
    return nv->num_archs == 0 ? (int)num : -1;
}

static int arch_error(kr_context *ctx, const kr__nvrtc_api *nv, const char *arch)
{
    kr__buf b = KR__BUF_INIT;
    for (int i = 0; i < nv->num_archs; i++)
        kr__buf_printf(&b, "%ssm_%d", i ? " " : "", nv->archs[i]);
    int rc = kr__fail(ctx, KR_EINVAL,
                      "unknown target architecture '%s'; NVRTC %d.%d supports %s (add 'a' for "
                      "arch-specific features, e.g. sm_90a; compute_XX for PTX)",
                      arch, nv->major, nv->minor, b.data ? b.data : "none");
    kr__buf_free(&b);
    return rc;
}

static int build_options(kr_context *ctx, const kr_compile_options *o, const char *arch,
                         optlist *l)
{
    const char *std = o->std ? o->std : "c++17";
    int bad = optlist_add(l, "--gpu-architecture=%s", arch) ||
              optlist_add(l, "--std=%s", std) ||
              optlist_add(l, "-I%s/include", ctx->cuda_home) ||
              optlist_add(l, "-I%s/include/cccl", ctx->cuda_home);
    for (size_t i = 0; !bad && i < o->num_include_dirs; i++)
        bad = optlist_add(l, "-I%s", o->include_dirs[i]);
    for (size_t i = 0; !bad && i < o->num_defines; i++) {
        const char *d = o->defines[i];
        const char *eq = d ? strchr(d, '=') : NULL;
        if (!d || !valid_identifier(d, eq ? (size_t)(eq - d) : strlen(d)))
            return kr__fail(ctx, KR_EINVAL, "define %zu ('%s') is not NAME or NAME=VALUE", i,
                            d ? d : "(null)");
        bad = optlist_add(l, "-D%s", d);
    }
    if (!bad && o->fast_math)
        bad = optlist_add(l, "%s", "--use_fast_math");
    if (!bad && o->line_info)
        bad = optlist_add(l, "%s", "-lineinfo");
    for (size_t i = 0; !bad && i < o->num_extra_options; i++)
        bad = optlist_add(l, "%s", o->extra_options[i]);
    return bad ? kr__fail(ctx, KR_ENOMEM, "out of memory") : KR_OK;
}

static kr__hash128 cache_key(const kr__nvrtc_api *nv, const char *arch, const optlist *l,
                             const kr_compile_options *o, const char *name, const char *src,
                             size_t len)
{
    kr__hasher h;
    kr__hash128 zero = {0, 0};
    if (kr__hasher_init(&h) != 0)
        return zero;
    kr__hasher_str(&h, "kreward-compile/1");
    kr__hasher_str(&h, KR_VERSION_STRING);
    kr__hasher_u64(&h, (uint64_t)nv->major * 1000 + (uint64_t)nv->minor);
    kr__hasher_str(&h, arch);
    kr__hasher_u64(&h, l->count);
    for (size_t i = 0; i < l->count; i++)
        kr__hasher_str(&h, l->items[i]);
    kr__hasher_u64(&h, o->num_name_expressions);
    for (size_t i = 0; i < o->num_name_expressions; i++)
        kr__hasher_str(&h, o->name_expressions[i]);
    kr__hasher_str(&h, name);
    kr__hasher_field(&h, src, len);
    return kr__hasher_final(&h);
}

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

static char *program_log(const kr__nvrtc_api *nv, nvrtcProgram p)
{
    size_t n = 0;
    if (nv->nvrtcGetProgramLogSize(p, &n) != NVRTC_SUCCESS)
        return kr__strdup("");
    char *log = malloc(n + 1);
    if (!log)
        return NULL;
    log[0] = '\0';
    nv->nvrtcGetProgramLog(p, log);
    log[n] = '\0';
    return log;
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

static int run_nvrtc(kr_context *ctx, const kr__nvrtc_api *nv, const char *src, const char *name,
                     const optlist *l, const kr_compile_options *o, int want_cubin,
                     kr_program *prog)
{
    nvrtcProgram p = NULL;
    nvrtcResult r = nv->nvrtcCreateProgram(&p, src, name, 0, NULL, NULL);
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
    if (rc == KR_OK && !(prog->log = program_log(nv, p)))
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

static int validate_source(kr_context *ctx, const char *src, size_t len, const char *name,
                           uint64_t max)
{
    if (len == 0)
        return kr__fail(ctx, KR_EINVAL, "%s: empty source", name);
    if (len > max)
        return kr__fail(ctx, KR_ETOOBIG, "%s: source is %zu bytes, over the limit of %llu", name,
                        len, (unsigned long long)max);
    const char *nul = memchr(src, '\0', len);
    if (nul)
        return kr__fail(ctx, KR_EPARSE,
                        "%s: byte %zu is NUL: this is binary data, not CUDA source (use "
                        "kr_program_from_binary for a CUBIN or PTX)", name, (size_t)(nul - src));
    return KR_OK;
}

static void reset_program(kr_program *prog)
{
    kr_context *ctx = prog->ctx;
    free(prog->image);
    free(prog->log);
    for (size_t i = 0; i < prog->num_lowered; i++) {
        free(prog->lowered_expr[i]);
        free(prog->lowered_name[i]);
    }
    free(prog->lowered_expr);
    free(prog->lowered_name);
    memset(prog, 0, sizeof *prog);
    prog->ctx = ctx;
}

/* Looks the key up in memory, then on disk. Returns the cache result and
 * fills prog on a hit. */
static int cache_lookup(kr_context *ctx, kr__hash128 key, kr_program *prog, kr__buf *notes)
{
    void *blob = NULL;
    size_t len = 0;
    if (ctx->cache && kr__mem_cache_get(ctx->cache, key, &blob, &len) == 1) {
        int ok = kr__program_from_blob(prog, blob, len) == 0;
        free(blob);
        if (ok)
            return KR_CACHE_MEMORY;
        reset_program(prog);
    }
    if (ctx->cache_dir) {
        char why[600] = "";
        int d = kr__disk_cache_get(ctx->cache_dir, key, &blob, &len, why, sizeof why);
        if (d == KR__DISK_HIT && kr__program_from_blob(prog, blob, len) == 0) {
            if (ctx->cache)
                kr__mem_cache_put(ctx->cache, key, blob, len);
            free(blob);
            return KR_CACHE_DISK;
        }
        if (d == KR__DISK_HIT)
            snprintf(why, sizeof why, "entry for %016llx%016llx does not decode",
                     (unsigned long long)key.hi, (unsigned long long)key.lo);
        free(blob);
        if (d != KR__DISK_MISS)
            kr__buf_printf(notes, "libkreward: disk cache entry ignored and rewritten (%s)\n", why);
    }
    return KR_CACHE_MISS;
}

static void cache_store(kr_context *ctx, kr__hash128 key, const kr_program *prog, kr__buf *notes)
{
    void *blob;
    size_t len;
    if ((!ctx->cache && !ctx->cache_dir) || kr__program_to_blob(prog, &blob, &len) != 0)
        return;
    if (ctx->cache)
        kr__mem_cache_put(ctx->cache, key, blob, len);
    char why[600];
    if (ctx->cache_dir && kr__disk_cache_put(ctx->cache_dir, key, blob, len, why, sizeof why) != 0)
        kr__buf_printf(notes, "libkreward: could not write the disk cache: %s\n", why);
    free(blob);
}

static int prepend_notes(kr_program *prog, kr__buf *notes)
{
    if (!notes->len)
        return 0;
    kr__buf_puts(notes, prog->log ? prog->log : "");
    char *log = kr__buf_take(notes);
    if (!log)
        return -1;
    free(prog->log);
    prog->log = log;
    return 0;
}

int kr_compile(kr_context *ctx, kr_program **out, const char *source, size_t len,
               const kr_compile_options *opts)
{
    if (!ctx || !out)
        return KR_EINVAL;
    *out = NULL;
    kr__clear_error(ctx);
    kr_compile_options o = KR_COMPILE_OPTIONS_INIT;
    if (opts) {
        if (opts->version == 0 || opts->version > KR_COMPILE_OPTIONS_VERSION)
            return kr__fail(ctx, KR_EVERSION, "kr_compile_options version %u is newer than this "
                            "library (%u)", opts->version, KR_COMPILE_OPTIONS_VERSION);
        o = *opts;
    }
    const char *name = o.name ? o.name : "candidate.cu";
    if (!source)
        return kr__fail(ctx, KR_EINVAL, "%s: source is NULL", name);
    if (len == 0)
        len = strlen(source);
    int rc = validate_source(ctx, source, len, name,
                             o.max_source_bytes ? o.max_source_bytes : DEFAULT_MAX_SOURCE);
    if (rc != KR_OK)
        return rc;
    const kr__nvrtc_api *nv = kr__nvrtc(ctx->cuda_home);
    if (!nv->loaded)
        return kr__fail(ctx, KR_EUNAVAILABLE, "NVRTC is not available: %s", nv->why);
    const char *arch = o.arch ? o.arch : ctx->arch;
    if (check_arch(nv, arch) < 0)
        return arch_error(ctx, nv, arch);
    int want_cubin = strncmp(arch, "sm_", 3) == 0;

    optlist l = {NULL, 0};
    kr__buf notes = KR__BUF_INIT;
    char *src = kr__strndup(source, len); /* NVRTC wants a C string */
    kr_program *prog = kr__program_alloc(ctx);
    if (!src || !prog) {
        rc = kr__fail(ctx, KR_ENOMEM, "out of memory");
        goto out;
    }
    if ((rc = build_options(ctx, &o, arch, &l)) != KR_OK)
        goto out;
    kr__hash128 key = cache_key(nv, arch, &l, &o, name, src, len);
    kr__hash128_hex(key, prog->hash);
    int use_cache = !(o.flags & KR_COMPILE_NO_CACHE);
    prog->cache_result = use_cache ? cache_lookup(ctx, key, prog, &notes) : KR_CACHE_SKIPPED;
    if (prog->cache_result == KR_CACHE_MISS || prog->cache_result == KR_CACHE_SKIPPED) {
        reset_program(prog);
        prog->cache_result = use_cache ? KR_CACHE_MISS : KR_CACHE_SKIPPED;
        kr__hash128_hex(key, prog->hash);
        kr__strlcpy(prog->arch, arch, sizeof prog->arch);
        if ((rc = run_nvrtc(ctx, nv, src, name, &l, &o, want_cubin, prog)) != KR_OK)
            goto out;
        if (use_cache)
            cache_store(ctx, key, prog, &notes);
    }
    if (prepend_notes(prog, &notes) != 0) {
        rc = kr__fail(ctx, KR_ENOMEM, "out of memory");
        goto out;
    }
    rc = kr__program_finish(prog);
out:
    if (rc == KR_OK) {
        *out = prog;
        prog = NULL;
    }
    kr_program_free(prog);
    kr__buf_free(&notes);
    optlist_free(&l);
    free(src);
    return rc;
}
