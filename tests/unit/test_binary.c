/* Programs from binaries: CUBIN (ELF) and PTX, and what is not either. */
#include "helpers.h"

#include "compile/program_impl.h"

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

/* Constants and a write past a global, as the image says them (no device):
 * a lone `static __constant__` table and an anonymous-namespace constant
 * are constants of their bank, alone there (the driver may not find such a
 * symbol by name, and two others of its section are needed to place it from
 * the layout: globals.c must not refuse the program for it); a one-element
 * `__device__` array written at c[64] is 4 bytes in a 4-byte section, so the
 * write lands in nothing the image names: only the allocation holding it,
 * restored whole, covers it; the compiler's bank of relocated pointers
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
    "__device__ unsigned c[1];\n"
    "__constant__ unsigned calls;\n"
    "extern \"C\" __global__ void k(const float *a, float *o, long long n) {\n"
    "  long long i = blockIdx.x * 256ll + threadIdx.x;\n"
    "  if (i < n) o[i] = ((((volatile unsigned *)c)[64] + calls) & 1) ? 0.f : a[i]; }\n"
    "extern \"C\" __global__ void tick() {\n"
    "  ((volatile unsigned *)c)[64]++;\n"
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
        const kr__image_global *c = global_named(p, "c");
        const kr__image_group *gc = group_of_global(p, c);
        if (cubin) {
            /* 4 bytes in a 4-byte section: c[64] is past all the image names */
            assert_string_equal(gc->name, ".nv.global");
            assert_int_equal(c->size, 4);
            assert_int_equal(gc->size, 4);
            assert_int_equal(strncmp(group_of_global(p, global_named(p, "calls"))->name,
                                     ".nv.constant", 12), 0);
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
            assert_string_equal(group_of_global(p, global_named(p, "calls"))->name,
                                ".const calls");
        }
        /* the store lands 256 bytes into a 4-byte global */
        size_t ptx_len;
        const char *ptx = kr__program_ptx(p, &ptx_len);
        assert_non_null(ptx);
        assert_non_null(strstr(ptx, "[c+256]"));
        assert_int_equal(kr__program_admissible(ctx, p), KR_OK);
        kr_program_free(p);
    }
    kr_context_free(ctx);
}

/* globals.c against a driver played by the test: 256 KiB of host memory as
 * the device, symbols placed where each test says, allocations the driver
 * answers for (or not). What restoring covers, on the CPU. */
#define FAKE_BASE ((CUdeviceptr)0x7f0000000000ull)
#define FAKE_K (FAKE_BASE + 0x400)   /* the module's constant banks' allocation */
#define FAKE_G (FAKE_BASE + 0x1000)  /* its globals' allocation */
static unsigned char fake_mem[1 << 18];
static struct {
    const char *name;
    CUdeviceptr addr;
    size_t bytes;
} fake_syms[16];
static size_t fake_nsyms;
static struct {
    CUdeviceptr base;
    size_t bytes;
} fake_allocs[4];
static size_t fake_nallocs;
static int fake_ranges; /* 0: the driver answers no range query */
static kr__cuda_api fake_saved;

static unsigned char *fake_at(CUdeviceptr a, size_t n)
{
    if (a < FAKE_BASE || a - FAKE_BASE > sizeof fake_mem || n > sizeof fake_mem - (a - FAKE_BASE))
        fail_msg("access outside the fake device: 0x%llx + %zu", (unsigned long long)a, n);
    return fake_mem + (a - FAKE_BASE);
}

