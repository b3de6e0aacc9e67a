/* Compile safety (docs/compile-safety.md) through the real NVRTC: every
 * trick for reading a file outside the allowed include places is refused
 * with a compile error that carries no byte of that file; honest sources
 * (the shims, the toolkit's headers, the caller's include directories)
 * compile; logs keep only the candidate's own lines. */
#include "helpers.h"
#include "compile/pp_scan.h"
#include "compile/shims.h"

#include <sys/stat.h>
#include <unistd.h>

/* The place every trick aims at: a file outside the allowed directories
 * holding a unique secret, an include directory beside it with honest and
 * dishonest headers, and the secret in the environment too. */
static char *root, *outside, *secret_path, *incdir;
static char secret[64];

static char *join(const char *a, const char *b)
{
    char *p = malloc(strlen(a) + strlen(b) + 2);
    sprintf(p, "%s/%s", a, b);
    return p;
}

static int setup(void **state)
{
    (void)state;
    static char dir[4096];
    const char *base = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    snprintf(dir, sizeof dir, "%s/krsafety-XXXXXX", base);
    assert_non_null(mkdtemp(dir));
    root = kr__strdup_for_test(dir);
    outside = join(root, "outside");
    incdir = join(root, "inc");
    assert_int_equal(mkdir(outside, 0700), 0);
    assert_int_equal(mkdir(incdir, 0700), 0);
    snprintf(secret, sizeof secret, "KRSECRET_%ld_%d", (long)getpid(), rand());
    secret_path = join(outside, "secret.txt");
    char text[256];
    /* C-like, so that an include of it would make NVRTC echo the line */
    snprintf(text, sizeof text, "%s = 1;\nint %s_2 = %s;\n", secret, secret, secret);
    test_write_file(outside, "secret.txt", text);
    test_write_file(outside, "execution_policy.h", text);
    assert_int_equal(setenv("KR_TEST_SECRET", secret, 1), 0);

    test_write_file(incdir, "ok.cuh", "#pragma once\n#include <cuda_fp16.h>\n"
                                 "__device__ inline float twice(float x) { return 2.0f * x; }\n");
    char bad[4400];
    snprintf(bad, sizeof bad, "#pragma once\n#include \"%s\"\n", secret_path);
    test_write_file(incdir, "bad_abs.cuh", bad);
    test_write_file(incdir, "bad_rel.cuh", "#pragma once\n#include \"../outside/secret.txt\"\n");
    test_write_file(incdir, "bad_angle.cuh", "#pragma once\n#include <../outside/secret.txt>\n");
    test_write_file(incdir, "bad_computed.cuh", "#define H \"../outside/secret.txt\"\n#include H\n");
    test_write_file(incdir, "err.cuh", "__device__ int KRMARK_caller_header = ;\n");
    char link[4200];
    snprintf(link, sizeof link, "%s/link.cuh", incdir);
    assert_int_equal(symlink(secret_path, link), 0);
    snprintf(link, sizeof link, "%s/linkdir", incdir);
    assert_int_equal(symlink(outside, link), 0);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    test_rmtree(root);
    free(outside);
    free(incdir);
    free(secret_path);
    return 0;
}

/* The secret appears in nothing the compile returned. */
static void no_secret(kr_context *ctx, kr_program *p)
{
    assert_false(contains(kr_context_errmsg(ctx), secret));
    assert_false(contains(kr_context_errdetail(ctx), secret));
    if (p) {
        assert_false(contains(kr_program_log(p), secret));
        size_t len = 0;
        const char *img = image_of(p, &len, NULL);
        assert_null(memmem(img, len, secret, strlen(secret)));
        assert_null(memmem(img, len, "KRSECRET", 8));
    }
}

static kr_compile_options opts_with(const char *const *dirs, size_t ndirs, const char *std)
{
    kr_compile_options o;
    kr_compile_options_init(&o, KR_COMPILE_OPTIONS_VERSION);
    o.include_dirs = dirs;
    o.num_include_dirs = ndirs;
    o.std = std;
    o.flags = KR_COMPILE_NO_CACHE;
    return o;
}

