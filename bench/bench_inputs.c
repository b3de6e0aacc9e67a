/* bench/inputs: how fast the GPU generator fills tensors (goal: >= 1 TB/s
 * for f32 uniform on an H200), against a device-to-device copy of the same
 * size (the memory ceiling, counted as bytes written) and the host
 * generator (the alternative for golden inputs); then how fast the check
 * kernels read (comparison, keyed hash, bit difference: verification's and
 * the checked calls' work on every output and input), against the copy's
 * reads. */
#include "common/clock.h"
#include "common/dtype.h"
#include "run/engine.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static double time_gpu(kr_context *ctx, CUdeviceptr d, uint64_t n, const kr_gen_dist *dist, int reps)
{
    kr__k_generate(ctx, d, n, dist, 1, 0); /* warm */
    kr__engine_wait(ctx, 60, "warm");
    double t0 = kr__now();
    for (int i = 0; i < reps; i++)
        kr__k_generate(ctx, d, n, dist, (uint64_t)i + 2, 0);
    kr__engine_wait(ctx, 60, "bench");
    return (kr__now() - t0) / reps;
}

/* argv: optional row names ("f32:mix-uniform") to run only those (one
 * generator launch each after the warm one with --once: for ncu). */
static int wanted(int argc, char **argv, const char *name)
{
    int any = 0;
    for (int i = 1; i < argc; i++) {
        if (argv[i][0] == '-')
            continue;
        any = 1;
        if (!strcmp(argv[i], name))
            return 1;
    }
    return !any;
}

/* Seconds a launch of one check kernel over `bytes` of each buffer. */
static double time_check(kr_context *ctx, int which, CUdeviceptr a, CUdeviceptr b, uint64_t bytes,
                         int dtype, CUdeviceptr stats, int reps)
{
    uint64_t n = bytes / (uint64_t)kr__dtype_size(dtype);
    double t0 = 0;
    for (int i = -1; i < reps; i++) { /* the first one warms */
        if (i == 0)
            t0 = kr__now();
        if (which == 0)
            kr__k_compare(ctx, a, b, n, dtype, 1e-3, 1e-5, 0x7FBADBADu, stats);
        else if (which == 1)
            kr__k_hash(ctx, a, bytes, 0x1234567u + (uint64_t)i, stats);
        else
            kr__k_bitdiff(ctx, a, b, n, (uint32_t)kr__dtype_size(dtype), stats);
        if (i == -1)
            kr__engine_wait(ctx, 60, "warm");
    }
    kr__engine_wait(ctx, 60, "checks");
    return (kr__now() - t0) / reps;
}

/* The check kernels' read rate on two generated buffers of 1 GiB. */
static void check_rows(kr_context *ctx, int argc, char **argv, CUdeviceptr a, CUdeviceptr b,
                       uint64_t bytes, double copy_read_gbs, int once)
{
    static const struct {
        int which, dtype;
        const char *name;
    } rows[] = {{0, KR_DTYPE_F32, "check:compare-f32"},   {0, KR_DTYPE_BF16, "check:compare-bf16"},
                {0, KR_DTYPE_F16, "check:compare-f16"},   {0, KR_DTYPE_F64, "check:compare-f64"},
                {0, KR_DTYPE_I8, "check:compare-i8"},     {1, KR_DTYPE_U8, "check:hash"},
                {2, KR_DTYPE_F32, "check:bitdiff-f32"},   {2, KR_DTYPE_BF16, "check:bitdiff-bf16"}};
    CUdeviceptr stats;
    if (kr__cuda()->cuMemAlloc(&stats, 64) != CUDA_SUCCESS)
        return;
    kr__cuda()->cuMemsetD8(stats, 0, 64);
    printf("\nThe check kernels, 1 GiB per buffer (GB/s read; a copy reads %.0f)\n\n"
           "| kernel | GB/s read | vs a copy's reads |\n|---|---|---|\n", copy_read_gbs);
    for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++) {
        if (!wanted(argc, argv, rows[r].name))
            continue;
        double t = time_check(ctx, rows[r].which, a, b, bytes, rows[r].dtype, stats, once ? 1 : 10);
        double read = (rows[r].which == 1 ? 1.0 : 2.0) * (double)bytes / t / 1e9;
        printf("| %s | %.0f | %.0f %% |\n", rows[r].name + 6, read, 100 * read / copy_read_gbs);
    }
    kr__cuda()->cuMemFree(stats);
}

