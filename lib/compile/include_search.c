/* Finding one header for the include policy (include_policy.c): the search
 * through the allowed places, each file opened once, read through a
 * descriptor whose real path is checked to lie inside its root, and kept in
 * the resolver's table under the name NVRTC will know it by; and the lines
 * of the policy log. */
#include "compile/include_impl.h"
#include "compile/name_map.h"
#include "compile/shims.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_FILES 4096
#define MAX_FILE_BYTES ((size_t)8 << 20)
#define MAX_TOTAL_BYTES ((size_t)96 << 20)

/* One line of the policy log, in NVRTC's format. */
void kr__include_note(resolver *R, long file, unsigned line, const char *fmt, ...)
{
    const hfile *f = &R->files[file];
    kr__buf_printf(&R->log, "%s(%u): error: include policy: ",
                   f->from == FROM_CANDIDATE ? R->cand_name : f->key, line);
    va_list ap;
    va_start(ap, fmt);
    kr__buf_vprintf(&R->log, fmt, ap);
    va_end(ap);
    if (f->from >= 0)
        kr__buf_printf(&R->log, " [in a header of include directory %d]", f->from);
    kr__buf_puts(&R->log, "\n");
    R->errors++;
}

/* dir + "/" + name with "." and ".." resolved textually; R_ESCAPE when
 * ".." climbs above root (dir lies inside root). */
static long join_inside(const char *root, const char *dir, const char *name, char *out, size_t size)
{
    int w = snprintf(out, size, "%s/%s", dir, name);
    if (w < 0 || (size_t)w >= size)
        return R_CHARS;
    size_t rootlen = strlen(root);
    if (strncmp(dir, root, rootlen) != 0 || (dir[rootlen] != '/' && dir[rootlen] != '\0'))
        return R_ESCAPE; /* dir must lie in root */
    /* normalise in place, never above root */
    char *seg[PATH_MAX / 2];
    size_t nseg = 0;
    char tmp[PATH_MAX];
    snprintf(tmp, sizeof tmp, "%s", out + rootlen);
    for (char *save = NULL, *s = strtok_r(tmp, "/", &save); s; s = strtok_r(NULL, "/", &save)) {
        if (strcmp(s, ".") == 0)
            continue;
        if (strcmp(s, "..") == 0) {
            if (nseg == 0)
                return R_ESCAPE;
            nseg--;
            continue;
        }
        seg[nseg++] = s;
    }
    size_t k = (size_t)snprintf(out, size, "%s", root);
    for (size_t i = 0; i < nseg && k < size; i++)
        k += (size_t)snprintf(out + k, size - k, "/%s", seg[i]);
    return k < size ? 0 : R_CHARS;
}

int kr__include_inside(const char *real, const char *root)
{
    size_t n = strlen(root);
    return root[0] && strncmp(real, root, n) == 0 && (real[n] == '/' || (n == 1 && root[0] == '/'));
}

long kr__include_add_file(resolver *R, int from, const char *real, const char *key,
                          const char *text, size_t len, char *owned)
{
    if (R->nfiles == MAX_FILES) {
        free(owned);
        return R_LIMIT;
    }
    if (R->nfiles == R->capfiles) {
        size_t cap = R->capfiles ? R->capfiles * 2 : 32;
        hfile *grown = realloc(R->files, cap * sizeof *grown);
        if (!grown) {
            free(owned);
            return R_OOM;
        }
        R->files = grown;
        R->capfiles = cap;
    }
    hfile *f = &R->files[R->nfiles];
    memset(f, 0, sizeof *f);
    f->from = from;
    f->text = text;
    f->len = len;
    f->owned = owned;
    f->real = kr__strdup(real);
    /* the key: the path below its root; made unique when two files share it */
    kr__buf k = KR__BUF_INIT;
    kr__buf_puts(&k, key);
    long other;
    for (int n = 2; kr__name_map_get(&R->by_key, k.data, k.len, &other); n++) {
        k.len = 0;
        if (from >= 0)
            kr__buf_printf(&k, "include-dir-%d/%s", from, key);
        else
            kr__buf_printf(&k, "%s/%s", from == FROM_TOOLKIT ? "cuda-toolkit" : "kreward", key);
        if (n > 2)
            kr__buf_printf(&k, "~%d", n);
    }
    f->key = kr__buf_take(&k);
    long idx = (long)R->nfiles++;
    if (!f->real || !f->key || kr__name_map_put(&R->by_key, f->key, strlen(f->key), idx) != 0 ||
        (real[0] && kr__name_map_put(&R->by_real, real, strlen(real), idx) != 0))
        return R_OOM;
    return idx;
}

