/* Programs from binaries: CUBIN (ELF) and PTX, and what is not either. */
#include "helpers.h"

#include "compile/program_impl.h"
#include "driver/context_impl.h"

static const char *SRC =
    "extern \"C\" __global__ void mix(const double* a, char c, float s, long long n, short h) {}\n"
    "extern \"C\" __global__ void other(int* x) { x[0] = 1; }\n";

static kr_program *compile_for(kr_context *ctx, const char *arch)
{
    kr_compile_options o;
    kr_compile_options_init(&o, KR_COMPILE_OPTIONS_VERSION);
    o.arch = arch;
    kr_program *p = NULL;
    assert_int_equal(kr_compile(&p, ctx, SRC, 0, &o), KR_OK);
    return p;
}

static void expect_params(const kr_program *p, const char *kernel, const uint32_t *sizes,
                          const uint32_t *offsets, size_t n)
{
    size_t k = kr_program_find_kernel(p, kernel);
    assert_int_not_equal(k, SIZE_MAX);
    assert_int_equal(kr_program_kernel_attr(p, k, KR_KERNEL_NUM_PARAMS), (int64_t)n);
    for (size_t i = 0; i < n; i++) {
        uint32_t off, size;
        assert_int_equal(kr_program_kernel_param(&off, &size, p, k, i), KR_OK);
        assert_int_equal(size, sizes[i]);
        assert_int_equal(off, offsets[i]);
    }
}

static const uint32_t MIX_SIZES[] = {8, 1, 4, 8, 2};
static const uint32_t MIX_OFFSETS[] = {0, 8, 12, 16, 24};

static void cubin_roundtrip(void **state)
{
    (void)state;
    kr_context *ctx = test_context(NULL);
    kr_program *src = compile_for(ctx, "sm_90a");
    size_t len;
    const void *img = image_of(src, &len, NULL);
    kr_program *bin = NULL;
    assert_int_equal(kr_program_from_binary(&bin, ctx, img, len, "mix.cubin"), KR_OK);
    assert_int_equal(kr_program_kernel_count(bin), 2);
    assert_string_equal(kr_program_arch(bin), "sm_90");
    assert_int_equal(kr_program_cache_result(bin), KR_CACHE_SKIPPED);
    expect_params(bin, "mix", MIX_SIZES, MIX_OFFSETS, 5);
    expect_params(src, "mix", MIX_SIZES, MIX_OFFSETS, 5);
    kr_program_free(src);
    kr_program_free(bin);
    kr_context_free(ctx);
}

static void ptx_roundtrip(void **state)
{
    (void)state;
    kr_context *ctx = test_context(NULL);
    kr_program *src = compile_for(ctx, "compute_90a");
    size_t len;
    const void *img = image_of(src, &len, NULL);
    kr_program *bin = NULL;
    assert_int_equal(kr_program_from_binary(&bin, ctx, img, len, "mix.ptx"), KR_OK);
    assert_string_equal(kr_program_arch(bin), "sm_90a");
    expect_params(bin, "mix", MIX_SIZES, MIX_OFFSETS, 5);
    kr_program_free(src);
    kr_program_free(bin);
    kr_context_free(ctx);
}

static void ptx_by_hand(void **state)
{
    (void)state;
    /* Triton-style PTX: aligned byte arrays, a commented-out entry */
    static const char ptx[] =
        ".version 8.7\n.target sm_90a\n.address_size 64\n"
        "// .entry ghost(.param .u64 p)\n"
        "/* .entry ghost2( .param .u32 q ) */\n"
        ".visible .entry tri_kernel(\n"
        "  .param .u64 .ptr .global .align 1 tri_kernel_param_0,\n"
        "  .param .u32 tri_kernel_param_1,\n"
        "  .param .align 8 .b8 tri_kernel_param_2[16],\n"
        "  .param .u8 tri_kernel_param_3\n"
        ")\n{\n ret;\n}\n";
    kr_context *ctx = test_context(NULL);
    kr_program *p = NULL;
    assert_int_equal(kr_program_from_binary(&p, ctx, ptx, sizeof ptx - 1, "tri.ptx"), KR_OK);
    assert_int_equal(kr_program_kernel_count(p), 1);
    static const uint32_t sizes[] = {8, 4, 16, 1}, offsets[] = {0, 8, 16, 32};
    expect_params(p, "tri_kernel", sizes, offsets, 4);
    kr_program_free(p);
    kr_context_free(ctx);
}

static void not_a_binary(void **state)
{
    (void)state;
    kr_context *ctx = test_context(NULL);
    kr_program *p = NULL;
    assert_int_equal(kr_program_from_binary(&p, ctx, "hello world", 11, "x.bin"), KR_EPARSE);
    assert_contains(kr_context_errmsg(ctx), "neither a CUBIN");
    assert_int_equal(kr_program_from_binary(&p, ctx, "", 0, "x.bin"), KR_EINVAL);

    /* an x86-64 ELF is not a CUDA binary */
    size_t n = 0;
    FILE *f = fopen("/proc/self/exe", "rb");
    assert_non_null(f);
    unsigned char head[4096];
    n = fread(head, 1, sizeof head, f);
    fclose(f);
    assert_int_equal(kr_program_from_binary(&p, ctx, head, n, "exe"), KR_EPARSE);
    assert_contains(kr_context_errmsg(ctx), "not a CUDA binary");

    /* a truncated CUBIN */
    kr_program *src = compile_for(ctx, "sm_90a");
    size_t len;
    const unsigned char *img = image_of(src, &len, NULL);
    for (size_t cut = 16; cut < len; cut += len / 7) {
        int rc = kr_program_from_binary(&p, ctx, img, cut, "cut.cubin");
        assert_int_not_equal(rc, KR_OK);
        assert_null(p);
    }
    /* a fatbinary header */
    static const unsigned char fatbin[16] = {0x50, 0xed, 0x55, 0xba, 1, 0, 16, 0};
    assert_int_equal(kr_program_from_binary(&p, ctx, fatbin, sizeof fatbin, "f.fatbin"),
                     KR_EUNSUPPORTED);
    kr_program_free(src);
    kr_context_free(ctx);
}

