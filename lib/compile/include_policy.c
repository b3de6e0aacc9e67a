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
#include "compile/shims.h"
#include "driver/context_impl.h"

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
#define MAX_EXPANSIONS 64
#define MISSING_PREFIX "kreward-missing/" /* a name NVRTC cannot find: no -I */

/* ---- files, roots and the resolver ---- */

typedef struct {
    int from;          /* FROM_* or a caller include directory */
    char *real;        /* real path ("" for the candidate and shims) */
    char *key;         /* the name NVRTC knows it by */
    const char *text;  /* NUL-terminated */
    size_t len;
    char *owned;       /* text, when read from disk */
    kr__pp_scan scan;
    int scanned;
    long *target;      /* per scan item: a file index or R_* */
    char *out;         /* rewritten text; NULL: the text as is */
} hfile;

typedef struct {
    char *name;
    long file;
} alias;

typedef struct {
    long file;
    size_t item;
} pending;

typedef struct {
    kr_context *ctx;
    const char *cand_name;
    kr__pp_mode mode;
    char *toolkit;       /* real path of <cuda_home>/include (NULL: none) */
    char *cccl;          /* real path of <cuda_home>/include/cccl (NULL: none) */
    char *const *dirs;   /* the caller's, real paths, NULL-terminated */
    hfile *files;
    size_t nfiles, capfiles;
    alias *aliases;
    size_t naliases;
    pending *computed;
    size_t ncomputed;
    kr__name_map by_real, by_key, memo, chain;
    size_t total;
    kr__buf log;
    int errors;
    int oom;
} resolver;

