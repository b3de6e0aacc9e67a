/* Shared helpers of the `kreward` command line. */
#include "cli.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

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