static void corrupted_cubin_never_crashes(void **state)
{
    (void)state;
    kr_context *ctx = test_context(NULL);
    kr_program *src = compile_for(ctx, "sm_90a");
    size_t len;
    const unsigned char *img = image_of(src, &len, NULL);
    unsigned char *copy = malloc(len);
    srand(7);
    for (int round = 0; round < 300; round++) {
        memcpy(copy, img, len);
        for (int flips = 0; flips < 8; flips++)
            copy[4 + (size_t)rand() % (len - 4)] = (unsigned char)rand();
        kr_program *p = NULL;
        int rc = kr_program_from_binary(&p, ctx, copy, len, "fuzzed.cubin");
        assert_true(rc == KR_OK || rc == KR_EPARSE || rc == KR_ENOTFOUND);
        kr_program_free(p);
    }
    free(copy);
    kr_program_free(src);
    kr_context_free(ctx);
}

/* Writable device globals and constants are found in the image without a
 * device (the engine resets them before every call), in CUBIN and PTX
 * alike; the device
 * heap and managed variables make a program inadmissible as a candidate. */
static const char *STATEFUL =
    "__device__ int counter;\n"
    "__device__ int table[4] = {1, 2, 3, 4};\n"
    "static __device__ unsigned long long hidden;\n"
    "namespace { __device__ int anon; }\n"
    "__constant__ float cst[8];\n"
    "extern \"C\" __global__ void k(float *y) {\n"
    "  static __device__ int in_function;\n"
    "  counter++; hidden++; anon++; in_function++;\n"
    "  y[0] = table[counter & 3] + cst[0] + hidden + anon + in_function; }\n";

static int has_global(const kr_program *p, const char *part)
{
    for (size_t i = 0; i < p->facts.num_globals; i++)
        if (strstr(p->facts.globals[i].name, part))
            return 1;
    return 0;
}

static void globals_and_heap(void **state)
{
    (void)state;
    kr_context *ctx = test_context(NULL);
    const char *arch[] = {"sm_90a", "compute_90a"};
    for (int a = 0; a < 2; a++) {
        kr_compile_options o;
        kr_compile_options_init(&o, KR_COMPILE_OPTIONS_VERSION);
        o.arch = arch[a];
        kr_program *p = NULL;
        assert_int_equal(kr_compile(&p, ctx, STATEFUL, 0, &o), KR_OK);
        const char *names[] = {"counter", "table", "hidden", "anon", "in_function"};
        for (size_t i = 0; i < 5; i++)
            if (!has_global(p, names[i]))
                fail_msg("%s: global '%s' not found", arch[a], names[i]);
        /* a constant is device memory a generic store can change: reset too */
        if (!has_global(p, "cst"))
            fail_msg("%s: constant 'cst' not found", arch[a]);
        assert_true(p->facts.num_groups >= (a == 0 ? 3u : 6u));
        assert_false(p->facts.uses_heap);
        assert_int_equal(kr__program_admissible(ctx, p), KR_OK);
        kr_program_free(p);

        const char *heap = "extern \"C\" __global__ void k(float *y) {\n"
                           "  float *b = (float *)malloc(16); b[0] = 1; y[0] = b[0]; free(b); }\n";
        assert_int_equal(kr_compile(&p, ctx, heap, 0, &o), KR_OK);
        assert_true(p->facts.uses_heap);
        assert_int_equal(kr__program_admissible(ctx, p), KR_ECOMPILE);
        assert_contains(kr_context_errmsg(ctx), "device malloc");
        kr_program_free(p);

        /* device printf: noted (verification's deadline is then the
         * caller's timeout: the run waits on the host's draining), admitted */
        p = NULL;
        const char *print = "#include <cstdio>\n"
                            "extern \"C\" __global__ void k(float *y) { printf(\"%f\\n\", y[0]); }\n";
        assert_int_equal(kr_compile(&p, ctx, print, 0, &o), KR_OK);
        assert_true(p->facts.uses_printf);
        assert_false(p->facts.uses_heap);
        assert_int_equal(kr__program_admissible(ctx, p), KR_OK);
        kr_program_free(p);
        assert_int_equal(kr_compile(&p, ctx, heap, 0, &o), KR_OK);
        assert_false(p->facts.uses_printf);
        kr_program_free(p);
    }
    kr_compile_options o;
    kr_compile_options_init(&o, KR_COMPILE_OPTIONS_VERSION);
    kr_program *p = NULL;
    assert_int_equal(kr_compile(&p, ctx, "__device__ __managed__ int m;\n"
                                "extern \"C\" __global__ void k(int *y) { y[0] = m++; }\n", 0, &o),
                     KR_OK);
    assert_true(p->facts.has_managed);
    assert_int_equal(kr__program_admissible(ctx, p), KR_ECOMPILE);
    assert_contains(kr_context_errmsg(ctx), "__managed__");
    kr_program_free(p);
    kr_context_free(ctx);
}

/* Constants and writes past a symbol, as the image says them (no device):
 * a lone `static __constant__` table and an anonymous-namespace constant
 * are constants of their bank, alone there (the driver may not find such a
 * symbol by name, and two others of its section are needed to place it from
 * the layout: globals.c must not refuse the program for it). A one-element
 * `__device__` array written at c[32] lands 128 bytes into the alignment
 * padding before the next 256-byte-aligned variable of its section, and a
 * `__constant__`'s generic address plus 64 bytes into its bank's padding
 * likewise: in no symbol, inside the module's section, which globals.c
 * restores whole. The compiler's bank of relocated pointers
 * (`.nv.constant4`, no symbol) is recorded too. */
static const char *LONE_CONSTANT =
    "static __constant__ float coeff[4] = {0.5f, 1.5f, 2.5f, 3.5f};\n"
    "extern \"C\" __global__ void k(const float *a, float *c, long long n) {\n"
    "  long long i = blockIdx.x * 256ll + threadIdx.x; if (i < n) c[i] = a[i] * coeff[i & 3]; }\n";
static const char *ANON_CONSTANT =
    "namespace { __constant__ float scale[2] = {1.f, 2.f}; }\n"
    "extern \"C\" __global__ void k(const float *a, float *c, long long n) {\n"
    "  long long i = blockIdx.x * 256ll + threadIdx.x; if (i < n) c[i] = a[i] * scale[i & 1]; }\n";
