/* Shared helpers of the `kreward` command line. */
#include "cli.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int cli_quiet_stdout(void)
{
    fflush(stdout);
    int saved = dup(STDOUT_FILENO);
    if (saved >= 0)
        dup2(STDERR_FILENO, STDOUT_FILENO);
    return saved;
}

void cli_restore_stdout(int saved)
{
    fflush(stdout);
    if (saved < 0)
        return;
    dup2(saved, STDOUT_FILENO);
    close(saved);
}

char *cli_read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "kreward: cannot open %s: %s\n", path, strerror(errno));
        return NULL;
    }
    size_t cap = 65536, n = 0;
    char *data = malloc(cap + 1);
    while (data) {
        size_t got = fread(data + n, 1, cap - n, f);
        n += got;
        if (n < cap)
            break;
        char *grown = realloc(data, cap * 2 + 1);
        if (!grown) {
            free(data);
            data = NULL;
            break;
        }
        data = grown;
        cap *= 2;
    }
    int failed = ferror(f);
    fclose(f);
    if (!data || failed) {
        fprintf(stderr, "kreward: cannot read %s\n", path);
        free(data);
        return NULL;
    }
    data[n] = '\0';
    *len = n;
    return data;
}

int cli_exit_for(int status)
{
    switch (status) {
    case KR_OK:
        return EXIT_OK;
    case KR_ECOMPILE:
    case KR_ETIMEOUT:
    case KR_EFAULT:
    case KR_EPLAN:
        return EXIT_CANDIDATE;
    case KR_EINVAL:
    case KR_EPARSE:
    case KR_ETOOBIG:
    case KR_ENOTFOUND:
    case KR_EIO:
    case KR_ERANGE:
    case KR_EVERSION:
        return EXIT_USAGE;
    case KR_ENODEVICE:
    case KR_EUNAVAILABLE:
    case KR_EUNSUPPORTED:
        return EXIT_ENVIRONMENT;
    default:
        return EXIT_INTERNAL;
    }
}

void cli_report_error(kr_context *ctx, const char *what, int status)
{
    const char *msg = ctx ? kr_context_errmsg(ctx) : "";
    fprintf(stderr, "kreward: %s: %s\n", what, msg[0] ? msg : kr_strerror(status));
    const char *detail = ctx ? kr_context_errdetail(ctx) : "";
    if (detail[0])
        fprintf(stderr, "%s%s", detail, detail[strlen(detail) - 1] == '\n' ? "" : "\n");
}

kr_context *cli_context(const char *cache_dir, int no_device)
{
    kr_context_options o;
    kr_context_options_init(&o, KR_CONTEXT_OPTIONS_VERSION);
    o.cache_dir = cache_dir ? cache_dir : getenv("KREWARD_CACHE_DIR");
    if (no_device)
        o.flags |= KR_CONTEXT_NO_DEVICE;
    kr_context *ctx = NULL;
    int rc = kr_context_new(&ctx, &o);
    if (rc != KR_OK) {
        fprintf(stderr, "kreward: cannot create a context: %s\n", kr_strerror(rc));
        exit(EXIT_INTERNAL);
    }
    return ctx;
}

void cli_list_add(cli_list *l, const char *s)
{
    const char **grown = realloc(l->items, (l->count + 1) * sizeof *grown);
    if (!grown) {
        fprintf(stderr, "kreward: out of memory\n");
        exit(EXIT_INTERNAL);
    }
    l->items = grown;
    l->items[l->count++] = s;
}

static size_t join_options(struct option *to, size_t n, const struct option *from)
{
    for (; from && from->name; from++) {
        if (n + 2 > CLI_MAX_OPTIONS) { /* room for the terminator; a bug, not a user error */
            fprintf(stderr, "kreward: more than %d options; raise CLI_MAX_OPTIONS\n",
                    CLI_MAX_OPTIONS - 1);
            exit(EXIT_INTERNAL);
        }
        to[n++] = *from;
    }
    return n;
}

void cli_parser_init(cli_parser *p, const char *cmd, const char *shorts, const struct option *own,
                     const struct option *shared)
{
    static const struct option help[] = {{"help", no_argument, NULL, CLI_HELP}, {NULL, 0, NULL, 0}};
    memset(p, 0, sizeof *p);
    p->cmd = cmd;
    /* "-": arguments come back in order (options may follow them, whatever
     * POSIXLY_CORRECT says); ":": a missing value is told from an unknown option */
    snprintf(p->shorts, sizeof p->shorts, "-:h%s", shorts ? shorts : "");
    size_t n = join_options(p->longs, 0, own);
    n = join_options(p->longs, n, shared);
    n = join_options(p->longs, n, help);
    p->longs[n] = (struct option){NULL, 0, NULL, 0};
    optind = 0; /* glibc and musl: start over */
    opterr = 0; /* the messages are ours */
}

int cli_bad(const cli_parser *p, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s: ", p->cmd);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, " (see '%s --help')\n", p->cmd);
    return CLI_BAD;
}

/* The long option that `name` (len characters) is, or is the only prefix of;
 * *matches counts the options it could be. */
static const struct option *find_long(const cli_parser *p, const char *name, size_t len,
                                      int *matches)
{
    const struct option *found = NULL;
    *matches = 0;
    for (const struct option *o = p->longs; o->name; o++) {
        if (strncmp(o->name, name, len) != 0)
            continue;
        if (strlen(o->name) == len) {
            *matches = 1;
            return o;
        }
        found = o;
        ++*matches;
    }
    return *matches == 1 ? found : NULL;
}

/* getopt said '?' or ':' about `arg`, the argument it was reading. */
static int option_error(const cli_parser *p, int c, const char *arg)
{
    if (strncmp(arg, "--", 2) != 0) {
        int letter = isprint(optopt) ? optopt : '?';
        return c == ':' ? cli_bad(p, "option '-%c' needs a value", letter)
                        : cli_bad(p, "unknown option '-%c'", letter);
    }
    const char *name = arg + 2;
    int len = (int)strcspn(name, "=");
    int matches;
    const struct option *o = find_long(p, name, (size_t)len, &matches);
    if (c == ':')
        return cli_bad(p, "option '--%s' needs a value", o ? o->name : name);
    if (o && name[len] == '=' && o->has_arg == no_argument)
        return cli_bad(p, "option '--%s' takes no value", o->name);
    if (matches > 1) {
        char could[256] = "";
        size_t used = 0;
        for (const struct option *q = p->longs; q->name && used < sizeof could; q++)
            if (strncmp(q->name, name, (size_t)len) == 0)
                used += (size_t)snprintf(could + used, sizeof could - used, "%s--%s",
                                         used ? ", " : "", q->name);
        return cli_bad(p, "ambiguous option '--%.*s' (%s)", len, name, could);
    }
    return cli_bad(p, "unknown option '--%.*s'", len, name);
}

int cli_next(cli_parser *p, int argc, char **argv, const char **value)
{
    *value = NULL;
    if (!p->ended) {
        /* with "-" getopt never permutes: optind is the argument it reads next */
        int at = optind ? optind : 1;
        int c = getopt_long(argc, argv, p->shorts, p->longs, NULL);
        if (c == '?' || c == ':')
            return option_error(p, c, at < argc ? argv[at] : "");
        if (c != -1) {
            *value = optarg;
            return c;
        }
        p->ended = 1; /* the end, or "--": the rest are arguments */
    }
    if (optind < argc) {
        *value = argv[optind++];
        return CLI_ARG;
    }
    return CLI_END;
}