/* Compiles src and requires a refusal (KR_ECOMPILE) whose message
 * contains `why`, with no byte of the secret anywhere. */
static void refused_std(const char *src, const char *why, const char *std)
{
    kr_context *ctx = test_context(NULL);
    const char *dirs[] = {incdir};
    kr_compile_options o = opts_with(dirs, 1, std);
    kr_program *p = NULL;
    int rc = kr_compile(&p, ctx, src, 0, &o);
    no_secret(ctx, p);
    if (rc != KR_ECOMPILE)
        fail_msg("expected a compile error, got %s: %s\n%s\nfor:\n%s", kr_status_name(rc),
                 kr_context_errmsg(ctx), kr_context_errdetail(ctx), src);
    assert_null(p);
    assert_contains(kr_context_errmsg(ctx), why);
    assert_contains(kr_context_errdetail(ctx), why);
    kr_context_free(ctx);
}

static void refused(const char *src, const char *why)
{
    refused_std(src, why, NULL);
}

static char *with_secret(const char *fmt)
{
    char *s = malloc(strlen(fmt) + 3 * strlen(secret_path) + 1);
    sprintf(s, fmt, secret_path, secret_path, secret_path);
    return s;
}

static void absolute_paths(void **state)
{
    (void)state;
    char *s = with_secret("#include \"%s\"\n__global__ void k() {}\n");
    refused(s, "absolute paths are refused");
    free(s);
    s = with_secret("#include <%s>\n__global__ void k() {}\n");
    refused(s, "absolute paths are refused");
    free(s);
    refused("#include \"/proc/self/environ\"\n__global__ void k() {}\n", "absolute paths");
    refused("#include </etc/passwd>\n", "candidate.cu(1): error: include policy");
}

static void dot_dot(void **state)
{
    (void)state;
    refused("#include \"../outside/secret.txt\"\n", "'..' in an include name is refused");
    refused("#include <inc/../../outside/secret.txt>\n", "'..'");
    refused("#include \"linkdir/../../outside/secret.txt\"\n", "'..'");
}

static void computed_include(void **state)
{
    (void)state;
    char *s = with_secret("#define F \"%s\"\n#include F\n");
    refused(s, "computed name is refused");
    free(s);
    s = with_secret("#define S(x) #x\n#define F S(%s)\n#include F\n");
    refused(s, "computed name is refused");
    free(s);
}

static void include_in_macro_arguments(void **state)
{
    (void)state;
    /* the stringising trick: the file's bytes would become a string */
    char *s = with_secret("#define S(...) #__VA_ARGS__\n__device__ const char *s = S(\n"
                          "#include \"%s\"\n);\n");
    refused(s, "refused");
    free(s);
    /* even an allowed header, and a ')' hidden in a dead branch does not
     * make it look outside the parentheses */
    refused("#define S(...) #__VA_ARGS__\n__device__ const char *s = S(\n"
            "#include <cuda_fp16.h>\n);\n",
            "inside parentheses");
    refused("#define S(...) #__VA_ARGS__\n__device__ const char *s = S(\n#if 0\n)\n#endif\n"
            "#include \"ok.cuh\"\n);\n",
            "inside parentheses");
}

static void has_include_probes(void **state)
{
    (void)state;
    char *s = with_secret("#if __has_include(\"%s\")\n#error found\n#endif\n");
    refused(s, "absolute paths are refused");
    free(s);
    s = with_secret("#define HI __has_include\n#if HI(\"%s\")\n#error found\n#endif\n");
    refused(s, "__has_include without a plain");
    free(s);
    s = with_secret("#define HI(x) __has_include(x)\n#if HI(\"%s\")\n#error found\n#endif\n");
    refused(s, "__has_include without a plain");
    free(s);
    s = with_secret("#include <cuda/std/cstdint>\n#if _CCCL_HAS_INCLUDE(\"%s\")\n#error found\n"
                    "#endif\n");
    refused(s, "_CCCL_HAS_INCLUDE");
    free(s);
    refused("#if __has_include_next(<cuda_fp16.h>)\n#endif\n", "__has_include_next is refused");
}

