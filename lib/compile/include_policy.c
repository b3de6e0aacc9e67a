/* The include policy (docs/compile-safety.md). NVRTC would resolve
 * includes from the host file system, through absolute paths, '..' and the
 * process's working directory; instead every header it may read is resolved
 * here, read through a descriptor whose real path is checked to lie inside
 * an allowed root, and handed to NVRTC in memory, with every literal
 * #include and __has_include rewritten to the in-memory name. NVRTC gets no
 * -I path and -no-source-include, so a name it does not have in memory
 * cannot be found on disk (only an absolute name could, and those are
 * refused before NVRTC runs: include_check.c). */
#include "compile/include_impl.h"
#include "compile/name_map.h"
#include "driver/context_impl.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define MISSING_PREFIX "kreward-missing/" /* a name NVRTC cannot find: no -I */

/* Writes each resolved literal as the in-memory name it resolved to (or a
 * name that cannot be found); the delimiters stay, line splices inside the
 * literal are put back after it so that line numbers do not move. */
static int rewrite(resolver *R, long i)
{
    hfile *f = &R->files[i];
    kr__buf b = KR__BUF_INIT;
    size_t at = 0;
    int changed = 0;
    for (size_t k = 0; k < f->scan.count; k++) {
        const kr__pp_item *it = &f->scan.items[k];
        long t = f->target[k];
        if (t == R_NONE || !it->name || it->span_start < at)
            continue;
        const char *to = t >= 0 ? R->files[t].key : NULL;
        if (to && strcmp(to, it->name) == 0 && !it->span_splices)
            continue;
        kr__buf_append(&b, f->text + at, it->span_start - at);
        kr__buf_printf(&b, "%c%s%s%c", it->delim, to ? "" : MISSING_PREFIX, to ? to : it->name,
                       it->delim == '<' ? '>' : '"');
        for (unsigned s = 0; s < it->span_splices; s++)
            kr__buf_puts(&b, "\\\n");
        at = it->span_end;
        changed = 1;
    }
    if (!changed)
        return 0;
    kr__buf_append(&b, f->text + at, f->len - at);
    return (f->out = kr__buf_take(&b)) ? 0 : -1;
}

static char *real_or_null(const char *path)
{
    char real[PATH_MAX];
    return realpath(path, real) ? kr__strdup(real) : NULL;
}

static void resolver_free(resolver *R)
{
    for (size_t i = 0; i < R->nfiles; i++) {
        hfile *f = &R->files[i];
        free(f->real);
        free(f->key);
        free(f->owned);
        free(f->out);
        free(f->target);
        if (i > 0) /* the candidate's scan belongs to the caller */
            kr__pp_scan_free(&f->scan);
    }
    for (size_t i = 0; i < R->naliases; i++)
        free(R->aliases[i].name);
    free(R->aliases);
    free(R->files);
    free(R->computed);
    free(R->toolkit);
    free(R->cccl);
    kr__name_map_free(&R->by_real);
    kr__name_map_free(&R->by_key);
    kr__name_map_free(&R->memo);
    kr__name_map_free(&R->chain);
    kr__buf_free(&R->log);
}

void kr__includes_free(kr__includes *inc)
{
    if (!inc)
        return;
    resolver *R = inc->priv;
    if (R) {
        resolver_free(R);
        free(R);
    }
    free(inc->names);
    free(inc->texts);
    memset(inc, 0, sizeof *inc);
}

static int hand_over(resolver *R, kr__includes *out)
{
    size_t n = R->nfiles - 1 + R->naliases;
    out->names = calloc(n ? n : 1, sizeof *out->names);
    out->texts = calloc(n ? n : 1, sizeof *out->texts);
    if (!out->names || !out->texts)
        return -1;
    for (size_t i = 1; i < R->nfiles; i++) {
        out->names[out->num_headers] = R->files[i].key;
        out->texts[out->num_headers++] = R->files[i].out ? R->files[i].out : R->files[i].text;
    }
    for (size_t i = 0; i < R->naliases; i++) {
        const hfile *f = &R->files[R->aliases[i].file];
        out->names[out->num_headers] = R->aliases[i].name;
        out->texts[out->num_headers++] = f->out ? f->out : f->text;
    }
    out->source = R->files[0].out ? R->files[0].out : (char *)R->files[0].text;
    return 0;
}

