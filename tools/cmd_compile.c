/* `kreward compile`: compile a candidate (or wrap a CUBIN/PTX) and show what
 * it contains. */
#include "cli.h"

#include <stdlib.h>
#include <string.h>

static void usage(FILE *to)
{
    fprintf(to,
            "usage: kreward compile FILE [options]\n\n"
            "Compiles CUDA C++ (FILE.cu) through NVRTC, or reads a CUBIN/PTX (FILE.cubin,\n"
            "FILE.ptx), and prints its kernels, their resources, the compile time and\n"
            "whether the compile cache was hit. On a compile error prints the NVRTC log\n"
            "and exits with 1.\n\n"
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
    int json, no_cache;
    cli_list defines, includes, exprs;
    kr_compile_options opts;
} compile_args;

static const char *value_of(int argc, char **argv, int *i, const char *flag)
{
    size_t n = strlen(flag);
    if (strncmp(argv[*i], flag, n) == 0 && argv[*i][n] != '\0' && flag[1] != '-')
        return argv[*i] + n; /* -DNAME=VAL, -Idir */
    if (*i + 1 >= argc) {
        fprintf(stderr, "kreward compile: %s needs a value\n", flag);
        exit(EXIT_USAGE);
    }
    return argv[++*i];
}

static int parse(int argc, char **argv, compile_args *a)
{
    kr_compile_options_init(&a->opts, KR_COMPILE_OPTIONS_VERSION);
    for (int i = 1; i < argc; i++) {
        const char *s = argv[i];
        if (strcmp(s, "-h") == 0 || strcmp(s, "--help") == 0) {
            usage(stdout);
            exit(EXIT_OK);
        } else if (strcmp(s, "--arch") == 0) {
            a->opts.arch = value_of(argc, argv, &i, "--arch");
        } else if (strncmp(s, "-D", 2) == 0) {
            cli_list_add(&a->defines, value_of(argc, argv, &i, "-D"));
        } else if (strncmp(s, "-I", 2) == 0) {
            cli_list_add(&a->includes, value_of(argc, argv, &i, "-I"));
        } else if (strcmp(s, "--std") == 0) {
            a->opts.std = value_of(argc, argv, &i, "--std");
        } else if (strcmp(s, "--fast-math") == 0) {
            a->opts.fast_math = 1;
        } else if (strcmp(s, "--line-info") == 0) {
            a->opts.line_info = 1;
        } else if (strcmp(s, "--name-expr") == 0) {
            cli_list_add(&a->exprs, value_of(argc, argv, &i, "--name-expr"));
        } else if (strcmp(s, "--time-limit") == 0) {
            a->opts.time_limit_s = atof(value_of(argc, argv, &i, "--time-limit"));
        } else if (strcmp(s, "--cache-dir") == 0) {
            a->cache_dir = value_of(argc, argv, &i, "--cache-dir");
        } else if (strcmp(s, "--no-cache") == 0) {
            a->opts.flags |= KR_COMPILE_NO_CACHE;
        } else if (strcmp(s, "-o") == 0) {
            a->out = value_of(argc, argv, &i, "-o");
        } else if (strcmp(s, "--json") == 0) {
            a->json = 1;
        } else if (s[0] == '-' && s[1] != '\0') {
            fprintf(stderr, "kreward compile: unknown option '%s' (see --help)\n", s);
            return -1;
        } else if (!a->file) {
            a->file = s;
        } else {
            fprintf(stderr, "kreward compile: one FILE only ('%s' is extra)\n", s);
            return -1;
        }
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
    int rc = is_binary_name(a.file) ? kr_program_from_binary(&prog, ctx, src, len, a.file)
                                    : kr_compile(&prog, ctx, src, len ? len : 1, &a.opts);
    int exit_code = cli_exit_for(rc);
    if (rc != KR_OK) {
        cli_report_error(ctx, "compile", rc);
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