static void note(resolver *R, long file, unsigned line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* One line of the policy log, in NVRTC's format. */
static void note(resolver *R, long file, unsigned line, const char *fmt, ...)
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

static int inside(const char *real, const char *root)
{
    size_t n = strlen(root);
    return root[0] && strncmp(real, root, n) == 0 && (real[n] == '/' || (n == 1 && root[0] == '/'));
}

static long add_file(resolver *R, int from, const char *real, const char *key, const char *text,
                     size_t len, char *owned)
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
    if (!inside(real, root)) {
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
    if (from == FROM_TOOLKIT && R->cccl && inside(real, R->cccl))
        key = real + strlen(R->cccl) + 1;
    rc = add_file(R, from, real, key, text, got, text);
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
    return add_file(R, FROM_SHIM, real, name, text, len, NULL);
}

/* The root a toolkit file must lie in: <cuda_home>/include, or
 * include/cccl itself where that is a link to elsewhere. */
static const char *toolkit_root(const resolver *R, const char *real)
{
    int elsewhere = R->cccl && !inside(R->cccl, R->toolkit);
    if (elsewhere && (inside(real, R->cccl) || strcmp(real, R->cccl) == 0))
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
static long resolve_name(resolver *R, long from_file, int delim, const char *name)
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

/* ---- resolving the closure ---- */

static int scan_file(resolver *R, long i)
{
    hfile *f = &R->files[i];
    if (f->scanned)
        return 0;
    kr__pp_mode mode = R->mode;
    if (f->from == FROM_TOOLKIT || f->from == FROM_SHIM)
        mode.lenient = 1; /* trusted text: lexed, never refused */
    if (kr__pp_scan_text(&f->scan, f->text, f->len, mode) != 0)
        return -1;
    f->scanned = 1;
    if (!(f->target = malloc((f->scan.count ? f->scan.count : 1) * sizeof *f->target)))
        return -1;
    for (size_t k = 0; k < f->scan.count; k++)
        f->target[k] = R_NONE;
    return 0;
}

static int push_computed(resolver *R, long file, size_t item)
{
    pending *grown = realloc(R->computed, (R->ncomputed + 1) * sizeof *grown);
    if (!grown)
        return -1;
    R->computed = grown;
    R->computed[R->ncomputed].file = file;
    R->computed[R->ncomputed].item = item;
    R->ncomputed++;
    return 0;
}

/* Resolves the literal names of file i; computed includes of toolkit
 * headers are kept for evaluate_computed. */
static int process_file(resolver *R, long i)
{
    if (scan_file(R, i) != 0)
        return -1;
    int from = R->files[i].from;
    if (R->files[i].scan.refused && from >= 0)
        note(R, i, R->files[i].scan.refused_line, "%s is refused", R->files[i].scan.refused_why);
    for (size_t k = 0; k < R->files[i].scan.count; k++) {
        const kr__pp_item *it = &R->files[i].scan.items[k];
        int include = it->kind == KR__PP_INCLUDE;
        if (!include && it->kind != KR__PP_HAS_INCLUDE)
            continue;
        if (!include && from == FROM_CANDIDATE && !kr__include_probe_allowed(it->word))
            continue;
        if (include && strcmp(it->word, "include") != 0) {
            if (from >= 0)
                note(R, i, it->line, "#%s is refused", it->word);
            continue;
        }
        if (!it->name) {
            if (include && from == FROM_TOOLKIT && push_computed(R, i, k) != 0)
                return -1;
            if (include && from >= 0)
                note(R, i, it->line, "#include of a computed name is refused");
            continue;
        }
        long r = resolve_name(R, i, it->delim, it->name);
        if (r == R_OOM)
            return -1;
        if (r <= R_ABSOLUTE) {
            if (from == FROM_CANDIDATE)
                note(R, i, it->line, "%c%s%c: %s", it->delim, it->name,
                     it->delim == '<' ? '>' : '"', kr__include_violation(r));
            else if (from >= 0)
                note(R, i, it->line, "an #include in this header was refused: %s",
                     kr__include_violation(r));
            r = R_MISSING;
        } else if (r == R_MISSING && include && from == FROM_CANDIDATE) {
            note(R, i, it->line, "%c%s%c was not found in the caller's include directories, the "
                 "CUDA toolkit (include, include/cccl) or libkreward's standard-header shims",
                 it->delim, it->name, it->delim == '<' ? '>' : '"');
        }
        R->files[i].target[k] = r;
    }
    return 0;
}

/* The definitions of object-like macros in every header read so far. */
typedef struct {
    kr__name_map index; /* name -> first definition */
    char **body;
    long *next;
    size_t count;
} deftable;

static void deftable_free(deftable *d)
{
    for (size_t i = 0; i < d->count; i++)
        free(d->body[i]);
    free(d->body);
    free(d->next);
    kr__name_map_free(&d->index);
}

static int deftable_build(resolver *R, deftable *d)
{
    memset(d, 0, sizeof *d);
    for (size_t i = 0; i < R->nfiles; i++) {
        const hfile *f = &R->files[i];
        if (f->from != FROM_TOOLKIT)
            continue;
        for (size_t k = 0; k < f->scan.count; k++) {
            const kr__pp_item *it = &f->scan.items[k];
            if (it->kind != KR__PP_DEFINE || it->function_like || !it->word[0])
                continue;
            char **b = realloc(d->body, (d->count + 1) * sizeof *b);
            long *n = b ? realloc(d->next, (d->count + 1) * sizeof *n) : NULL;
            if (b)
                d->body = b;
            if (n)
                d->next = n;
            if (!b || !n)
                return -1;
            if (!(d->body[d->count] = kr__pp_text(f->text, it->body_start, it->body_end)))
                return -1;
            long first = -1;
            kr__name_map_get(&d->index, it->word, strlen(it->word), &first);
            d->next[d->count] = first;
            if (kr__name_map_put(&d->index, it->word, strlen(it->word), (long)d->count) != 0)
                return -1;
            d->count++;
        }
    }
    return 0;
}

static int ident_char(char c, int first)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
           (!first && c >= '0' && c <= '9');
}

/* Every text the operand can become by substituting object-like macros
 * (each definition seen, whatever its #if), up to MAX_EXPANSIONS. Every
 * identifier met on the way joins R->chain: a candidate may not define
 * them (the preprocessor would expand a candidate's `h` in `.h` too). */
static int expand(resolver *R, const deftable *d, const char *text, int depth, char **out,
                  size_t *nout)
{
    if (*nout >= MAX_EXPANSIONS || depth > 8)
        return 0;
    for (const char *p = text; *p;) {
        if (!ident_char(*p, 1) || (p > text && ident_char(p[-1], 0))) {
            p++;
            continue;
        }
        const char *e = p;
        while (ident_char(*e, 0))
            e++;
        if (kr__name_map_put(&R->chain, p, (size_t)(e - p), 1) != 0)
            return -1;
        long def;
        if (!kr__name_map_get(&d->index, p, (size_t)(e - p), &def)) {
            p = e;
            continue;
        }
        for (; def >= 0; def = d->next[def]) {
            kr__buf b = KR__BUF_INIT;
            kr__buf_append(&b, text, (size_t)(p - text));
            kr__buf_puts(&b, d->body[def]);
            kr__buf_puts(&b, e);
            char *s = kr__buf_take(&b);
            if (!s)
                return -1;
            int rc = expand(R, d, s, depth + 1, out, nout);
            free(s);
            if (rc != 0)
                return rc;
        }
        return 0;
    }
    if (*nout < MAX_EXPANSIONS && !(out[(*nout)++] = kr__strdup(text)))
        return -1;
    return 0;
}

static int add_alias(resolver *R, const char *name, long file)
{
    long other;
    if (kr__name_map_get(&R->by_key, name, strlen(name), &other))
        return 0; /* already this file's key, or another file's: left alone */
    alias *grown = realloc(R->aliases, (R->naliases + 1) * sizeof *grown);
    if (!grown)
        return -1;
    R->aliases = grown;
    if (!(R->aliases[R->naliases].name = kr__strdup(name)))
        return -1;
    R->aliases[R->naliases++].file = file;
    return kr__name_map_put(&R->by_key, name, strlen(name), file);
}

/* A computed #include in a toolkit header (Thrust's system headers: the
 * name is a chain of object-like macros). NVRTC will look its expansion up
 * by that literal name, so every expansion that resolves is provided under
 * it. Anything else it could expand to is not in memory and, being
 * relative, cannot be found on disk. */
static int evaluate_computed(resolver *R, const deftable *d, pending p)
{
    const hfile *f = &R->files[p.file];
    const kr__pp_item *it = &f->scan.items[p.item];
    char *operand = kr__pp_text(f->text, it->span_start, it->span_end);
    char *alts[MAX_EXPANSIONS];
    size_t n = 0;
    int rc = operand ? expand(R, d, operand, 0, alts, &n) : -1;
    free(operand);
    for (size_t i = 0; i < n; i++) {
        char *s = alts[i];
        size_t len = strlen(s);
        int literal = len > 2 && ((s[0] == '<' && s[len - 1] == '>') ||
                                  (s[0] == '"' && s[len - 1] == '"'));
        if (rc == 0 && literal) {
            int delim = s[0];
            s[len - 1] = '\0';
            char *name = s + 1;
            char *lit = kr__strdup(s + 1);
            long r = lit ? resolve_name(R, p.file, delim, name) : R_OOM;
            if (r == R_OOM || (r >= 0 && add_alias(R, lit, r) != 0))
                rc = -1;
            free(lit);
        }
        free(alts[i]);
    }
    return rc;
}

/* Reads every header the candidate can reach, to a fixed point (computed
 * includes can reach new headers, which can hold more). */
static int close_over(resolver *R)
{
    size_t done = 0, evaluated = 0;
    for (;;) {
        while (done < R->nfiles)
            if (process_file(R, (long)done++) != 0)
                return -1;
        if (evaluated == R->ncomputed)
            return 0;
        deftable d;
        int rc = deftable_build(R, &d);
        while (rc == 0 && evaluated < R->ncomputed)
            rc = evaluate_computed(R, &d, R->computed[evaluated++]);
        deftable_free(&d);
        if (rc != 0)
            return -1;
    }
}

/* A candidate that redefines a macro a toolkit header builds an include
 * name from could steer that include anywhere (an absolute path). */
static void check_chain(resolver *R)
{
    const kr__pp_scan *s = &R->files[0].scan;
    for (size_t k = 0; k < s->count; k++) {
        const kr__pp_item *it = &s->items[k];
        long v;
        if ((it->kind == KR__PP_DEFINE || it->kind == KR__PP_UNDEF) && it->word &&
            kr__name_map_get(&R->chain, it->word, strlen(it->word), &v))
            note(R, 0, it->line, "#%s %s is refused: a toolkit header builds an #include name "
                 "from this macro", it->kind == KR__PP_DEFINE ? "define" : "undef", it->word);
    }
}

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
    long cand = add_file(R, FROM_CANDIDATE, "", name, src, len, NULL);
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
    if (close_over(R) != 0) {
        rc = kr__fail(ctx, KR_ENOMEM, "out of memory");
        goto fail;
    }
    check_chain(R);
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
        if (strcmp(real, "/") == 0 || inside(real, "/proc") || inside(real, "/sys") ||
            inside(real, "/dev") || !strcmp(real, "/proc") || !strcmp(real, "/sys") ||
            !strcmp(real, "/dev")) {
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