static void pragmas(void **state)
{
    (void)state;
    char *s = with_secret("_Pragma(\"include_alias(\\\"a.h\\\", \\\"%s\\\")\")\n"
                          "#include \"a.h\"\n");
    refused(s, "#pragma include_alias is refused");
    free(s);
    s = with_secret("#pragma GCC dependency \"%s\"\n");
    refused(s, "#pragma GCC dependency is refused");
    free(s);
    refused("#pragma hdrstop\n", "#pragma hdrstop is refused");
    refused("_Pragma(\"no_pch\")\n", "#pragma no_pch is refused");
}

static void other_directives(void **state)
{
    (void)state;
    char *s = with_secret("#include_next \"%s\"\n");
    refused(s, "#include_next is refused");
    free(s);
    s = with_secret("#embed \"%s\"\n");
    refused(s, "#embed is refused");
    free(s);
    s = with_secret("#import \"%s\"\n");
    refused(s, "#import is refused");
    free(s);
    s = with_secret("#line 1 \"%s\"\n");
    refused(s, "#line naming another file");
    free(s);
    s = with_secret("# 1 \"%s\"\n");
    refused(s, "#line naming another file");
    free(s);
}

/* Spellings of the same directive the front end accepts. */
static void lexical_disguises(void **state)
{
    (void)state;
    static const char *const forms[] = {
        "#inc\\\nlude \"%s\"\n",             /* line splice */
        "#inc\\\r\nlude \"%s\"\n",           /* splice before CR LF */
        "#include \"%s\\\n\"\n",             /* splice inside the name */
        "%%:include \"%s\"\n",               /* digraph */
        "/* a */ # /* b */ include \"%s\"\n", /* comments around # */
        "/*\n*/ #include \"%s\"\n",          /* after a comment spanning lines */
        "#/*\n*/include \"%s\"\n",           /* a comment hiding a newline */
        "#\f include \"%s\"\n",              /* form feed */
        "#\v include \"%s\"\n",              /* vertical tab */
        "// x\r#include \"%s\"\n",           /* CR alone ends no line: stays a comment */
    };
    for (size_t i = 0; i < sizeof forms / sizeof forms[0]; i++) {
        char *s = with_secret(forms[i]);
        if (i == sizeof forms / sizeof forms[0] - 1) {
            /* NVRTC reads this as one comment line: it compiles, reads nothing */
            kr_context *ctx = test_context(NULL);
            kr_program *p = NULL;
            kr_compile_options o = opts_with(NULL, 0, NULL);
            char *src = malloc(strlen(s) + 40);
            sprintf(src, "%s__global__ void k() {}\n", s);
            assert_int_equal(kr_compile(&p, ctx, src, 0, &o), KR_OK);
            no_secret(ctx, p);
            kr_program_free(p);
            kr_context_free(ctx);
            free(src);
        } else {
            refused(s, "include policy");
        }
        free(s);
    }
    refused("#inc\\u006cude \"x.h\"\n", "universal character name");
}

/* What NVRTC's lexer does differently per --std, and the policy with it
 * ('..' rather than an absolute path, which the second look refuses in any
 * mode). */
static void language_modes(void **state)
{
    (void)state;
    /* C++03: no raw strings, so the line inside is a directive */
    const char *raw =
        "__device__ const char *s = R\"x(\n#include \"../outside/secret.txt\"\n)x\";\n";
    refused_std(raw, "'..'", "c++03");
    /* C++17: it is a string; nothing is included and it compiles */
    kr_context *ctx = test_context(NULL);
    kr_program *p = NULL;
    kr_compile_options o = opts_with(NULL, 0, "c++17");
    assert_int_equal(kr_compile(&p, ctx, raw, 0, &o), KR_OK);
    no_secret(ctx, p);
    kr_program_free(p);
    /* C++11: no digit separators, so 1'2 opens a character literal and the
     * comment below never starts */
    const char *sep = "__device__ int x = 1'2; /* '\n#include \"../outside/secret.txt\"\n*/\n";
    refused_std(sep, "'..'", "c++11");
    o.std = "c++14";
    assert_int_equal(kr_compile(&p, ctx, sep, 0, &o), KR_OK);
    no_secret(ctx, p);
    kr_program_free(p);
    /* trigraphs are translated up to C++14: refused there */
    char *s = with_secret("?\?=include \"%s\"\n");
    refused_std(s, "trigraph", "c++14");
    free(s);
    o.std = "c++99";
    assert_int_equal(kr_compile(&p, ctx, "__global__ void k() {}\n", 0, &o), KR_EINVAL);
    kr_context_free(ctx);
}