static const char *SLACK =
    "__device__ __align__(256) unsigned c[1];\n"
    "__device__ __align__(256) unsigned after[1];\n"
    "__constant__ __align__(256) unsigned calls;\n"
    "__constant__ __align__(256) unsigned later = 7;\n"
    "extern \"C\" __global__ void k(const float *a, float *o, long long n) {\n"
    "  long long i = blockIdx.x * 256ll + threadIdx.x;\n"
    "  unsigned v = ((volatile unsigned *)c)[32] + calls + after[0] + later;\n"
    "  if (i < n) o[i] = (v & 1) ? 0.f : a[i]; }\n"
    "extern \"C\" __global__ void tick() {\n"
    "  ((volatile unsigned *)c)[32]++;\n"
    "  unsigned long long q; asm(\"cvta.const.u64 %0, calls;\" : \"=l\"(q));\n"
    "  ((volatile unsigned *)q)[16]++; }\n";

static kr_program *compile_src(kr_context *ctx, const char *src, const char *arch)
{
    kr_compile_options o;
    kr_compile_options_init(&o, KR_COMPILE_OPTIONS_VERSION);
    o.arch = arch;
    kr_program *p = NULL;
    if (kr_compile(&p, ctx, src, 0, &o) != KR_OK)
        fail_msg("%s", kr_context_errmsg(ctx));
    return p;
}

/* the global named `part`, else the first whose (mangled) name holds it */
static const kr__image_global *global_named(const kr_program *p, const char *part)
{
    for (size_t i = 0; i < p->facts.num_globals; i++)
        if (!strcmp(p->facts.globals[i].name, part))
            return &p->facts.globals[i];
    for (size_t i = 0; i < p->facts.num_globals; i++)
        if (strstr(p->facts.globals[i].name, part))
            return &p->facts.globals[i];
    fail_msg("no global '%s'", part);
    return NULL;
}

static const kr__image_group *group_of_global(const kr_program *p, const kr__image_global *g)
{
    for (size_t i = 0; i < p->facts.num_groups; i++)
        if (p->facts.groups[i].id == g->group)
            return &p->facts.groups[i];
    fail_msg("global '%s' has no group", g->name);
    return NULL;
}

static size_t members_of(const kr_program *p, uint32_t group)
{
    size_t n = 0;
    for (size_t i = 0; i < p->facts.num_globals; i++)
        n += p->facts.globals[i].group == group;
    return n;
}

/* the constant `part` of p: in a user constant bank (CUBIN), or a PTX .const;
 * in a CUBIN alone in its bank, at its start, `size` bytes */
static void expect_lone_constant(const kr_program *p, int cubin, const char *part, uint64_t size)
{
    const kr__image_global *g = global_named(p, part);
    const kr__image_group *gr = group_of_global(p, g);
    if (cubin) {
        assert_int_equal(strncmp(gr->name, ".nv.constant", 12), 0);
        assert_int_not_equal(strncmp(gr->name, ".nv.constant0", 13), 0);
        assert_int_equal(g->offset, 0);
        assert_int_equal(g->size, size);
        assert_int_equal(gr->size, size);
        assert_int_equal(members_of(p, g->group), 1);
    } else {
        assert_int_equal(strncmp(gr->name, ".const ", 7), 0);
    }
}

/* the 4 bytes `delta` past the start of g lie inside g's section and in
 * none of its symbols: padding, restored only with the section */
static void expect_padding(const kr_program *p, const kr__image_global *g, uint64_t delta)
{
    const kr__image_group *gr = group_of_global(p, g);
    uint64_t at = g->offset + delta;
    assert_true(at + 4 <= gr->size);
    for (size_t i = 0; i < p->facts.num_globals; i++) {
        const kr__image_global *o = &p->facts.globals[i];
        if (o->group == g->group && o->offset < at + 4 && at < o->offset + o->size)
            fail_msg("%s + %llu is in '%s'", g->name, (unsigned long long)delta, o->name);
    }
}

static void constants_and_slack_facts(void **state)
{
    (void)state;
    kr_context *ctx = test_context(NULL);
    const char *arch[] = {"sm_90a", "compute_90a"};
    for (int a = 0; a < 2; a++) {
        int cubin = a == 0;
        kr_program *p = compile_src(ctx, LONE_CONSTANT, arch[a]);
        assert_int_equal(p->facts.num_globals, 1);
        expect_lone_constant(p, cubin, "coeff", 16);
        assert_int_equal(kr__program_admissible(ctx, p), KR_OK);
        kr_program_free(p);

        p = compile_src(ctx, ANON_CONSTANT, arch[a]);
        assert_int_equal(p->facts.num_globals, 1);
        assert_non_null(strstr(global_named(p, "scale")->name, "_GLOBAL__N_")); /* internal */
        expect_lone_constant(p, cubin, "scale", 8);
        assert_int_equal(kr__program_admissible(ctx, p), KR_OK);
        kr_program_free(p);

        p = compile_src(ctx, SLACK, arch[a]);
        const kr__image_global *c = global_named(p, "c"), *calls = global_named(p, "calls");
        const kr__image_group *gc = group_of_global(p, c);
        if (cubin) {
            /* c[32] and calls + 64 bytes: padding of their own sections */
            assert_string_equal(gc->name, ".nv.global");
            assert_int_equal(c->size, 4);
            assert_ptr_equal(group_of_global(p, global_named(p, "after")), gc);
            expect_padding(p, c, 128);
            assert_int_equal(strncmp(group_of_global(p, calls)->name, ".nv.constant", 12), 0);
            assert_ptr_equal(group_of_global(p, global_named(p, "later")),
                             group_of_global(p, calls));
            expect_padding(p, calls, 64);
            /* a bank no symbol names (nvcc 13: relocated pointers) is a group
             * without globals */
            size_t len;
            const unsigned char *img = image_of(p, &len, NULL);
            int has_bank4 = 0;
            for (size_t i = 0; i + 14 <= len && !has_bank4; i++)
                has_bank4 = memcmp(img + i, ".nv.constant4\0", 14) == 0;
            int recorded = 0;
            for (size_t i = 0; i < p->facts.num_groups; i++)
                if (!strcmp(p->facts.groups[i].name, ".nv.constant4")) {
                    recorded = 1;
                    assert_int_equal(members_of(p, p->facts.groups[i].id), 0);
                    assert_true(p->facts.groups[i].size > 0);
                }
            assert_int_equal(recorded, has_bank4);
        } else {
            assert_string_equal(gc->name, ".global c");
            assert_string_equal(group_of_global(p, calls)->name, ".const calls");
        }
        /* the store lands 128 bytes into a 4-byte global */
        size_t ptx_len;
        const char *ptx = kr__program_ptx(p, &ptx_len);
        assert_non_null(ptx);
        assert_non_null(strstr(ptx, "[c+128]"));
        assert_int_equal(kr__program_admissible(ctx, p), KR_OK);
        kr_program_free(p);
    }
    kr_context_free(ctx);
}

