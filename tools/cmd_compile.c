/* `kreward compile`: compile a candidate (or wrap a CUBIN/PTX) and show what
 * it contains. */
#include "cli.h"

#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *to)
{
    fprintf(to,
            "usage: kreward compile FILE [options]\n\n"
            "Compiles CUDA C++ (FILE.cu) through NVRTC, or reads a CUBIN/PTX (FILE.cubin,\n"
            "FILE.ptx), and prints its kernels, their resources, the compile time and\n"
            "whether the compile cache was hit. On a compile error prints the NVRTC log\n"
            "and exits with 1 (with --json, also {\"ok\": false, \"status\", \"message\",\n"
            "\"log\"} on stdout). An empty file is a compile error.\n\n"
            "options:\n"
            "  --arch ARCH        target, e.g. sm_90a (default: the GPU's, else sm_90a)\n"
            "  -D NAME[=VAL]      define a macro (repeatable)\n"
            "  -I DIR             extra include directory (repeatable)\n"
            "  --std STD          C++ standard (default c++17)\n"
            "  --fast-math        --use_fast_math\n"
            "  --line-info        -lineinfo\n"
            "  --name-expr EXPR   a template kernel to instantiate, e.g. 'k<128>' (repeatable)\n"
            "  --time-limit SEC   cancel a compile that runs longer\n"
            "  --cache-dir DIR    on-disk compile cache (default $KREWARD_CACHE_DIR)\n"
            "  --no-cache         neither read nor write the cache\n"
            "  -o FILE            write the CUBIN/PTX image to FILE\n"
            "  --json             print the result as JSON\n");
}

typedef struct {
    const char *file, *out, *cache_dir;
    int json;
    cli_list defines, includes, exprs;
    kr_compile_options opts;
} compile_args;

enum {
    OPT_ARCH = CLI_OPT,
    OPT_STD,
    OPT_FAST_MATH,
    OPT_LINE_INFO,
    OPT_NAME_EXPR,
    OPT_TIME_LIMIT,
    OPT_CACHE_DIR,
    OPT_NO_CACHE,
    OPT_JSON,
};

static const struct option options[] = {
    {"arch", required_argument, NULL, OPT_ARCH},
    {"std", required_argument, NULL, OPT_STD},
    {"fast-math", no_argument, NULL, OPT_FAST_MATH},
    {"line-info", no_argument, NULL, OPT_LINE_INFO},
    {"name-expr", required_argument, NULL, OPT_NAME_EXPR},
    {"time-limit", required_argument, NULL, OPT_TIME_LIMIT},
    {"cache-dir", required_argument, NULL, OPT_CACHE_DIR},
    {"no-cache", no_argument, NULL, OPT_NO_CACHE},
    {"json", no_argument, NULL, OPT_JSON},
    {NULL, 0, NULL, 0},
};

/* Keeps one option or argument: 0, CLI_BAD for a value it refuses. */
static int keep(cli_parser *p, int c, const char *v, compile_args *a)
{
    char *end;
    switch (c) {
    case OPT_ARCH:
        a->opts.arch = v;
        break;
    case 'D':
        cli_list_add(&a->defines, v);
        break;
    case 'I':
        cli_list_add(&a->includes, v);
        break;
    case OPT_STD:
        a->opts.std = v;
        break;
    case OPT_FAST_MATH:
        a->opts.fast_math = 1;
        break;
    case OPT_LINE_INFO:
        a->opts.line_info = 1;
        break;
    case OPT_NAME_EXPR:
        cli_list_add(&a->exprs, v);
        break;
    case OPT_TIME_LIMIT:
        a->opts.time_limit_s = strtod(v, &end);
        if (end == v || *end || !(a->opts.time_limit_s >= 0) || isinf(a->opts.time_limit_s))
            return cli_bad(p, "--time-limit takes seconds (a number >= 0), not '%s'", v);
        break;
    case OPT_CACHE_DIR:
        a->cache_dir = v;
        break;
    case OPT_NO_CACHE:
        a->opts.flags |= KR_COMPILE_NO_CACHE;
        break;
    case 'o':
        a->out = v;
        break;
    case OPT_JSON:
        a->json = 1;
        break;
    case CLI_ARG:
        if (a->file)
            return cli_bad(p, "one FILE only ('%s' is extra)", v);
        a->file = v;
        break;
    default:
        return CLI_BAD;
    }
    return 0;
}

static int parse(int argc, char **argv, compile_args *a)
{
    kr_compile_options_init(&a->opts, KR_COMPILE_OPTIONS_VERSION);
    cli_parser p;
    cli_parser_init(&p, "kreward compile", "D:I:o:", options, NULL);
    const char *v;
    for (int c; (c = cli_next(&p, argc, argv, &v)) != CLI_END;) {
        if (c == CLI_HELP) {
            usage(stdout);
            exit(EXIT_OK);
        }
        if (keep(&p, c, v, a) != 0)
            return -1;
    }
    if (!a->file) {
        usage(stderr);
        return -1;
    }
    a->opts.name = a->file;
    a->opts.defines = a->defines.items;
    a->opts.num_defines = a->defines.count;
    a->opts.include_dirs = a->includes.items;
    a->opts.num_include_dirs = a->includes.count;
    a->opts.name_expressions = a->exprs.items;
    a->opts.num_name_expressions = a->exprs.count;
    return 0;
}

