/* kr_compile: CUDA C++ source to a program through NVRTC, with the cache,
 * under the include policy (docs/compile-safety.md). */
#include "common/cache.h"
#include "common/options.h"
#include "compile/compile_impl.h"
#include "compile/include_policy.h"
#include "compile/shims.h"
#include "common/clock.h"
#include "common/strbuf.h"
#include "version_gen.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULT_MAX_SOURCE ((uint64_t)1 << 20)
/* time_limit_s 0: a compile is cancelled after this long (NVRTC's flow
 * callback stops it at coarse points only: the hard limit is the worker
 * process's). Negative or infinite: no limit. */
#define DEFAULT_TIME_LIMIT_S 30.0

static const kr_compile_options compile_defaults = KR_COMPILE_OPTIONS_INIT;
static const size_t compile_sizes[] = {0, KR__UPTO(kr_compile_options, flags),
                                       KR__UPTO(kr_compile_options, max_log_bytes)};
static const kr__versioned compile_version = {"kr_compile_options", compile_sizes,
                                              KR_COMPILE_OPTIONS_VERSION, sizeof(kr_compile_options)};

int kr_compile_options_init(kr_compile_options *opts, uint32_t version)
{
    return kr__options_init(&compile_version, opts, &compile_defaults, version);
}

int kr__compile_options_read(kr_context *ctx, kr_compile_options *dst, const kr_compile_options *src)
{
    char why[256];
    if (kr__options_read(&compile_version, dst, &compile_defaults, src, why, sizeof why) != KR_OK)
        return kr__fail(ctx, KR_EVERSION, "%s", why);
    return KR_OK;
}

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

/* The language mode the source is lexed in: the last --std wins, as the
 * include policy must read the text the way NVRTC will. */
static int language_mode(kr_context *ctx, const kr_compile_options *o, kr__pp_mode *mode)
{
    const char *std = o->std ? o->std : "c++17";
    for (size_t i = 0; i < o->num_extra_options; i++) {
        const char *x = o->extra_options[i];
        if (x && strncmp(x, "--std=", 6) == 0)
            std = x + 6;
        else if (x && strncmp(x, "-std=", 5) == 0)
            std = x + 5;
        else if (x && (!strcmp(x, "--std") || !strcmp(x, "-std")) && i + 1 < o->num_extra_options &&
                 o->extra_options[i + 1])
            std = o->extra_options[i + 1];
    }
    if (kr__pp_mode_of_std(std, mode) != 0)
        return kr__fail(ctx, KR_EINVAL, "unknown language standard '%s' (NVRTC knows c++03, "
                        "c++11, c++14, c++17 and c++20)", std);
    return KR_OK;
}

/* Options that would let NVRTC read headers from disk itself, past the
 * include policy: include_dirs is the way to add a directory. */
static int check_extra_options(kr_context *ctx, const kr_compile_options *o)
{
    static const char *const refused[] = {"-I", "--include-path", "-include", "--pre-include",
                                          "-isystem"};
    for (size_t i = 0; i < o->num_extra_options; i++) {
        const char *x = o->extra_options[i];
        if (!x)
            return kr__fail(ctx, KR_EINVAL, "extra option %zu is NULL", i);
        for (size_t k = 0; k < sizeof refused / sizeof refused[0]; k++)
            if (strncmp(x, refused[k], strlen(refused[k])) == 0)
                return kr__fail(ctx, KR_EINVAL,
                                "extra option '%s' is refused: NVRTC would read headers from disk "
                                "past the include policy; pass directories in include_dirs", x);
    }
    return KR_OK;
}