/* globals.c against a driver played by the test: 256 KiB of host memory as
 * the device, two allocations (constant banks, globals) that modules'
 * sections are placed in where each test says, symbols the driver finds by
 * name per module, allocations it answers for (or not). Several modules
 * share an allocation, as a driver pooling module data would have them: what
 * restoring one covers, and what it must leave alone, on the CPU. */
#define FAKE_BASE ((CUdeviceptr)0x7f0000000000ull)
#define FAKE_K (FAKE_BASE + 0x1000)  /* constant banks' allocation (4 KiB) */
#define FAKE_G (FAKE_BASE + 0x2000)  /* globals' allocation (up to 248 KiB) */
#define MOD_A ((CUmodule)(uintptr_t)0x1)
#define MOD_B ((CUmodule)(uintptr_t)0x2)
static unsigned char fake_mem[1 << 18];
static struct {
    CUmodule mod;
    const char *name;
    CUdeviceptr addr;
    size_t bytes;
} fake_syms[32];
static size_t fake_nsyms;
static struct {
    CUdeviceptr base;
    size_t bytes;
} fake_allocs[24];
static size_t fake_nallocs;
static int fake_ranges; /* 0: the driver answers no range query */
/* 1: the driver's copies refuse bytes outside the allocations it answers
 * for (the H200's driver registers each .nv.global variable alone) */
static int fake_strict;
static size_t fake_kernel_writes_made; /* fake_device_write calls */
static kr__cuda_api fake_saved;

static unsigned char *fake_at(CUdeviceptr a, size_t n)
{
    if (a < FAKE_BASE || a - FAKE_BASE >= sizeof fake_mem || n > sizeof fake_mem - (a - FAKE_BASE)) {
        fail_msg("access outside the fake device: 0x%llx + %zu", (unsigned long long)a, n);
        abort(); /* cmocka's fail may not say noreturn: gcc 13 -O3 then sees the access */
    }
    return fake_mem + (a - FAKE_BASE);
}

static CUresult fake_get_global(CUdeviceptr *d, size_t *b, CUmodule m, const char *name)
{
    for (size_t i = 0; i < fake_nsyms; i++)
        if (fake_syms[i].mod == m && !strcmp(fake_syms[i].name, name)) {
            *d = fake_syms[i].addr;
            *b = fake_syms[i].bytes;
            return CUDA_SUCCESS;
        }
    return CUDA_ERROR_NOT_FOUND;
}

static CUresult fake_range(CUdeviceptr *base, size_t *size, CUdeviceptr p)
{
    for (size_t i = 0; fake_ranges && i < fake_nallocs; i++)
        if (p >= fake_allocs[i].base && p - fake_allocs[i].base < fake_allocs[i].bytes) {
            *base = fake_allocs[i].base;
            *size = fake_allocs[i].bytes;
            return CUDA_SUCCESS;
        }
    return CUDA_ERROR_INVALID_VALUE;
}

/* Under fake_strict, whether [a, a + n) lies in one answered allocation. */
static int fake_copyable(CUdeviceptr a, size_t n)
{
    for (size_t i = 0; fake_strict && i < fake_nallocs; i++)
        if (a >= fake_allocs[i].base && a - fake_allocs[i].base <= fake_allocs[i].bytes &&
            n <= fake_allocs[i].bytes - (a - fake_allocs[i].base))
            return 1;
    return !fake_strict;
}

/* The engine's kernel write (ctx->device_write): reaches every byte. */
static int fake_device_write(kr_context *ctx, CUdeviceptr dst, const void *src, size_t n,
                             CUstream s)
{
    (void)ctx;
    (void)s;
    fake_kernel_writes_made++;
    if (src)
        memcpy(fake_at(dst, n), src, n);
    else
        memset(fake_at(dst, n), 0, n);
    return KR_OK;
}

static CUresult fake_dtoh(void *dst, CUdeviceptr src, size_t n)
{
    if (!fake_copyable(src, n))
        return CUDA_ERROR_INVALID_VALUE;
    memcpy(dst, fake_at(src, n), n);
    return CUDA_SUCCESS;
}

static CUresult fake_htod(CUdeviceptr dst, const void *src, size_t n, CUstream s)
{
    (void)s;
    if (!fake_copyable(dst, n))
        return CUDA_ERROR_INVALID_VALUE;
    memcpy(fake_at(dst, n), src, n);
    return CUDA_SUCCESS;
}

static CUresult fake_memset(CUdeviceptr dst, unsigned char v, size_t n, CUstream s)
{
    (void)s;
    if (!fake_copyable(dst, n))
        return CUDA_ERROR_INVALID_VALUE;
    memset(fake_at(dst, n), v, n);
    return CUDA_SUCCESS;
}

static void fake_driver_on(void)
{
    kr__cuda_api *cu = (kr__cuda_api *)kr__cuda(); /* the table is not const, only its view */
    fake_saved = *cu;
    cu->cuModuleGetGlobal = fake_get_global;
    cu->cuMemGetAddressRange = fake_range;
    cu->cuMemcpyDtoH = fake_dtoh;
    cu->cuMemcpyHtoDAsync = fake_htod;
    cu->cuMemsetD8Async = fake_memset;
    memset(fake_mem, 0, sizeof fake_mem);
    fake_nsyms = fake_nallocs = 0;
    fake_ranges = 1;
    fake_strict = 0;
    fake_kernel_writes_made = 0;
    fake_allocs[fake_nallocs].base = FAKE_G;
    fake_allocs[fake_nallocs++].bytes = 0x3e000;
    fake_allocs[fake_nallocs].base = FAKE_K;
    fake_allocs[fake_nallocs++].bytes = 0x1000;
}

static void fake_driver_off(void)
{
    *(kr__cuda_api *)kr__cuda() = fake_saved;
}