int main(int argc, char **argv)
{
    int once = 0;
    for (int i = 1; i < argc; i++)
        once |= !strcmp(argv[i], "--once");
    kr_context *ctx;
    if (kr_context_new(&ctx, NULL) != KR_OK || !kr_context_has_device(ctx)) {
        printf("bench_inputs: needs a GPU (skipped)\n");
        return 0;
    }
    kr__engine *g;
    if (kr__engine_get(ctx, &g) != KR_OK) {
        printf("bench_inputs: %s\n", kr_context_errmsg(ctx));
        return 1;
    }
    const uint64_t bytes = (uint64_t)1 << 30;
    CUdeviceptr d, d2;
    kr__cuda()->cuMemAlloc(&d, bytes);
    kr__cuda()->cuMemAlloc(&d2, bytes);
    /* the ceiling: a copy writes `bytes` and reads as many */
    kr__cuda()->cuMemcpyDtoDAsync(d2, d, bytes, g->stream);
    kr__engine_wait(ctx, 60, "copy");
    double t0 = kr__now();
    for (int i = 0; i < 10; i++)
        kr__cuda()->cuMemcpyDtoDAsync(d2, d, bytes, g->stream);
    kr__engine_wait(ctx, 60, "copy");
    double copy = (kr__now() - t0) / 10;
    /* the write-only ceiling: what a generator could reach at most */
    t0 = kr__now();
    for (int i = 0; i < 10; i++)
        kr__cuda()->cuMemsetD32Async(d2, (unsigned)i, bytes / 4, g->stream);
    kr__engine_wait(ctx, 60, "memset");
    double fill = (kr__now() - t0) / 10;
    printf("a memset writes %.0f GB/s, a copy %.0f GB/s (bytes written)\n", bytes / fill / 1e9,
           bytes / copy / 1e9);
    printf("GPU input generation, 1 GiB per tensor (H200: goal >= 1000 GB/s for f32 uniform)\n\n");
    printf("| dtype | dist | GPU GB/s written | vs copy (write GB/s %.0f) | host GB/s (1 core) | GPU/host |\n",
           bytes / copy / 1e9);
    printf("|---|---|---|---|---|---|\n");
    static const struct {
        unsigned dtype, kind, base;
        const char *name;
    } rows[] = {{KR_GEN_F32, KR_GEN_UNIFORM, 0, "uniform"},
                {KR_GEN_F32, KR_GEN_NORMAL, 0, "normal"},
                {KR_GEN_F32, KR_GEN_PARETO, 0, "pareto"},
                {KR_GEN_F32, KR_GEN_MIX, KR_GEN_UNIFORM, "mix-uniform"},
                {KR_GEN_BF16, KR_GEN_NORMAL, 0, "normal"},
                {KR_GEN_BF16, KR_GEN_UNIFORM, 0, "uniform"},
                {KR_GEN_F16, KR_GEN_NORMAL, 0, "normal"},
                {KR_GEN_F16, KR_GEN_MIX, KR_GEN_NORMAL, "mix-normal"},
                {KR_GEN_I32, KR_GEN_INT, 0, "int"},
                {KR_GEN_F64, KR_GEN_NORMAL, 0, "normal"}};
    unsigned char *host = malloc(1 << 26);
    for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++) {
        char row[64];
        snprintf(row, sizeof row, "%s:%s", kr__dtype_name((int)rows[r].dtype), rows[r].name);
        if (!wanted(argc, argv, row))
            continue;
        kr_gen_dist dist;
        memset(&dist, 0, sizeof dist);
        dist.kind = rows[r].kind;
        dist.base_kind = rows[r].base ? rows[r].base : KR_GEN_NORMAL;
        dist.dtype = rows[r].dtype;
        dist.a = rows[r].kind == KR_GEN_PARETO ? 1.5 : -1;
        dist.b = 1;
        dist.p = 0.01;
        dist.outlier_scale = 100;
        dist.ilo = -100;
        dist.ihi = 100;
        dist.clamp = kr__dtype_max((int)rows[r].dtype);
        uint64_t n = bytes / (uint64_t)kr__dtype_size((int)rows[r].dtype);
        double t = time_gpu(ctx, d, n, &dist, once ? 1 : 10);
        uint64_t hn = ((uint64_t)1 << 26) / (uint64_t)kr__dtype_size((int)rows[r].dtype);
        double h0 = kr__now();
        for (uint64_t i = 0; i < hn; i++)
            kr_gen_element(&dist, 7, 0, i, host);
        double ht = kr__now() - h0;
        double gpu = bytes / t / 1e9, cpu = (double)(1 << 26) / ht / 1e9;
        printf("| %s | %s | %.0f | %.0f %% | %.2f | %.0fx |\n", kr__dtype_name((int)rows[r].dtype),
               rows[r].name, gpu, 100 * gpu / (bytes / copy / 1e9), cpu, gpu / cpu);
    }
    free(host);
    /* two buffers of ordinary values for the checks: normal, f32 bits
     * (every dtype reads them as its own; what matters is bytes) */
    kr_gen_dist normal;
    memset(&normal, 0, sizeof normal);
    normal.kind = KR_GEN_NORMAL;
    normal.dtype = KR_GEN_F32;
    normal.b = 1;
    normal.clamp = kr__dtype_max(KR_DTYPE_F32);
    kr__k_generate(ctx, d, bytes / 4, &normal, 3, 0);
    kr__k_generate(ctx, d2, bytes / 4, &normal, 3, 0); /* equal: the comparison's usual case */
    kr__engine_wait(ctx, 60, "generate");
    check_rows(ctx, argc, argv, d, d2, bytes, bytes / copy / 1e9, once);
    kr__cuda()->cuMemFree(d);
    kr__cuda()->cuMemFree(d2);
    kr_context_free(ctx);
    return 0;
}