static CUresult fake_get_global(CUdeviceptr *d, size_t *b, CUmodule m, const char *name)
{
    (void)m;
    for (size_t i = 0; i < fake_nsyms; i++)
        if (!strcmp(fake_syms[i].name, name)) {
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

static CUresult fake_dtoh(void *dst, CUdeviceptr src, size_t n)
{
    memcpy(dst, fake_at(src, n), n);
    return CUDA_SUCCESS;
}

static CUresult fake_htod(CUdeviceptr dst, const void *src, size_t n, CUstream s)
{
    (void)s;
    memcpy(fake_at(dst, n), src, n);
    return CUDA_SUCCESS;
}

static CUresult fake_memset(CUdeviceptr dst, unsigned char v, size_t n, CUstream s)
{
    (void)s;
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
    fake_allocs[fake_nallocs].base = FAKE_G;
    fake_allocs[fake_nallocs++].bytes = 0x1000;
    fake_allocs[fake_nallocs].base = FAKE_K;
    fake_allocs[fake_nallocs++].bytes = 0x200;
}

static void fake_driver_off(void)
{
    *(kr__cuda_api *)kr__cuda() = fake_saved;
}

/* Places p's globals of `section` (by the image's offsets) at base, but
 * the one named `hidden`, which the driver does not find by name. */
static void fake_place(const kr_program *p, const char *section, CUdeviceptr base,
                       const char *hidden)
{
    for (size_t i = 0; i < p->facts.num_globals; i++) {
        const kr__image_global *g = &p->facts.globals[i];
        if (strcmp(group_of_global(p, g)->name, section) || (hidden && !strcmp(g->name, hidden)))
            continue;
        fake_syms[fake_nsyms].name = g->name;
        fake_syms[fake_nsyms].addr = base + g->offset;
        fake_syms[fake_nsyms++].bytes = (size_t)g->size;
    }
}

static void fake_section_symbol(const char *name, CUdeviceptr addr)
{
    fake_syms[fake_nsyms].name = name;
    fake_syms[fake_nsyms].addr = addr;
    fake_syms[fake_nsyms++].bytes = 0;
}

static CUdeviceptr fake_addr_of(const char *name)
{
    for (size_t i = 0; i < fake_nsyms; i++)
        if (!strcmp(fake_syms[i].name, name))
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

static const char *STATE =
    "__device__ unsigned c[1];\n"
    "__device__ int table[4] = {1, 2, 3, 4};\n"
    "__constant__ unsigned calls;\n"
    "__constant__ float one = 1.0f;\n"
    "static __constant__ float coeff[4] = {0.5f, 1.5f, 2.5f, 3.5f};\n"
    "extern \"C\" __global__ void k(float *y, int i) {\n"
    "  y[0] = c[0] + table[i & 3] + calls + one + coeff[i & 3]; }\n";

/* A module as the fake device holds it at load: the image's initial values
 * (table, one, coeff) and a pointer in the banks' allocation no symbol names. */
static kr_program *fake_load(kr_context *ctx, const char *src, const char *hidden)
{
    kr_program *p = compile_src(ctx, src, "sm_90a");
    fake_place(p, ".nv.global", FAKE_G + 0x100, hidden);
    fake_place(p, ".nv.global.init", FAKE_G, hidden);
    fake_place(p, ".nv.constant3", FAKE_K, hidden);
    for (size_t i = 0; i < fake_nsyms; i++) {
        if (!strcmp(fake_syms[i].name, "table"))
            for (uint32_t v = 0; v < 4; v++)
                fake_set_u32(fake_syms[i].addr + 4 * v, v + 1);
        if (!strcmp(fake_syms[i].name, "one"))
            fake_set_u32(fake_syms[i].addr, 0x3f800000u);
    }
    for (size_t i = 0; i < p->facts.num_globals; i++) /* found by name or not */
        if (!strcmp(p->facts.globals[i].name, "coeff"))
            for (uint32_t v = 0; v < 4; v++) {
                float x = 0.5f + (float)v;
                uint32_t bits;
                memcpy(&bits, &x, 4);
                fake_set_u32(FAKE_K + p->facts.globals[i].offset + 4 * v, bits);
            }
    fake_set_u32(FAKE_K + 0x100, 0x12345678u); /* "relocated pointer" */
    p->module = (CUmodule)(uintptr_t)0x1;      /* never used but by the fake */
    assert_int_equal(kr__program_locate_globals(p), KR_OK);
    return p;
}

static void fake_unload(kr_program *p)
{
    p->module = NULL;
    kr_program_free(p);
}

/* what a candidate's kernel leaves behind: its globals changed, and bytes
 * past them (c[64], the constant's generic address plus 64) */
static void fake_kernel_writes(void)
{
    CUdeviceptr c = fake_addr_of("c"), calls = fake_addr_of("calls");
    fake_set_u32(c, 7);
    fake_set_u32(c + 256, 1);
    fake_set_u32(fake_addr_of("table"), 99);
    fake_set_u32(calls, 3);
    fake_set_u32(calls + 64, 5);
    fake_set_u32(FAKE_K + 0x100, 0);
}

static void restores_whole_allocations(void **state)
{
    (void)state;
    kr_context *ctx = test_context(NULL);
    /* the globals' allocation: 4 KiB (the table: one span copied); 16 KiB
     * with a word far from the others (two spans); 128 KiB with 20 words
     * 4 KiB apart, far from the table (more spans than are worth a copy
     * each: the smallest gaps bridged, two spans again) */
    static const size_t sizes[] = {0x1000, 0x4000, 0x20000}, words[] = {0, 1, 20};
    for (int v = 0; v < 3; v++) {
        fake_driver_on();
        fake_allocs[0].bytes = sizes[v];
        for (size_t w = 0; w < words[v]; w++)
            fake_set_u32(FAKE_G + sizes[v] - 0x100 - w * 0x1100, 0xabcd0001u + (uint32_t)w);
        kr_program *p = fake_load(ctx, STATE, NULL);
        assert_string_equal(p->refusal, "");
        assert_int_equal(p->num_regions, 2); /* the two allocations, each once */
        assert_int_equal(p->global_bytes, 4 + 16 + 4 + 4 + 16);
        for (size_t i = 0; i < p->num_regions; i++)
            if (p->regions[i].addr == FAKE_G)
                assert_int_equal(p->regions[i].initial->num_spans, v == 0 ? 1 : 2);
        fake_kernel_writes();
        for (size_t w = 0; w < words[v]; w++)
            fake_set_u32(FAKE_G + sizes[v] - 0x100 - w * 0x1100, 0);
        fake_set_u32(FAKE_G + sizes[v], 0xeeeeeeeeu); /* past the allocation: not the module's */
        assert_int_equal(kr__program_restore_globals(ctx, p, NULL), KR_OK);
        CUdeviceptr c = fake_addr_of("c"), calls = fake_addr_of("calls");
        assert_int_equal(fake_u32(c), 0);
        assert_int_equal(fake_u32(c + 256), 0);        /* past the array: restored */
        assert_int_equal(fake_u32(fake_addr_of("table")), 1);
        assert_int_equal(fake_u32(calls), 0);
        assert_int_equal(fake_u32(calls + 64), 0);     /* past the constant: restored */
        assert_int_equal(fake_u32(FAKE_K + 0x100), 0x12345678u); /* the unnamed bank too */
        assert_int_equal(fake_u32(fake_addr_of("one")), 0x3f800000u);
        for (size_t w = 0; w < words[v]; w++)
            assert_int_equal(fake_u32(FAKE_G + sizes[v] - 0x100 - w * 0x1100),
                             0xabcd0001u + (uint32_t)w);
        assert_int_equal(fake_u32(FAKE_G + sizes[v]), 0xeeeeeeeeu);
        fake_unload(p);
        fake_driver_off();
    }

    /* the driver answers no range query: each global alone, as before (the
     * bytes past them are out of reach then) */
    fake_driver_on();
    fake_ranges = 0;
    kr_program *p = fake_load(ctx, STATE, NULL);
    assert_string_equal(p->refusal, "");
    assert_true(p->num_regions >= 3);
    fake_kernel_writes();
    assert_int_equal(kr__program_restore_globals(ctx, p, NULL), KR_OK);
    assert_int_equal(fake_u32(fake_addr_of("c")), 0);
    assert_int_equal(fake_u32(fake_addr_of("table")), 1);
    assert_int_equal(fake_u32(fake_addr_of("calls")), 0);
    assert_int_equal(fake_u32(fake_addr_of("c") + 256), 1);
    fake_unload(p);

    /* an implausibly large allocation (1 GiB around 40 bytes of globals):
     * not read, not restored; its globals one by one */
    fake_driver_off();
    fake_driver_on();
    fake_allocs[0].bytes = (size_t)1 << 30;
    p = fake_load(ctx, STATE, NULL);
    assert_string_equal(p->refusal, "");
    for (size_t i = 0; i < p->num_regions; i++)
        assert_true(p->regions[i].bytes <= 0x200);
    fake_kernel_writes();
    assert_int_equal(kr__program_restore_globals(ctx, p, NULL), KR_OK);
    assert_int_equal(fake_u32(fake_addr_of("c")), 0);
    assert_int_equal(fake_u32(fake_addr_of("table")), 1);
    assert_int_equal(fake_u32(fake_addr_of("calls") + 64), 0); /* its bank's allocation: whole */
    fake_unload(p);
    fake_driver_off();
    kr_context_free(ctx);
}

static void unlocated_constants_are_not_refused(void **state)
{
    (void)state;
    kr_context *ctx = test_context(NULL);
    /* coeff not found by name: its bank is restored whole through `one` */
    fake_driver_on();
    kr_program *p = fake_load(ctx, STATE, "coeff");
    assert_string_equal(p->refusal, "");
    assert_int_equal(kr__program_admissible(ctx, p), KR_OK);
    const kr__image_global *coeff = global_named(p, "coeff");
    fake_set_u32(FAKE_K + coeff->offset, 0);
    assert_int_equal(kr__program_restore_globals(ctx, p, NULL), KR_OK);
    assert_int_equal(fake_u32(FAKE_K + coeff->offset), 0x3f000000u); /* 0.5f */
    fake_unload(p);
    fake_driver_off();

    /* a lone static constant the driver does not find: admitted all the
     * same (nothing to restore it through: it escapes, docs/threat-model.md) */
    fake_driver_on();
    p = fake_load(ctx, LONE_CONSTANT, "coeff");
    assert_string_equal(p->refusal, "");
    assert_int_equal(p->num_regions, 0);
    fake_unload(p);
    fake_driver_off();

    /* ... unless the driver knows its section by name: then the bank */
    fake_driver_on();
    fake_section_symbol(".nv.constant3", FAKE_K);
    p = fake_load(ctx, LONE_CONSTANT, "coeff");
    assert_string_equal(p->refusal, "");
    assert_int_equal(p->num_regions, 1);
    fake_set_u32(FAKE_K, 0);
    assert_int_equal(kr__program_restore_globals(ctx, p, NULL), KR_OK);
    assert_int_equal(fake_u32(FAKE_K), 0x3f000000u);
    fake_unload(p);
    fake_driver_off();

    /* a writable global the driver does not find, alone in its section:
     * refused, as ever */
    fake_driver_on();
    p = fake_load(ctx, STATE, "c");
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
        cmocka_unit_test(restores_whole_allocations),
        cmocka_unit_test(unlocated_constants_are_not_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
