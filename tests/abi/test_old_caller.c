/* A caller built against an older header: its kr_compile_options is the
 * version-1 layout (kept here as it was released), shorter than today's,
 * which appended max_log_bytes in version 2. The struct is placed at the
 * very end of a readable page, with an inaccessible page after it, so any
 * read or write past what a version-1 caller owns faults here at once.
 * The library must read only that prefix and give the appended field its
 * default; _init must write only that prefix; a version newer than the
 * library must be refused. */
#include <kreward/kreward.h>

#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* kr_compile_options as released in libkreward 0.1 (version 1). */
typedef struct compile_options_v1 {
    uint32_t version;
    const char *name;
    const char *arch;
    const char *std;
    const char *const *defines;
    size_t num_defines;
    const char *const *include_dirs;
    size_t num_include_dirs;
    const char *const *name_expressions;
    size_t num_name_expressions;
    const char *const *extra_options;
    size_t num_extra_options;
    int32_t fast_math;
    int32_t line_info;
    uint64_t max_source_bytes;
    double time_limit_s;
    uint32_t flags;
} compile_options_v1;

static int failures;

#define CHECK(cond, ...)                  \
    do {                                  \
        if (!(cond)) {                    \
            printf("FAIL: " __VA_ARGS__); \
            printf("\n");                 \
            failures++;                   \
        }                                 \
    } while (0)

/* A v1 struct whose last byte is the last readable byte of a page. */
static compile_options_v1 *at_page_end(void)
{
    long page = sysconf(_SC_PAGESIZE);
    char *mem = mmap(NULL, (size_t)page * 2, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED || mprotect(mem + page, (size_t)page, PROT_NONE) != 0)
        return NULL;
    /* sizeof includes trailing padding a v1 caller owns too */
    return (compile_options_v1 *)(mem + page - sizeof(compile_options_v1));
}

static const char SOURCE[] =
    "#ifndef WIDTH\n#error WIDTH is not defined: the v1 defines were not read\n#endif\n"
    "extern \"C\" __global__ void k(float *x) { x[threadIdx.x] = WIDTH; }\n";

int main(void)
{
    compile_options_v1 *o = at_page_end();
    if (!o) {
        perror("mmap");
        return 99;
    }
    CHECK(kr_compile_options_init((kr_compile_options *)o, 1) == KR_OK, "init with version 1");
    CHECK(o->version == 1, "init sets version 1, got %u", o->version);
    CHECK(kr_compile_options_init((kr_compile_options *)o, KR_COMPILE_OPTIONS_VERSION + 1) ==
              KR_EVERSION,
          "init with a version newer than the library is refused");

    kr_context_options co;
    kr_context_options_init(&co, KR_CONTEXT_OPTIONS_VERSION);
    co.flags = KR_CONTEXT_NO_DEVICE;
    co.cache_memory_bytes = 0;
    kr_context *ctx = NULL;
    if (kr_context_new(&ctx, &co) != KR_OK)
        return 99;
    static const char *const defines[] = {"WIDTH=3"};
    kr_compile_options_init((kr_compile_options *)o, 1);
    o->name = "old_caller.cu";
    o->defines = defines;
    o->num_defines = 1;
    kr_program *prog = NULL;
    int rc = kr_compile(&prog, ctx, SOURCE, 0, (const kr_compile_options *)o);
    if (rc == KR_EUNAVAILABLE) {
        printf("SKIP: NVRTC is not available here: %s\n", kr_context_errmsg(ctx));
        kr_context_free(ctx);
        return 77;
    }
    CHECK(rc == KR_OK, "a version-1 struct compiles: %s %s", kr_context_errmsg(ctx),
          kr_context_errdetail(ctx));
    CHECK(prog && kr_program_kernel_count(prog) == 1, "the kernel is there");
    kr_program_free(prog);

    o->version = KR_COMPILE_OPTIONS_VERSION + 1;
    prog = NULL;
    rc = kr_compile(&prog, ctx, SOURCE, 0, (const kr_compile_options *)o);
    CHECK(rc == KR_EVERSION && !prog, "a newer version is refused (got %s)", kr_status_name(rc));
    CHECK(strstr(kr_context_errmsg(ctx), "kr_compile_options version") != NULL,
          "the message names the struct: %s", kr_context_errmsg(ctx));

    /* today's struct, with the appended field used: the log is cut */
    kr_compile_options now;
    kr_compile_options_init(&now, KR_COMPILE_OPTIONS_VERSION);
    now.max_log_bytes = 40;
    const char *noisy = "#pragma message(\"a long message that makes the compile log longer than "
                        "forty bytes\")\nextern \"C\" __global__ void k(float *x) { x[0] = 1; }\n";
    rc = kr_compile(&prog, ctx, noisy, 0, &now);
    CHECK(rc == KR_OK, "compile with a capped log: %s", kr_context_errmsg(ctx));
    CHECK(prog && strstr(kr_program_log(prog), "[compile log cut: 40 of") != NULL,
          "the log is cut at max_log_bytes: %s", prog ? kr_program_log(prog) : "");
    kr_program_free(prog);
    kr_context_free(ctx);
    if (!failures)
        printf("a version-1 caller works after kr_compile_options grew to version %u\n",
               KR_COMPILE_OPTIONS_VERSION);
    return failures ? 1 : 0;
}