/* The second look does not trust the lexer: a directive-like line naming
 * an absolute path is refused even where it reads as a comment or string
 * (what the lexer takes for one NVRTC might not, in some mode). */
static void second_look(void **state)
{
    (void)state;
    char *s = with_secret("/*\n#include \"%s\"\n*/\n__global__ void k() {}\n");
    refused(s, "even where it looks commented out");
    free(s);
    s = with_secret("__device__ const char *s = \"__has_include(<%s>)\";\n");
    refused(s, "even where it looks commented out");
    free(s);
}

static void process_environment(void **state)
{
    (void)state;
    refused("#include \"/proc/self/environ\"\n", "absolute paths");
    refused("#define E \"/proc/self/environ\"\n#include E\n", "computed");
    refused("#define S(...) #__VA_ARGS__\n__device__ const char *e = S(\n"
            "#include \"/proc/self/environ\"\n);\n",
            "include policy");
}

static void working_directory_is_not_searched(void **state)
{
    (void)state;
    char cwd[4096];
    assert_non_null(getcwd(cwd, sizeof cwd));
    assert_int_equal(chdir(outside), 0);
    refused("#include \"secret.txt\"\n", "was not found");
    refused("#if __has_include(\"secret.txt\")\n#error found\n#endif\n__global__ void k() {}\n"
            "__device__ int x = ;\n",
            "error");
    assert_int_equal(chdir(cwd), 0);
}

static void headers_of_include_dirs(void **state)
{
    (void)state;
    refused("#include \"bad_abs.cuh\"\n", "bad_abs.cuh(2): error: include policy");
    refused("#include \"bad_rel.cuh\"\n", "bad_rel.cuh(2): error: include policy");
    refused("#include <bad_angle.cuh>\n", "bad_angle.cuh(2): error: include policy");
    refused("#include \"bad_computed.cuh\"\n", "computed name is refused");
    /* symbolic links inside an allowed directory that lead out of it */
    refused("#include \"link.cuh\"\n", "resolves outside the allowed directories");
    refused("#include \"linkdir/secret.txt\"\n", "resolves outside the allowed directories");
    refused("#if __has_include(\"link.cuh\")\n#endif\n", "resolves outside");
    /* a directory the caller should never hand over */
    kr_context *ctx = test_context(NULL);
    const char *slash[] = {"/"}, *proc[] = {"/proc/self"};
    kr_compile_options o = opts_with(slash, 1, NULL);
    kr_program *p = NULL;
    assert_int_equal(kr_compile(&p, ctx, "__global__ void k() {}\n", 0, &o), KR_EINVAL);
    o.include_dirs = proc;
    assert_int_equal(kr_compile(&p, ctx, "__global__ void k() {}\n", 0, &o), KR_EINVAL);
    const char *extra[] = {"-I/"};
    o = opts_with(NULL, 0, NULL);
    o.extra_options = extra;
    o.num_extra_options = 1;
    assert_int_equal(kr_compile(&p, ctx, "__global__ void k() {}\n", 0, &o), KR_EINVAL);
    assert_contains(kr_context_errmsg(ctx), "include_dirs");
    kr_context_free(ctx);
}

/* Thrust builds include names out of macros; a candidate may not steer
 * them (the name would be whatever it defines, e.g. an absolute path). */