static void fake_symbol(CUmodule mod, const char *name, CUdeviceptr addr, size_t bytes)
{
    assert_true(fake_nsyms < sizeof fake_syms / sizeof fake_syms[0]);
    fake_syms[fake_nsyms].mod = mod;
    fake_syms[fake_nsyms].name = name;
    fake_syms[fake_nsyms].addr = addr;
    fake_syms[fake_nsyms++].bytes = bytes;
}

static CUdeviceptr fake_addr_of(CUmodule mod, const char *name)
{
    for (size_t i = 0; i < fake_nsyms; i++)
        if (fake_syms[i].mod == mod && !strcmp(fake_syms[i].name, name))
            return fake_syms[i].addr;
    fail_msg("'%s' not placed", name);
    return 0;
}

static uint32_t fake_u32(CUdeviceptr a)
{
    uint32_t v;
    memcpy(&v, fake_at(a, 4), 4);
    return v;
}

static void fake_set_u32(CUdeviceptr a, uint32_t v)
{
    memcpy(fake_at(a, 4), &v, 4);
}

static uint32_t bits_of(float x)
{
    uint32_t b;
    memcpy(&b, &x, 4);
    return b;
}

/* c with 252 bytes of padding after it in its section (up to `after`),
 * `calls` with 252 in its bank (up to `one`), an initialised table, and a
 * lone-looking static table beside `one` */
static const char *STATE =
    "__device__ __align__(256) unsigned c[1];\n"
    "__device__ __align__(256) unsigned after[1];\n"
    "__device__ int table[4] = {1, 2, 3, 4};\n"
    "__constant__ __align__(256) unsigned calls;\n"
    "__constant__ __align__(256) float one = 1.0f;\n"
    "static __constant__ float coeff[4] = {0.5f, 1.5f, 2.5f, 3.5f};\n"
    "extern \"C\" __global__ void k(float *y, int i) {\n"
    "  y[0] = c[0] + after[0] + table[i & 3] + calls + one + coeff[i & 3]; }\n";

/* Where a module's sections go: .nv.global.init, .nv.global, the constant
 * bank of its symbols, the bank no symbol names (found by its section name
 * when named_bank, else not at all). */
typedef struct {
    CUdeviceptr init, global, bank, unnamed;
    int named_bank;
} fake_where;

static const kr__image_group *fake_group(const kr_program *p, const char *which)
{
    for (size_t i = 0; i < p->facts.num_groups; i++) {
        const kr__image_group *gr = &p->facts.groups[i];
        int constant = !strncmp(gr->name, ".nv.constant", 12), members = members_of(p, gr->id) > 0;
        if (!strcmp(which, "bank") ? constant && members
            : !strcmp(which, "unnamed") ? constant && !members
                                        : !strcmp(gr->name, which))
            return gr;
    }
    return NULL;
}

static uint64_t fake_size(const kr_program *p, const char *which)
{
    const kr__image_group *gr = fake_group(p, which);
    return gr ? gr->size : 0;
}

static CUdeviceptr fake_base(const kr_program *p, const kr__image_group *gr, const fake_where *w)
{
    return gr == fake_group(p, ".nv.global.init") ? w->init
           : gr == fake_group(p, ".nv.global")    ? w->global
           : gr == fake_group(p, "bank")          ? w->bank
           : gr == fake_group(p, "unnamed")       ? w->unnamed
                                                  : 0;
}

/* A module as the fake device holds it at load: each global where w puts
 * its section (the driver finds it by name but `hidden`), the image's
 * initial values (table's plus `bias`), a "relocated pointer" in the bank
 * no symbol names. Not located yet: fake_locate. */
static kr_program *fake_prepare(kr_context *ctx, const char *src, CUmodule mod,
                                const fake_where *w, const char *hidden, uint32_t bias)
{
    kr_program *p = compile_src(ctx, src, "sm_90a");
    for (size_t i = 0; i < p->facts.num_globals; i++) {
        const kr__image_global *g = &p->facts.globals[i];
        CUdeviceptr at = fake_base(p, group_of_global(p, g), w) + g->offset;
        if (!hidden || strcmp(g->name, hidden))
            fake_symbol(mod, g->name, at, (size_t)g->size);
        for (uint32_t v = 0; v < g->size / 4; v++)
            fake_set_u32(at + 4 * v, strstr(g->name, "table") ? v + 1 + bias
                                     : strstr(g->name, "coeff") ? bits_of(0.5f + (float)v)
                                     : !strcmp(g->name, "one") ? bits_of(1.0f)
                                                               : 0);
    }
    const kr__image_group *unnamed = fake_group(p, "unnamed");
    if (unnamed) {
        fake_set_u32(w->unnamed, 0x12345678u + bias);
        if (w->named_bank)
            fake_symbol(mod, unnamed->name, w->unnamed, 0);
    }
    return p;
}

static void fake_locate(kr_program *p, CUmodule mod)
{
    p->module = mod; /* never used but by the fake */
    int rc_ = kr__program_locate_globals(p);
    if (rc_ != KR_OK)
        fail_msg("locating: %s", kr_context_errmsg(p->ctx));
}

static kr_program *fake_load(kr_context *ctx, const char *src, CUmodule mod, const fake_where *w,
                             const char *hidden, uint32_t bias)
{
    kr_program *p = fake_prepare(ctx, src, mod, w, hidden, bias);
    fake_locate(p, mod);
    return p;
}

static void fake_unload(kr_program *p)
{
    p->module = NULL;
    kr_program_free(p);
}

/* every region p restores lies inside one of its sections where w put them */
static void expect_inside_sections(const kr_program *p, const fake_where *w)
{
    for (size_t i = 0; i < p->num_regions; i++) {
        const kr__global_region *r = &p->regions[i];
        int inside = 0;
        for (size_t s = 0; s < p->facts.num_groups && !inside; s++) {
            const kr__image_group *gr = &p->facts.groups[s];
            CUdeviceptr base = fake_base(p, gr, w);
            inside = base && r->addr >= base && r->addr + r->bytes <= base + gr->size;
        }
        if (!inside)
            fail_msg("region 0x%llx + %zu is outside the module's sections",
                     (unsigned long long)r->addr, r->bytes);
    }
}

/* what a candidate's kernel leaves behind in module mod: its globals
 * changed, and bytes past them inside their sections (c[32], the
 * constant's generic address plus 64, the unnamed bank's pointer) */