/* Opens path (inside root), checks what it really is and where it really
 * lies, and adds it. R_MISSING when there is no such file. */
static long open_header(resolver *R, const char *path, const char *root, int from)
{
    struct stat st;
    if (stat(path, &st) != 0 || S_ISDIR(st.st_mode))
        return R_MISSING;
    if (!S_ISREG(st.st_mode))
        return R_NOTREG;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd < 0)
        return errno == ENOENT ? R_MISSING : R_UNREADABLE;
    long rc = R_UNREADABLE;
    char *text = NULL;
    char real[PATH_MAX], proc[64];
    snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
    ssize_t rl = readlink(proc, real, sizeof real - 1);
    if (rl > 0)
        real[rl] = '\0';
    else if (!realpath(path, real)) /* no /proc: checked by path (racy) */
        goto out;
    if (!kr__include_inside(real, root)) {
        rc = R_OUTSIDE;
        goto out;
    }
    long known;
    if (kr__name_map_get(&R->by_real, real, strlen(real), &known)) {
        rc = known;
        goto out;
    }
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        rc = R_NOTREG;
        goto out;
    }
    if ((size_t)st.st_size > MAX_FILE_BYTES) {
        rc = R_TOOBIG;
        goto out;
    }
    if (R->total + (size_t)st.st_size > MAX_TOTAL_BYTES) {
        rc = R_LIMIT;
        goto out;
    }
    if (!(text = malloc((size_t)st.st_size + 1))) {
        rc = R_OOM;
        goto out;
    }
    size_t got = 0;
    while (got < (size_t)st.st_size) {
        ssize_t n = read(fd, text + got, (size_t)st.st_size - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    text[got] = '\0';
    if (memchr(text, '\0', got)) {
        rc = R_NUL;
        goto out;
    }
    R->total += got;
    const char *key = real + strlen(root) + 1;
    if (from == FROM_TOOLKIT && R->cccl && kr__include_inside(real, R->cccl))
        key = real + strlen(R->cccl) + 1;
    rc = kr__include_add_file(R, from, real, key, text, got, text);
    text = NULL;
out:
    free(text);
    close(fd);
    return rc;
}

static long try_dir(resolver *R, const char *dir, const char *root, int from, const char *name)
{
    char path[PATH_MAX];
    long r = join_inside(root, dir, name, path, sizeof path);
    if (r == R_ESCAPE)
        return R_ESCAPE;
    if (r != 0)
        return R_MISSING;
    return open_header(R, path, root, from);
}

static long try_shim(resolver *R, const char *name)
{
    long s = kr__shim_find(name);
    if (s < 0)
        return R_MISSING;
    char real[KR__MAX_INCLUDE_NAME + 16];
    snprintf(real, sizeof real, "shim:%s", name);
    long known;
    if (kr__name_map_get(&R->by_real, real, strlen(real), &known))
        return known;
    const char *text;
    size_t len;
    kr__shim_at((size_t)s, &text, &len);
    return kr__include_add_file(R, FROM_SHIM, real, name, text, len, NULL);
}

/* The root a toolkit file must lie in: <cuda_home>/include, or
 * include/cccl itself where that is a link to elsewhere. */
static const char *toolkit_root(const resolver *R, const char *real)
{
    int elsewhere = R->cccl && !kr__include_inside(R->cccl, R->toolkit);
    if (elsewhere && (kr__include_inside(real, R->cccl) || strcmp(real, R->cccl) == 0))
        return R->cccl;
    return R->toolkit;
}

static long try_toolkit(resolver *R, const char *name, int escape_refused)
{
    long r = R_MISSING;
    if (R->toolkit) {
        r = try_dir(R, R->toolkit, R->toolkit, FROM_TOOLKIT, name);
        if (r == R_MISSING && R->cccl)
            r = try_dir(R, R->cccl, toolkit_root(R, R->cccl), FROM_TOOLKIT, name);
    }
    return r == R_ESCAPE && !escape_refused ? R_MISSING : r;
}

/* The search: the includer's directory for "..." from a header; then the
 * caller's directories (candidate and their headers), the toolkit's
 * include and include/cccl, the shims. Toolkit headers see only the
 * toolkit, as with NVRTC today; shims see shims, then the toolkit. */
static long search(resolver *R, long from_file, int delim, const char *name)
{
    const hfile *f = &R->files[from_file];
    int from = f->from;
    long r = R_MISSING;
    if (delim == '"' && (from == FROM_TOOLKIT || from >= 0)) {
        char dir[PATH_MAX];
        snprintf(dir, sizeof dir, "%s", f->real);
        char *slash = strrchr(dir, '/');
        if (slash)
            *slash = '\0';
        r = try_dir(R, dir, from >= 0 ? R->dirs[from] : toolkit_root(R, f->real), from, name);
        if (r == R_ESCAPE && from == FROM_TOOLKIT)
            r = R_MISSING;
        if (r != R_MISSING)
            return r;
    }
    /* a caller's header whose name climbs out of a search directory is
     * refused rather than passed over (toolkit headers: a miss) */
    int escape_refused = from >= 0;
    if (from == FROM_SHIM && (r = try_shim(R, name)) != R_MISSING)
        return r;
    if (from == FROM_CANDIDATE || from >= 0) {
        for (int i = 0; R->dirs[i]; i++) {
            r = try_dir(R, R->dirs[i], R->dirs[i], i, name);
            if (r == R_ESCAPE && !escape_refused)
                r = R_MISSING;
            if (r != R_MISSING)
                return r;
        }
    }
    if ((r = try_toolkit(R, name, escape_refused)) != R_MISSING)
        return r;
    if (from != FROM_TOOLKIT && from != FROM_SHIM)
        r = try_shim(R, name);
    return r;
}

/* Resolves one literal name for a file: a file index, R_MISSING, or a
 * violation; memoised (most headers include the same few names). */
long kr__include_resolve_name(resolver *R, long from_file, int delim, const char *name)
{
    const hfile *f = &R->files[from_file];
    long r = kr__include_name_check(name, f->from);
    if (r != 0)
        return r;
    kr__buf key = KR__BUF_INIT;
    kr__buf_printf(&key, "%d%c", f->from, delim);
    if (delim == '"' && f->from != FROM_CANDIDATE && f->from != FROM_SHIM) {
        const char *slash = strrchr(f->real, '/');
        kr__buf_append(&key, f->real, slash ? (size_t)(slash - f->real) : 0);
    }
    kr__buf_append(&key, "", 1);
    kr__buf_puts(&key, name);
    if (key.oom) {
        kr__buf_free(&key);
        return R_OOM;
    }
    long memo;
    if (kr__name_map_get(&R->memo, key.data, key.len, &memo)) {
        kr__buf_free(&key);
        return memo;
    }
    r = search(R, from_file, delim, name);
    if (kr__name_map_put(&R->memo, key.data, key.len, r) != 0)
        r = R_OOM;
    kr__buf_free(&key);
    return r;
}