static void toolkit_computed_includes(void **state)
{
    (void)state;
    char text[4400];
    snprintf(text, sizeof text,
             "#include <thrust/detail/config/device_system.h>\n"
             "#undef __THRUST_DEVICE_SYSTEM_ROOT\n#define __THRUST_DEVICE_SYSTEM_ROOT %s/..\n"
             "#include <cub/block/block_reduce.cuh>\n",
             outside);
    refused(text, "__THRUST_DEVICE_SYSTEM_ROOT is refused: a toolkit header builds");
}

/* A toolkit laid out with include/cccl a symbolic link to elsewhere (as
 * some installations are): headers there are found and contained there; a
 * link in the toolkit that leads out of it is not followed. */
static void toolkit_with_linked_cccl(void **state)
{
    (void)state;
    char *home = join(root, "fake-cuda"), *inc = join(home, "include"), *real = join(root, "cccl");
    char *sub = join(real, "fake");
    assert_int_equal(mkdir(home, 0700), 0);
    assert_int_equal(mkdir(inc, 0700), 0);
    assert_int_equal(mkdir(real, 0700), 0);
    assert_int_equal(mkdir(sub, 0700), 0);
    char *link = join(inc, "cccl");
    assert_int_equal(symlink(real, link), 0);
    test_write_file(sub, "x.h", "#pragma once\n#include \"y.h\"\n");
    test_write_file(sub, "y.h", "#define FAKE_Y 3\n");
    char *evil = join(inc, "evil.h");
    assert_int_equal(symlink(secret_path, evil), 0);

    kr_context *warm = test_context(NULL); /* NVRTC is loaded from the real toolkit */
    kr_program *p = NULL;
    assert_int_equal(kr_compile(&p, warm, "__global__ void k() {}\n", 0, NULL), KR_OK);
    kr_program_free(p);
    kr_context_free(warm);

    kr_context_options co;
    kr_context_options_init(&co, KR_CONTEXT_OPTIONS_VERSION);
    co.flags = KR_CONTEXT_NO_DEVICE;
    co.cuda_home = home;
    kr_context *ctx = NULL;
    assert_int_equal(kr_context_new(&ctx, &co), KR_OK);
    kr_compile_options o = opts_with(NULL, 0, NULL);
    if (kr_compile(&p, ctx, "#include <fake/x.h>\nstatic_assert(FAKE_Y == 3, \"y\");\n", 0, &o) !=
        KR_OK)
        fail_msg("%s\n%s", kr_context_errmsg(ctx), kr_context_errdetail(ctx));
    kr_program_free(p);
    assert_int_equal(kr_compile(&p, ctx, "#include <evil.h>\n", 0, &o), KR_ECOMPILE);
    assert_contains(kr_context_errmsg(ctx), "resolves outside the allowed directories");
    no_secret(ctx, NULL);
    kr_context_free(ctx);
    free(evil);
    free(link);
    free(sub);
    free(real);
    free(inc);
    free(home);
}

/* ---- what must compile ---- */

static void compiles_with(const char *src, const kr_compile_options *o)
{
    kr_context *ctx = test_context(NULL);
    kr_program *p = NULL;
    if (kr_compile(&p, ctx, src, 0, o) != KR_OK)
        fail_msg("compile failed: %s\n%s\nfor:\n%s", kr_context_errmsg(ctx),
                 kr_context_errdetail(ctx), src);
    no_secret(ctx, p);
    kr_program_free(p);
    kr_context_free(ctx);
}

static void compiles(const char *src)
{
    kr_compile_options o = opts_with(NULL, 0, NULL);
    compiles_with(src, &o);
}

static void every_shim_alone(void **state)
{
    (void)state;
    for (size_t i = 0; i < kr__shim_count(); i++) {
        const char *text;
        size_t len;
        const char *name = kr__shim_at(i, &text, &len);
        char expect[96], src[160];
        /* the build's table and the files agree */
        snprintf(expect, sizeof expect, "libkreward shim <%s>", name);
        assert_non_null(memmem(text, len, expect, strlen(expect)));
        snprintf(src, sizeof src, "#include <%s>\n__global__ void k() {}\n", name);
        compiles(src);
    }
}