static void fake_kernel_writes(CUmodule mod, const fake_where *w)
{
    CUdeviceptr c = fake_addr_of(mod, "c"), calls = fake_addr_of(mod, "calls");
    fake_set_u32(c, 7);
    fake_set_u32(c + 128, 1);
    fake_set_u32(fake_addr_of(mod, "table"), 99);
    fake_set_u32(calls, 3);
    fake_set_u32(calls + 64, 5);
    fake_set_u32(w->unnamed, 0);
}

/* mod's state as at load (table's initial values plus bias) */
static void expect_at_load(const kr_program *p, CUmodule mod, const fake_where *w, uint32_t bias,
                           int unnamed_restored)
{
    CUdeviceptr c = fake_addr_of(mod, "c"), calls = fake_addr_of(mod, "calls");
    assert_int_equal(fake_u32(c), 0);
    assert_int_equal(fake_u32(c + 128), 0);  /* past the array, in its section: restored */
    for (uint32_t v = 0; v < 4; v++)
        assert_int_equal(fake_u32(fake_addr_of(mod, "table") + 4 * v), v + 1 + bias);
    assert_int_equal(fake_u32(calls), 0);
    assert_int_equal(fake_u32(calls + 64), 0); /* past the constant, in its bank: restored */
    assert_int_equal(fake_u32(fake_addr_of(mod, "one")), bits_of(1.0f));
    if (fake_group(p, "unnamed"))
        assert_int_equal(fake_u32(w->unnamed), unnamed_restored ? 0x12345678u + bias : 0);
}

static void restores_own_sections(void **state)
{
    (void)state;
    kr_context *ctx = test_context(NULL);
    for (int ranges = 1; ranges >= 0; ranges--) {
        fake_driver_on();
        fake_ranges = ranges; /* 0: the driver answers no range query; the sections are
                               * restored all the same, as the image sizes them */
        fake_where wa = {FAKE_G, FAKE_G + 0x100, FAKE_K, FAKE_K + 0x800, 1};
        kr_program *a = fake_load(ctx, STATE, MOD_A, &wa, NULL, 0);
        assert_string_equal(a->refusal, "");
        assert_int_equal(a->global_bytes, 4 + 4 + 16 + 4 + 4 + 16);
        assert_true(fake_size(a, ".nv.global") >= 0x104);
        assert_true(fake_size(a, "bank") >= 0x104);
        expect_inside_sections(a, &wa);
        /* another module loaded after a's snapshot, into the same
         * allocations, each section right after a's: its initialised data
         * (table from 11, one, coeff, its pointer) written after a's load */
        fake_where wb = {wa.init + fake_size(a, ".nv.global.init"),
                         wa.global + fake_size(a, ".nv.global"), wa.bank + fake_size(a, "bank"),
                         wa.unnamed + fake_size(a, "unnamed"), 0};
        kr_program *b = fake_load(ctx, STATE, MOD_B, &wb, NULL, 10);
        expect_inside_sections(b, &wb);
        /* both modules' kernels ran; then a's next call restores a's state */
        fake_kernel_writes(MOD_B, &wb);
        fake_kernel_writes(MOD_A, &wa);
        assert_int_equal(kr__program_restore_globals(ctx, a, NULL), KR_OK);
        expect_at_load(a, MOD_A, &wa, 0, 1);
        /* b's bytes are b's: its state as its kernel left it, its data as
         * it loaded it (not the zeros a's snapshot saw there) */
        assert_int_equal(fake_u32(fake_addr_of(MOD_B, "c")), 7);
        assert_int_equal(fake_u32(fake_addr_of(MOD_B, "c") + 128), 1);
        assert_int_equal(fake_u32(fake_addr_of(MOD_B, "table")), 99);
        assert_int_equal(fake_u32(fake_addr_of(MOD_B, "table") + 4), 12);
        assert_int_equal(fake_u32(fake_addr_of(MOD_B, "calls")), 3);
        assert_int_equal(fake_u32(fake_addr_of(MOD_B, "calls") + 64), 5);
        assert_int_equal(fake_u32(fake_addr_of(MOD_B, "one")), bits_of(1.0f));
        assert_int_equal(fake_u32(fake_addr_of(MOD_B, "coeff")), bits_of(0.5f));
        /* b's unnamed bank, not found by name, is not restored by b
         * either: it escapes (docs/threat-model.md) */
        fake_set_u32(wb.unnamed + 4, 0xbbbbbbbbu);
        assert_int_equal(kr__program_restore_globals(ctx, b, NULL), KR_OK);
        expect_at_load(b, MOD_B, &wb, 10, 0);
        assert_int_equal(fake_u32(wb.unnamed + 4), 0xbbbbbbbbu);
        assert_int_equal(fake_u32(fake_addr_of(MOD_A, "table")), 1); /* a's, as a left it */
        fake_kernel_writes(MOD_A, &wa);
        assert_int_equal(kr__program_restore_globals(ctx, b, NULL), KR_OK);
        assert_int_equal(fake_u32(fake_addr_of(MOD_A, "c") + 128), 1);
        assert_int_equal(fake_u32(fake_addr_of(MOD_A, "calls") + 64), 5);
        fake_unload(b);
        fake_unload(a);
        fake_driver_off();
    }
    kr_context_free(ctx);
}

/* What the driver says bounds the section: never restored beyond the
 * allocation it reports; a layout it contradicts, the symbols alone. */
