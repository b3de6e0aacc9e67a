/* bench/compile: what the compile path costs, against a bare NVRTC call.
 *
 * Rows: a bare NVRTC compile of the same source with the same options (the
 * alternative), kr_compile without the cache (cold: the overhead is ours),
 * a memory cache hit, a disk cache hit (fresh context, memory cache off).
 * Medians over several runs; prints one table. Targets (issue 2): memory
 * hit <= 50 us, disk hit <= 2 ms, cold overhead <= 10 %. */
#include "common/clock.h"
#include "driver/nvrtc_api.h"

#include <kreward/kreward.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *TRIVIAL =
    "extern \"C\" __global__ void add(const float* a, const float* b, float* c, int n) {\n"
    "  int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) c[i] = a[i] + b[i]; }\n";
static const char *HALF =
    "#include <cuda_fp16.h>\n"
    "extern \"C\" __global__ void h(const __half* a, __half* c, int n) {\n"
    "  int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) c[i] = __hmul(a[i], a[i]); }\n";

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static double bare_nvrtc(const kr__nvrtc_api *nv, const char *src, const char *cuda_home)
{
    char inc[512], cccl[512];
    snprintf(inc, sizeof inc, "-I%s/include", cuda_home);
    snprintf(cccl, sizeof cccl, "-I%s/include/cccl", cuda_home);
    const char *opts[] = {"--gpu-architecture=sm_90a", "--std=c++17", inc, cccl};
    double t0 = kr__now();
    nvrtcProgram p;
    nv->nvrtcCreateProgram(&p, src, "candidate.cu", 0, NULL, NULL);
    if (nv->nvrtcCompileProgram(p, 4, opts) != NVRTC_SUCCESS) {
        fprintf(stderr, "bare NVRTC compile failed\n");
        exit(1);
    }
    size_t n;
    nv->nvrtcGetCUBINSize(p, &n);
    char *cubin = malloc(n);
    nv->nvrtcGetCUBIN(p, cubin);
    size_t logn;
    nv->nvrtcGetProgramLogSize(p, &logn);
    char *log = malloc(logn + 1);
    nv->nvrtcGetProgramLog(p, log);
    nv->nvrtcDestroyProgram(&p);
    double dt = kr__now() - t0;
    free(cubin);
    free(log);
    return dt;
}

static kr_context *make_ctx(uint64_t mem, const char *dir)
{
    kr_context_options o;
    kr_context_options_init(&o, KR_CONTEXT_OPTIONS_VERSION);
    o.flags = KR_CONTEXT_NO_DEVICE; /* the compile path alone, no module load */
    o.cache_memory_bytes = mem;
    o.cache_dir = dir;
    kr_context *ctx;
    if (kr_context_new(&ctx, &o) != KR_OK)
        exit(1);
    return ctx;
}

static double timed_compile(kr_context *ctx, const char *src, uint32_t flags, int expect_cache)
{
    kr_compile_options o;
    kr_compile_options_init(&o, KR_COMPILE_OPTIONS_VERSION);
    o.flags = flags;
    kr_program *p;
    double t0 = kr__now();
    int rc = kr_compile(&p, ctx, src, 0, &o);
    double dt = kr__now() - t0;
    if (rc != KR_OK || (expect_cache >= 0 && kr_program_cache_result(p) != expect_cache)) {
        fprintf(stderr, "unexpected compile result: %s\n", kr_context_errmsg(ctx));
        exit(1);
    }
    kr_program_free(p);
    return dt;
}

static void bench_source(const char *label, const char *src, int reps)
{
    char dir[] = "/tmp/krbench-XXXXXX";
    if (!mkdtemp(dir))
        exit(1);
    kr_context *cold = make_ctx(0, NULL);
    const char *home = getenv("CUDA_HOME") ? getenv("CUDA_HOME") : "/usr/local/cuda";
    const kr__nvrtc_api *nv = kr__nvrtc(home);
    /* warm NVRTC itself (first use loads and initialises it) */
    bare_nvrtc(nv, src, home);
    timed_compile(cold, src, KR_COMPILE_NO_CACHE, KR_CACHE_SKIPPED);
    double bare[64], ours[64], mem[256], disk[256];
    for (int i = 0; i < reps; i++) { /* interleaved, so drift hits both alike */
        bare[i] = bare_nvrtc(nv, src, home);
        ours[i] = timed_compile(cold, src, KR_COMPILE_NO_CACHE, KR_CACHE_SKIPPED);
    }
    kr_context *memctx = make_ctx(64u << 20, NULL);
    timed_compile(memctx, src, 0, KR_CACHE_MISS);
    for (int i = 0; i < 200; i++)
        mem[i] = timed_compile(memctx, src, 0, KR_CACHE_MEMORY);
    kr_context *writer = make_ctx(0, dir);
    timed_compile(writer, src, 0, KR_CACHE_MISS);
    kr_context *diskctx = make_ctx(0, dir);
    for (int i = 0; i < 200; i++)
        disk[i] = timed_compile(diskctx, src, 0, KR_CACHE_DISK);
    double b = median(bare, reps), o = median(ours, reps);
    printf("| %-22s | %10.2f ms | %10.2f ms | %+6.1f %% | %8.1f us | %8.1f us |\n", label, b * 1e3,
           o * 1e3, (o / b - 1) * 100, median(mem, 200) * 1e6, median(disk, 200) * 1e6);
    kr_context_free(cold);
    kr_context_free(memctx);
    kr_context_free(writer);
    kr_context_free(diskctx);
    char cmd[64];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
}

int main(int argc, char **argv)
{
    int reps = argc > 1 ? atoi(argv[1]) : 15;
    if (reps < 1 || reps > 64)
        reps = 15;
    printf("compile path, medians (%d cold compiles, 200 cache hits)\n\n", reps);
    printf("| source                 | bare NVRTC    | kr_compile    | overhead | mem hit     | disk hit    |\n");
    printf("|------------------------|---------------|---------------|----------|-------------|-------------|\n");
    bench_source("trivial kernel", TRIVIAL, reps);
    bench_source("includes cuda_fp16.h", HALF, reps);
    printf("\ntargets: memory hit <= 50 us, disk hit <= 2 ms, cold overhead <= 10 %%\n");
    return 0;
}