static void shims_in_use(void **state)
{
    (void)state;
    compiles("#include <cstdio>\n#include <stdio.h>\n"
             "__global__ void k() { printf(\"%d\\n\", (int)threadIdx.x);\n"
             "  std::printf(\"x\\n\"); }\n");
    compiles("#include <cstdint>\n#include <stdint.h>\n"
             "__global__ void k(uint32_t *a, std::int64_t *b, uint8_t *c) {\n"
             "  a[0] = UINT32_MAX; b[0] = INT64_C(1) << 40; c[0] = UINT8_MAX; }\n");
    compiles("#include <cmath>\n"
             "__global__ void k(float *x, double *d) {\n"
             "  x[0] = std::exp(x[1]) + std::sqrt(x[2]) + std::fabs(x[3]) + std::tanh(x[4]);\n"
             "  x[1] = std::max(x[0], 1.0f) + std::min(2.0f, x[0]) + std::fmax(x[0], x[1]);\n"
             "  x[2] = std::isnan(x[0]) ? INFINITY : (float)M_PI; d[0] = std::pow(d[1], 2.0);\n"
             "  x[3] = std::abs(-x[3]) + HUGE_VALF + NAN; }\n");
    compiles("#include <cmath>\nusing namespace std;\n"
             "__global__ void k(float *x) { x[0] = exp(x[1]) + max(x[0], x[1]) + sqrt(2.0f); }\n");
    compiles("#include <math.h>\n"
             "__global__ void k(float *x) { x[0] = expf(x[1]) * (float)M_PI + fabsf(x[2]); }\n");
    compiles("#include <cfloat>\n#include <float.h>\n#include <climits>\n#include <limits.h>\n"
             "__global__ void k(float *x, int *i) {\n"
             "  x[0] = FLT_MAX; x[1] = -FLT_MAX + FLT_EPSILON + (float)DBL_EPSILON + FLT_MIN;\n"
             "  i[0] = INT_MAX; i[1] = INT_MIN + CHAR_BIT + (int)(UINT_MAX & 1); }\n");
    compiles("#include <cstddef>\n#include <stddef.h>\n"
             "struct S { int a; float b; };\n"
             "__global__ void k(std::size_t *n, std::ptrdiff_t d) {\n"
             "  n[0] = offsetof(S, b) + sizeof(std::max_align_t) + (std::size_t)d;\n"
             "  std::nullptr_t z = nullptr; (void)z; }\n");
    compiles("#include <cstdlib>\n#include <stdlib.h>\n"
             "__global__ void k(int *x) { x[0] = std::abs(x[1]) + abs(x[2]) + (int)llabs(-3LL);\n"
             "  int *p = (int *)malloc(16); if (p) { p[0] = 1; free(p); } }\n");
    compiles("#include <cassert>\n"
             "__global__ void k(int *x) { assert(x != nullptr); x[0] = 1; }\n");
    compiles("#define NDEBUG\n#include <assert.h>\n"
             "__global__ void k(int *x) { assert(this_is_not_evaluated); x[0] = 1; }\n");
    compiles("#include <type_traits>\n#include <limits>\n#include <utility>\n"
             "template <class T, class = std::enable_if_t<std::is_floating_point<T>::value>>\n"
             "__device__ T big() { return std::numeric_limits<T>::max(); }\n"
             "__global__ void k(float *x) {\n"
             "  static_assert(std::is_same_v<float, std::remove_cv_t<const float>>, \"tt\");\n"
             "  float a = big<float>(), b = std::numeric_limits<float>::infinity();\n"
             "  std::swap(a, b); std::pair<float, int> p = std::make_pair(a, 1);\n"
             "  x[0] = std::move(p.first) + b; }\n");
    compiles("#include <algorithm>\n#include <array>\n#include <cstring>\n"
             "__global__ void k(float *x) {\n"
             "  std::array<float, 4> a{}; a[0] = std::clamp(x[0], 0.0f, 1.0f);\n"
             "  x[1] = std::max({a[0], x[1], 2.0f}) + std::min(a[0], x[2]);\n"
             "  std::memcpy(x + 2, a.data(), sizeof(float)); memset(x + 3, 0, 4); }\n");
}