static void sections_within_what_the_driver_says(void **state)
{
    (void)state;
    kr_context *ctx = test_context(NULL);
    fake_where w = {FAKE_G, FAKE_G + 0x100, FAKE_K, FAKE_K + 0x800, 1};

    /* the globals' allocation ends 0xc0 bytes into c's section (before
     * `after`, which the driver does not place in any): the section up to
     * there, `after` alone, nothing past the allocation */
    fake_driver_on();
    fake_allocs[0].bytes = 0x1c0;
    kr_program *p = fake_load(ctx, STATE, MOD_A, &w, NULL, 0);
    assert_string_equal(p->refusal, "");
    for (size_t i = 0; i < p->num_regions; i++)
        if (p->regions[i].addr >= FAKE_G && p->regions[i].addr < FAKE_G + 0x1c0)
            assert_true(p->regions[i].addr + p->regions[i].bytes <= FAKE_G + 0x1c0);
    CUdeviceptr c = fake_addr_of(MOD_A, "c"), after = fake_addr_of(MOD_A, "after");
    fake_set_u32(c + 128, 1);
    fake_set_u32(FAKE_G + 0x1c0, 2); /* in the section, past the allocation */
    fake_set_u32(after, 3);
    assert_int_equal(kr__program_restore_globals(ctx, p, NULL), KR_OK);
    assert_int_equal(fake_u32(c + 128), 0);
    assert_int_equal(fake_u32(FAKE_G + 0x1c0), 2);
    assert_int_equal(fake_u32(after), 0);
    fake_unload(p);
    fake_driver_off();

    /* the driver puts `after` 64 bytes past c, not 256 as the image says:
     * the section cannot be placed, c and after are restored alone (c[32]
     * escapes then) */
    fake_driver_on();
    p = fake_prepare(ctx, STATE, MOD_A, &w, NULL, 0);
    for (size_t i = 0; i < fake_nsyms; i++)
        if (!strcmp(fake_syms[i].name, "after"))
            fake_syms[i].addr = fake_addr_of(MOD_A, "c") + 64;
    fake_locate(p, MOD_A);
    assert_string_equal(p->refusal, "");
    c = fake_addr_of(MOD_A, "c");
    fake_set_u32(c, 7);
    fake_set_u32(c + 64, 8);
    fake_set_u32(c + 128, 9);
    assert_int_equal(kr__program_restore_globals(ctx, p, NULL), KR_OK);
    assert_int_equal(fake_u32(c), 0);
    assert_int_equal(fake_u32(c + 64), 0);
    assert_int_equal(fake_u32(c + 128), 9);
    assert_int_equal(fake_u32(fake_addr_of(MOD_A, "calls") + 64), 0); /* its bank: whole */
    fake_unload(p);
    fake_driver_off();

    /* a PTX image has no section layout: each global alone, as the driver
     * sizes it (past it escapes), its neighbours untouched */
    fake_driver_on();
    p = compile_src(ctx, STATE, "compute_90a");
    static const struct {
        const char *part;
        size_t bytes;
    } sizes[] = {{"after", 4}, {"table", 16}, {"calls", 4}, {"coeff", 16}, {"one", 4}, {"c", 4}};
    for (size_t i = 0; i < p->facts.num_globals; i++) {
        const char *name = p->facts.globals[i].name;
        size_t bytes = 0;
        for (size_t s = 0; s < sizeof sizes / sizeof sizes[0] && !bytes; s++)
            bytes = strstr(name, sizes[s].part) ? sizes[s].bytes : 0;
        assert_true(bytes > 0);
        fake_symbol(MOD_A, name, FAKE_G + 0x100 * i, bytes);
    }
    fake_locate(p, MOD_A);
    assert_string_equal(p->refusal, "");
    for (size_t i = 0; i < p->num_regions; i++)
        assert_true(p->regions[i].bytes <= 16);
    c = fake_addr_of(MOD_A, "c");
    fake_set_u32(c, 7);
    fake_set_u32(c + 4, 8);
    assert_int_equal(kr__program_restore_globals(ctx, p, NULL), KR_OK);
    assert_int_equal(fake_u32(c), 0);
    assert_int_equal(fake_u32(c + 4), 8);
    fake_unload(p);
    fake_driver_off();
    kr_context_free(ctx);
}

/* The driver answers each writable global's own bytes as its allocation
 * and its copies refuse the padding around them (as the H200's does): the
 * section is placed all the same, read variable by variable, and restored
 * by the engine's kernel, padding and all; without the engine, a clear
 * error, never a silent partial restore. */
static void sections_the_driver_registers_variable_by_variable(void **state)
{
    (void)state;
    kr_context *ctx = test_context(NULL);
    fake_where w = {FAKE_G, FAKE_G + 0x100, FAKE_K, FAKE_K + 0x800, 1};
    fake_driver_on();
    kr_program *p = fake_prepare(ctx, STATE, MOD_A, &w, NULL, 0);
    fake_nallocs = 0;
    for (size_t i = 0; i < fake_nsyms; i++)
        if (fake_syms[i].addr >= FAKE_G && fake_syms[i].bytes) {
            fake_allocs[fake_nallocs].base = fake_syms[i].addr;
            fake_allocs[fake_nallocs++].bytes = fake_syms[i].bytes;
        }
    fake_allocs[fake_nallocs].base = FAKE_K;
    fake_allocs[fake_nallocs++].bytes = 0x1000;
    fake_strict = 1;
    ctx->device_write = fake_device_write;
    fake_locate(p, MOD_A);
    assert_string_equal(p->refusal, "");
    expect_inside_sections(p, &w);
    CUdeviceptr c = fake_addr_of(MOD_A, "c");
    int covered = 0;
    for (size_t i = 0; i < p->num_regions; i++)
        covered |= p->regions[i].by_kernel && p->regions[i].addr <= c + 128 &&
                   c + 132 <= p->regions[i].addr + p->regions[i].bytes;
    assert_true(covered); /* c[32], in the padding the driver's copies refuse */
    fake_kernel_writes(MOD_A, &w);
    fake_set_u32(fake_addr_of(MOD_A, "after"), 3);
    assert_int_equal(kr__program_restore_globals(ctx, p, NULL), KR_OK);
    assert_true(fake_kernel_writes_made > 0);
    expect_at_load(p, MOD_A, &w, 0, 1);
    assert_int_equal(fake_u32(fake_addr_of(MOD_A, "after")), 0);
    /* no engine to write with: an error that says so */
    ctx->device_write = NULL;
    fake_set_u32(c + 128, 1);
    assert_int_equal(kr__program_restore_globals(ctx, p, NULL), KR_ECUDA);
    assert_non_null(strstr(kr_context_errmsg(ctx), "engine"));
    fake_unload(p);
    fake_driver_off();
    kr_context_free(ctx);
}

/* A large section's snapshot: its nonzero spans, each copied (a memset
 * first), too many bridged. 128 KiB of table: its first word alone (one
 * span); a word far from it (two); 20 words 4 KiB apart far from it (more
 * spans than are worth a copy each: the smallest gaps bridged, two again). */