static int build_options(kr_context *ctx, const kr_compile_options *o, const char *arch,
                         optlist *l)
{
    const char *std = o->std ? o->std : "c++17";
    /* no -I: every header comes in memory (include_policy.c); and not the
     * working directory either */
    int bad = optlist_add(l, "--gpu-architecture=%s", arch) ||
              optlist_add(l, "--std=%s", std) ||
              optlist_add(l, "%s", "--no-source-include");
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
                             char *const *dirs, const kr_compile_options *o, const char *name,
                             const char *src, size_t len)
{
    kr__hasher h;
    kr__hash128 zero = {0, 0};
    if (kr__hasher_init(&h) != 0)
        return zero;
    /* 2: the include policy (in-memory headers, the shims); 3: the PTX kept
     * beside a CUBIN */
    kr__hasher_str(&h, "kreward-compile/3");
    uint64_t shims_lo, shims_hi;
    kr__shims_digest(&shims_lo, &shims_hi);
    kr__hasher_u64(&h, shims_lo);
    kr__hasher_u64(&h, shims_hi);
    for (char *const *d = dirs; *d; d++)
        kr__hasher_str(&h, *d);
    kr__hasher_str(&h, "");
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

static int validate_source(kr_context *ctx, const char *src, size_t len, const char *name,
                           uint64_t max)
{
    /* a model that answered nothing wrote a candidate that does not compile:
     * a compile error (a verdict), not a caller's mistake */
    if (len == 0)
        return kr__fail(ctx, KR_ECOMPILE, "%s: empty source: there is no code to compile", name);
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
    free(prog->ptx);
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

static int compile(kr_program **out, kr_context *ctx, const char *source, size_t len,
                   const kr_compile_options *opts, int load)
{
    if (!ctx || !out)
        return KR_EINVAL;
    *out = NULL;
    kr__clear_error(ctx);
    kr_compile_options o;
    int rc = kr__compile_options_read(ctx, &o, opts);
    if (rc != KR_OK)
        return rc;
    const char *name = o.name ? o.name : "candidate.cu";
    if (!source)
        return kr__fail(ctx, KR_EINVAL, "%s: source is NULL", name);
    if (len == 0)
        len = strlen(source);
    rc = validate_source(ctx, source, len, name,
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
    kr__pp_mode mode;
    if ((rc = language_mode(ctx, &o, &mode)) != KR_OK ||
        (rc = check_extra_options(ctx, &o)) != KR_OK)
        return rc;
    uint64_t max_log = o.max_log_bytes ? o.max_log_bytes : KR__DEFAULT_MAX_LOG;
    if (o.time_limit_s == 0 || isnan(o.time_limit_s))
        o.time_limit_s = DEFAULT_TIME_LIMIT_S;
    else if (o.time_limit_s < 0 || isinf(o.time_limit_s))
        o.time_limit_s = 0; /* none */

    optlist l = {NULL, 0};
    kr__buf notes = KR__BUF_INIT;
    char **dirs = NULL;
    kr__pp_scan scan = {0};
    kr__includes inc = {0};
    char *src = kr__strndup(source, len); /* NVRTC wants a C string */
    kr_program *prog = kr__program_alloc(ctx);
    if (!src || !prog) {
        rc = kr__fail(ctx, KR_ENOMEM, "out of memory");
        goto out;
    }
    if ((rc = kr__include_dirs(ctx, &dirs, o.include_dirs, o.num_include_dirs)) != KR_OK)
        goto out;
    /* the candidate's own text is checked before anything else, cached or not */
    if (kr__pp_scan_text(&scan, src, len, mode) != 0) {
        rc = kr__fail(ctx, KR_ENOMEM, "out of memory");
        goto out;
    }
    if ((rc = kr__include_check(ctx, name, src, len, &scan, max_log)) != KR_OK)
        goto out;
    if ((rc = build_options(ctx, &o, arch, &l)) != KR_OK)
        goto out;
    kr__hash128 key = cache_key(nv, arch, &l, dirs, &o, name, src, len);
    kr__hash128_hex(key, prog->hash);
    int use_cache = !(o.flags & KR_COMPILE_NO_CACHE);
    prog->cache_result = use_cache ? cache_lookup(ctx, key, prog, &notes) : KR_CACHE_SKIPPED;
    if (prog->cache_result == KR_CACHE_MISS || prog->cache_result == KR_CACHE_SKIPPED) {
        reset_program(prog);
        prog->cache_result = use_cache ? KR_CACHE_MISS : KR_CACHE_SKIPPED;
        kr__hash128_hex(key, prog->hash);
        kr__strlcpy(prog->arch, arch, sizeof prog->arch);
        if ((rc = kr__include_resolve(ctx, &inc, src, len, name, &scan, mode, dirs, max_log)) !=
                KR_OK ||
            (rc = kr__nvrtc_run(ctx, nv, &inc, name, &l, &o, want_cubin, prog)) != KR_OK)
            goto out;
        if (use_cache)
            cache_store(ctx, key, prog, &notes);
    }
    if (prepend_notes(prog, &notes) != 0) {
        rc = kr__fail(ctx, KR_ENOMEM, "out of memory");
        goto out;
    }
    rc = load ? kr__program_finish(prog) : kr__program_finish_unloaded(prog);
out:
    if (rc == KR_OK) {
        *out = prog;
        prog = NULL;
    }
    kr_program_free(prog);
    kr__buf_free(&notes);
    optlist_free(&l);
    kr__includes_free(&inc);
    kr__pp_scan_free(&scan);
    kr__include_dirs_free(dirs);
    free(src);
    return rc;
}

int kr_compile(kr_program **out, kr_context *ctx, const char *source, size_t len,
               const kr_compile_options *opts)
{
    return compile(out, ctx, source, len, opts, 1);
}

int kr__compile_image(kr_program **out, kr_context *ctx, const char *source, size_t len,
                      const kr_compile_options *opts)
{
    return compile(out, ctx, source, len, opts, 0);
}