static void toolkit_headers(void **state)
{
    (void)state;
    compiles("#include <cuda_fp16.h>\n#include <cuda_bf16.h>\n"
             "__global__ void k(__half *h, __nv_bfloat16 *b) {\n"
             "  b[0] = __float2bfloat16(__half2float(h[0]) * 2.0f); }\n");
    compiles("#include <cuda/std/cstdint>\n"
             "__global__ void k(cuda::std::uint64_t *x) { x[0] = 1; }\n");
    compiles("#include <cuda_runtime.h>\n#include <cooperative_groups.h>\n"
             "namespace cg = cooperative_groups;\n"
             "__global__ void k(float *x) { cg::thread_block b = cg::this_thread_block();\n"
             "  x[b.thread_rank()] = 1.0f; b.sync(); }\n");
    compiles("#if __has_include(<cuda_fp16.h>) && !__has_include(<no_such_header.h>)\n"
             "#include <cuda_fp16.h>\n#else\n#error has_include is wrong\n#endif\n"
             "__global__ void k(__half *h) { h[0] = __float2half(1.0f); }\n");
}

/* cub's block primitives reach Thrust's computed includes: their
 * expansions are provided in memory. */
static void cub_block_reduce(void **state)
{
    (void)state;
    compiles("#include <cub/block/block_reduce.cuh>\n"
             "__global__ void k(const float *x, float *y) {\n"
             "  using R = cub::BlockReduce<float, 128>;\n"
             "  __shared__ typename R::TempStorage t;\n"
             "  float s = R(t).Sum(x[threadIdx.x]);\n"
             "  if (threadIdx.x == 0) y[0] = s; }\n");
}

static void caller_include_dir(void **state)
{
    (void)state;
    const char *dirs[] = {incdir};
    kr_compile_options o = opts_with(dirs, 1, NULL);
    const char *src = "#include \"ok.cuh\"\n#include <ok.cuh>\n#include \"./ok.cuh\"\n"
                      "extern \"C\" __global__ void k(float *x) { x[0] = twice(x[0]); }\n";
    compiles_with(src, &o);
    /* the directories are part of the cache key */
    kr_context *ctx = test_context(NULL);
    kr_program *a = NULL, *b = NULL;
    o.flags = 0;
    assert_int_equal(kr_compile(&a, ctx, src, 0, &o), KR_OK);
    assert_int_equal(kr_compile(&b, ctx, src, 0, &o), KR_OK);
    assert_int_equal(kr_program_cache_result(b), KR_CACHE_MEMORY);
    assert_string_equal(kr_program_hash(a), kr_program_hash(b));
    kr_program_free(b);
    const char *two[] = {incdir, outside};
    o.include_dirs = two;
    o.num_include_dirs = 2;
    assert_int_equal(kr_compile(&b, ctx, src, 0, &o), KR_OK);
    assert_string_not_equal(kr_program_hash(a), kr_program_hash(b));
    kr_program_free(a);
    kr_program_free(b);
    kr_context_free(ctx);
}

/* ---- logs ---- */

static void log_keeps_only_the_candidates_lines(void **state)
{
    (void)state;
    kr_context *ctx = test_context(NULL);
    kr_program *p = NULL;
    const char *src = "#include <cuda/std/array>\n__global__ void k(int *o) {\n"
                      "  cuda::std::array<int, 2> a{1, 2};\n"
                      "  o[0] = cuda::std::get<5>(a);\n  o[1] = undeclared_name;\n}\n";
    assert_int_equal(kr_compile(&p, ctx, src, 0, NULL), KR_ECOMPILE);
    const char *log = kr_context_errdetail(ctx);
    assert_contains(log, "withheld by libkreward");
    assert_contains(log, "reached from candidate.cu line 4");
    assert_false(contains(log, "static_assert"));      /* the header's line */
    assert_false(contains(log, "Index out of bounds")); /* the header's message */
    assert_contains(log, "candidate.cu(5): error: identifier \"undeclared_name\" is undefined");
    assert_contains(log, "  o[1] = undeclared_name;"); /* the candidate's own line stays */

    const char *dirs[] = {incdir};
    kr_compile_options o = opts_with(dirs, 1, NULL);
    assert_int_equal(kr_compile(&p, ctx, "#include \"err.cuh\"\n", 0, &o), KR_ECOMPILE);
    assert_false(contains(kr_context_errdetail(ctx), "KRMARK"));
    assert_false(contains(kr_context_errmsg(ctx), "KRMARK"));
    assert_contains(kr_context_errdetail(ctx), "err.cuh(1): error: [withheld");
    kr_context_free(ctx);
}