static void restores_nonzero_spans(void **state)
{
    (void)state;
    kr_context *ctx = test_context(NULL);
    static const size_t words[] = {0, 1, 20};
    for (int v = 0; v < 3; v++) {
        fake_driver_on();
        fake_where w = {FAKE_G, 0, FAKE_K, FAKE_K + 0x800, 0};
        kr_program *p = fake_prepare(
            ctx, "__device__ unsigned table[32768] = {1};\n"
                 "extern \"C\" __global__ void k(int i) { table[i] += 1; }\n",
            MOD_A, &w, NULL, 0);
        uint64_t size = fake_size(p, ".nv.global.init");
        assert_int_equal(size, 0x20000);
        for (uint32_t i = 1; i < 32768; i++)
            fake_set_u32(FAKE_G + 4 * i, 0); /* the fake wrote the table from 1; the image: {1} */
        for (size_t k = 0; k < words[v]; k++)
            fake_set_u32(FAKE_G + size - 0x100 - k * 0x1100, 0xabcd0001u + (uint32_t)k);
        fake_locate(p, MOD_A);
        assert_int_equal(p->num_regions, 1);
        assert_int_equal(p->regions[0].addr, FAKE_G);
        assert_int_equal(p->regions[0].bytes, size);
        assert_int_equal(p->regions[0].initial->num_spans, v == 0 ? 1 : 2);
        fake_set_u32(FAKE_G, 5);
        fake_set_u32(FAKE_G + 0x40, 6);
        for (size_t k = 0; k < words[v]; k++)
            fake_set_u32(FAKE_G + size - 0x100 - k * 0x1100, 0);
        fake_set_u32(FAKE_G + size, 0xeeeeeeeeu); /* past the section: not the module's */
        assert_int_equal(kr__program_restore_globals(ctx, p, NULL), KR_OK);
        assert_int_equal(fake_u32(FAKE_G), 1);
        assert_int_equal(fake_u32(FAKE_G + 0x40), 0);
        for (size_t k = 0; k < words[v]; k++)
            assert_int_equal(fake_u32(FAKE_G + size - 0x100 - k * 0x1100),
                             0xabcd0001u + (uint32_t)k);
        assert_int_equal(fake_u32(FAKE_G + size), 0xeeeeeeeeu);
        fake_unload(p);
        fake_driver_off();
    }
    kr_context_free(ctx);
}

static void unlocated_constants_are_not_refused(void **state)
{
    (void)state;
    kr_context *ctx = test_context(NULL);
    fake_where w = {FAKE_G, FAKE_G + 0x100, FAKE_K, FAKE_K + 0x800, 0};
    /* coeff not found by name: restored with its bank, placed by `calls`
     * and `one`; with `one` hidden too (one symbol places its section) */
    for (int both = 0; both < 2; both++) {
        fake_driver_on();
        kr_program *p = fake_prepare(ctx, STATE, MOD_A, &w, "coeff", 0);
        if (both)
            for (size_t i = 0; i < fake_nsyms; i++)
                if (!strcmp(fake_syms[i].name, "one"))
                    fake_syms[i].mod = MOD_B; /* not found in MOD_A */
        fake_locate(p, MOD_A);
        assert_string_equal(p->refusal, "");
        assert_int_equal(kr__program_admissible(ctx, p), KR_OK);
        const kr__image_global *coeff = global_named(p, "coeff"), *one = global_named(p, "one");
        fake_set_u32(FAKE_K + coeff->offset, 0);
        fake_set_u32(FAKE_K + one->offset, 0);
        fake_set_u32(FAKE_K + fake_size(p, "bank"), 0xcccccccc); /* past the bank */
        assert_int_equal(kr__program_restore_globals(ctx, p, NULL), KR_OK);
        assert_int_equal(fake_u32(FAKE_K + coeff->offset), bits_of(0.5f));
        assert_int_equal(fake_u32(FAKE_K + one->offset), bits_of(1.0f));
        assert_int_equal(fake_u32(FAKE_K + fake_size(p, "bank")), 0xcccccccc);
        fake_unload(p);
        fake_driver_off();
    }

    /* a lone static constant the driver does not find: admitted all the
     * same (nothing places its bank: it escapes, docs/threat-model.md) */
    fake_driver_on();
    kr_program *p = fake_load(ctx, LONE_CONSTANT, MOD_A, &w, "coeff", 0);
    assert_string_equal(p->refusal, "");
    assert_int_equal(p->num_regions, 0);
    fake_unload(p);
    fake_driver_off();

    /* ... unless the driver knows its section by name: then the bank, its
     * 16 bytes and no more */
    fake_driver_on();
    p = fake_prepare(ctx, LONE_CONSTANT, MOD_A, &w, "coeff", 0);
    fake_symbol(MOD_A, fake_group(p, "bank")->name, FAKE_K, 0);
    fake_locate(p, MOD_A);
    assert_string_equal(p->refusal, "");
    assert_int_equal(p->num_regions, 1);
    assert_int_equal(p->regions[0].addr, FAKE_K);
    assert_int_equal(p->regions[0].bytes, 16);
    fake_set_u32(FAKE_K, 0);
    fake_set_u32(FAKE_K + 16, 0xcccccccc);
    assert_int_equal(kr__program_restore_globals(ctx, p, NULL), KR_OK);
    assert_int_equal(fake_u32(FAKE_K), bits_of(0.5f));
    assert_int_equal(fake_u32(FAKE_K + 16), 0xcccccccc);
    fake_unload(p);
    fake_driver_off();

    /* a writable global the driver does not find, with one other in its
     * section (two must agree to place it): refused, as ever */
    fake_driver_on();
    p = fake_load(ctx, STATE, MOD_A, &w, "c", 0);
    assert_int_equal(kr__program_admissible(ctx, p), KR_ECOMPILE);
    assert_contains(kr_context_errmsg(ctx), "cannot be reset between calls");
    fake_unload(p);
    fake_driver_off();
    kr_context_free(ctx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(cubin_roundtrip),
        cmocka_unit_test(ptx_roundtrip),
        cmocka_unit_test(ptx_by_hand),
        cmocka_unit_test(not_a_binary),
        cmocka_unit_test(corrupted_cubin_never_crashes),
        cmocka_unit_test(globals_and_heap),
        cmocka_unit_test(constants_and_slack_facts),
        cmocka_unit_test(restores_own_sections),
        cmocka_unit_test(sections_within_what_the_driver_says),
        cmocka_unit_test(sections_the_driver_registers_variable_by_variable),
        cmocka_unit_test(restores_nonzero_spans),
        cmocka_unit_test(unlocated_constants_are_not_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