int kr__include_resolve(kr_context *ctx, kr__includes *out, const char *src, size_t len,
                        const char *name, const kr__pp_scan *scan, kr__pp_mode mode,
                        char *const *dirs, uint64_t max_log)
{
    memset(out, 0, sizeof *out);
    resolver *R = calloc(1, sizeof *R);
    if (!R)
        return kr__fail(ctx, KR_ENOMEM, "out of memory");
    out->priv = R;
    R->ctx = ctx;
    R->cand_name = name;
    R->mode = mode;
    R->dirs = dirs;
    char path[PATH_MAX];
    const char *home = ctx->cuda_home ? ctx->cuda_home : "/usr/local/cuda";
    snprintf(path, sizeof path, "%s/include", home);
    R->toolkit = real_or_null(path);
    snprintf(path, sizeof path, "%s/include/cccl", home);
    R->cccl = R->toolkit ? real_or_null(path) : NULL;
    int rc = KR_OK;
    long cand = kr__include_add_file(R, FROM_CANDIDATE, "", name, src, len, NULL);
    if (cand != 0) {
        rc = kr__fail(ctx, KR_ENOMEM, "out of memory");
        goto fail;
    }
    R->files[0].scan = *scan; /* borrowed: not freed here */
    R->files[0].scanned = 1;
    if (!(R->files[0].target = malloc((scan->count ? scan->count : 1) * sizeof(long)))) {
        rc = kr__fail(ctx, KR_ENOMEM, "out of memory");
        goto fail;
    }
    for (size_t k = 0; k < scan->count; k++)
        R->files[0].target[k] = R_NONE;
    if (kr__include_close_over(R) != 0) {
        rc = kr__fail(ctx, KR_ENOMEM, "out of memory");
        goto fail;
    }
    kr__include_check_chain(R);
    if (R->errors) {
        rc = kr__include_refuse(ctx, name, &R->log, R->errors, max_log);
        goto fail;
    }
    for (size_t i = 0; i < R->nfiles; i++)
        if (rewrite(R, (long)i) != 0) {
            rc = kr__fail(ctx, KR_ENOMEM, "out of memory");
            goto fail;
        }
    if (hand_over(R, out) != 0) {
        rc = kr__fail(ctx, KR_ENOMEM, "out of memory");
        goto fail;
    }
    return KR_OK;
fail:
    kr__includes_free(out);
    return rc;
}

int kr__include_dirs(kr_context *ctx, char ***out, const char *const *dirs, size_t count)
{
    *out = NULL;
    char **list = calloc(count + 1, sizeof *list);
    if (!list)
        return kr__fail(ctx, KR_ENOMEM, "out of memory");
    size_t n = 0;
    for (size_t i = 0; i < count; i++) {
        if (!dirs[i] || !dirs[i][0]) {
            kr__include_dirs_free(list);
            return kr__fail(ctx, KR_EINVAL, "include directory %zu is empty", i);
        }
        char real[PATH_MAX];
        struct stat st;
        if (!realpath(dirs[i], real) || stat(real, &st) != 0 || !S_ISDIR(st.st_mode))
            continue; /* as NVRTC: a missing directory is skipped */
        if (strcmp(real, "/") == 0 || kr__include_inside(real, "/proc") ||
            kr__include_inside(real, "/sys") || kr__include_inside(real, "/dev") ||
            !strcmp(real, "/proc") || !strcmp(real, "/sys") || !strcmp(real, "/dev")) {
            kr__include_dirs_free(list);
            return kr__fail(ctx, KR_EINVAL, "include directory '%s' (%s) is refused: it would let "
                            "a candidate include any file of it", dirs[i], real);
        }
        if (!(list[n++] = kr__strdup(real))) {
            kr__include_dirs_free(list);
            return kr__fail(ctx, KR_ENOMEM, "out of memory");
        }
    }
    *out = list;
    return KR_OK;
}

void kr__include_dirs_free(char **dirs)
{
    if (!dirs)
        return;
    for (char **d = dirs; *d; d++)
        free(*d);
    free(dirs);
}