static const char *cache_text(int r)
{
    static const char *names[] = {"miss", "memory hit", "disk hit", "not used"};
    return r >= 0 && r <= 3 ? names[r] : "?";
}

static void print_resource(const char *label, int64_t v, const char *unit)
{
    if (v >= 0)
        printf(" %s %lld%s", label, (long long)v, unit);
    else
        printf(" %s ?", label);
}

static void print_text(const kr_program *p, int has_device)
{
    size_t n = kr_program_kernel_count(p);
    printf("%s: %zu kernel%s, arch %s, compile %.1f ms (cache: %s)\n", kr_program_hash(p), n,
           n == 1 ? "" : "s", kr_program_arch(p), kr_program_compile_seconds(p) * 1e3,
           cache_text(kr_program_cache_result(p)));
    for (size_t i = 0; i < n; i++) {
        printf("  %s\n   ", kr_program_kernel_name(p, i));
        int64_t np = kr_program_kernel_attr(p, i, KR_KERNEL_NUM_PARAMS);
        if (np >= 0) {
            printf(" params (");
            for (int64_t j = 0; j < np; j++) {
                uint32_t size = 0;
                kr_program_kernel_param(NULL, &size, p, i, (size_t)j);
                printf("%s%u", j ? ", " : "", size);
            }
            printf(") bytes;");
        }
        print_resource("registers", kr_program_kernel_attr(p, i, KR_KERNEL_REGISTERS), "");
        print_resource("shared", kr_program_kernel_attr(p, i, KR_KERNEL_SHARED_STATIC), " B");
        print_resource("local", kr_program_kernel_attr(p, i, KR_KERNEL_LOCAL_BYTES), " B");
        print_resource("max threads", kr_program_kernel_attr(p, i, KR_KERNEL_MAX_THREADS), "");
        printf("\n");
    }
    if (!has_device)
        printf("(no GPU here: registers, shared/local memory and thread limits are read when "
               "the program is loaded on a GPU)\n");
    const char *log = kr_program_log(p);
    if (log[0])
        printf("compile log:\n%s%s", log, log[strlen(log) - 1] == '\n' ? "" : "\n");
}

/* --json on a failure: what went wrong as JSON on stdout (the message and
 * log also go to stderr, as without --json), so a script reading stdout
 * always gets one JSON document. */
static void print_error_json(kr_context *ctx, int rc)
{
    json_t *o = json_pack("{s:b, s:s, s:s, s:s}", "ok", 0, "status", kr_status_name(rc),
                          "message", kr_context_errmsg(ctx), "log", kr_context_errdetail(ctx));
    char *text = o ? json_dumps(o, JSON_INDENT(2)) : NULL;
    printf("%s\n", text ? text : "{\"ok\": false}");
    free(text);
    json_decref(o);
}

static int write_image(const kr_program *p, const char *path)
{
    size_t len = 0;
    const void *img = NULL;
    kr_program_binary(&img, &len, NULL, p);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(img, 1, len, f) != len || fclose(f) != 0) {
        fprintf(stderr, "kreward compile: cannot write %s\n", path);
        return -1;
    }
    return 0;
}

static int is_binary_name(const char *path)
{
    const char *dot = strrchr(path, '.');
    return dot && (strcmp(dot, ".cubin") == 0 || strcmp(dot, ".ptx") == 0);
}

int cmd_compile(int argc, char **argv)
{
    compile_args a;
    memset(&a, 0, sizeof a);
    if (parse(argc, argv, &a) != 0)
        return EXIT_USAGE;
    size_t len;
    char *src = cli_read_file(a.file, &len);
    if (!src)
        return EXIT_USAGE;
    kr_context *ctx = cli_context(a.cache_dir, 0);
    kr_program *prog = NULL;
    /* an empty file is len 0, read as NUL-terminated: empty, a compile error */
    int rc = is_binary_name(a.file) ? kr_program_from_binary(&prog, ctx, src, len, a.file)
                                    : kr_compile(&prog, ctx, src, len, &a.opts);
    int exit_code = cli_exit_for(rc);
    if (rc != KR_OK) {
        cli_report_error(ctx, "compile", rc);
        if (a.json)
            print_error_json(ctx, rc);
    } else {
        if (a.json) {
            char *json = NULL;
            kr_program_json(&json, prog);
            printf("%s\n", json ? json : "{}");
            kr_free(json);
        } else {
            print_text(prog, kr_context_has_device(ctx));
        }
        if (a.out && write_image(prog, a.out) != 0)
            exit_code = EXIT_USAGE;
    }
    kr_program_free(prog);
    kr_context_free(ctx);
    free(src);
    free(a.defines.items);
    free(a.includes.items);
    free(a.exprs.items);
    return exit_code;
}