static void logs_are_capped(void **state)
{
    (void)state;
    kr_context *ctx = test_context(NULL);
    kr_compile_options o = opts_with(NULL, 0, NULL);
    o.max_log_bytes = 2000;
    char *src = malloc(200 * 40 + 1);
    src[0] = '\0';
    for (int i = 0; i < 200; i++)
        strcat(src, "__device__ int bad_line = ;\n");
    kr_program *p = NULL;
    assert_int_equal(kr_compile(&p, ctx, src, 0, &o), KR_ECOMPILE);
    assert_true(strlen(kr_context_errdetail(ctx)) < 2200);
    assert_contains(kr_context_errdetail(ctx), "compile log cut");
    /* a successful compile's flood of pragma messages too */
    strcpy(src, "#define M _Pragma(\"message(\\\"flood flood flood flood\\\")\")\n"
                "#define M4 M M M M\n#define M16 M4 M4 M4 M4\n#define M64 M16 M16 M16 M16\n"
                "M64 M64 M64 M64\n__global__ void k() {}\n");
    assert_int_equal(kr_compile(&p, ctx, src, 0, &o), KR_OK);
    assert_true(strlen(kr_program_log(p)) < 2200);
    kr_program_free(p);
    free(src);
    /* refusals by the policy are capped as well */
    char *many = malloc(300 * 40 + 1);
    many[0] = '\0';
    for (int i = 0; i < 300; i++)
        strcat(many, "#include \"/etc/hostname\"\n");
    assert_int_equal(kr_compile(&p, ctx, many, 0, &o), KR_ECOMPILE);
    assert_true(strlen(kr_context_errdetail(ctx)) < 2200);
    free(many);
    kr_context_free(ctx);
}

static void no_time_limit_when_negative(void **state)
{
    (void)state;
    kr_context *ctx = test_context(NULL);
    kr_compile_options o = opts_with(NULL, 0, NULL);
    o.time_limit_s = -1;
    kr_program *p = NULL;
    assert_int_equal(kr_compile(&p, ctx, "__global__ void k() {}\n", 0, &o), KR_OK);
    kr_program_free(p);
    kr_context_free(ctx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(absolute_paths),
        cmocka_unit_test(dot_dot),
        cmocka_unit_test(computed_include),
        cmocka_unit_test(include_in_macro_arguments),
        cmocka_unit_test(has_include_probes),
        cmocka_unit_test(pragmas),
        cmocka_unit_test(other_directives),
        cmocka_unit_test(lexical_disguises),
        cmocka_unit_test(language_modes),
        cmocka_unit_test(second_look),
        cmocka_unit_test(process_environment),
        cmocka_unit_test(working_directory_is_not_searched),
        cmocka_unit_test(headers_of_include_dirs),
        cmocka_unit_test(toolkit_computed_includes),
        cmocka_unit_test(toolkit_with_linked_cccl),
        cmocka_unit_test(every_shim_alone),
        cmocka_unit_test(shims_in_use),
        cmocka_unit_test(toolkit_headers),
        cmocka_unit_test(cub_block_reduce),
        cmocka_unit_test(caller_include_dir),
        cmocka_unit_test(log_keeps_only_the_candidates_lines),
        cmocka_unit_test(logs_are_capped),
        cmocka_unit_test(no_time_limit_when_negative),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
