/* Launching the builtin kernels (generator, hash, canary check, compare,
 * bit difference) on the engine's stream. */
#include "run/engine.h"
#include "common/random.h"

/* cat: where profile mode counts its GPU time, bytes what the kernel reads
 * and writes (gpu_profile.h) */
static int launch(kr_context *ctx, CUfunction fn, uint64_t n, void **params, const char *what,
                  int cat, double bytes)
{
    kr__engine *e = kr__engine_of(ctx);
    kr__gpu_bytes(e, cat, bytes);
    int slot = kr__gpu_begin(e, cat);
    CUresult r = kr__cuda()->cuLaunchKernel(fn, kr__grid_blocks(e, n), 1, 1, 256, 1, 1, 0, e->stream,
                                            params, NULL);
    kr__gpu_end(e, slot);
    return r == CUDA_SUCCESS ? KR_OK : kr__cuda_fail(ctx, r, what);
}

int kr__k_generate(kr_context *ctx, CUdeviceptr out, uint64_t n, const kr_gen_dist *d,
                   uint64_t seed, uint32_t tensor)
{
    kr__engine *e = kr__engine_of(ctx);
    kr_gen_dist dist = *d;
    void *params[] = {&out, &n, &dist, &seed, &tensor};
    uint64_t groups = n / (uint64_t)kr_gen_per_call(d) + 1;
    int special = e->gen_generic_only ? -1 : kr__gen_kernel_for(d, NULL);
    return launch(ctx, special < 0 ? e->f_generate : e->f_gen_special[special], groups, params,
                  "generating inputs", KR__GPU_GENERATE, (double)n * kr_gen_dtype_size(d->dtype));
}

int kr__k_hash(kr_context *ctx, CUdeviceptr p, uint64_t bytes, uint64_t key, CUdeviceptr out)
{
    void *params[] = {&p, &bytes, &key, &out};
    return launch(ctx, kr__engine_of(ctx)->f_hash, bytes / 4 + 4, params, "hashing inputs",
                  KR__GPU_CHECKS, (double)bytes);
}

int kr__k_check_bytes(kr_context *ctx, CUdeviceptr p, uint64_t n, unsigned value,
                      CUdeviceptr count, CUdeviceptr first)
{
    void *params[] = {&p, &n, &value, &count, &first};
    return launch(ctx, kr__engine_of(ctx)->f_check_bytes, n, params, "checking canaries",
                  KR__GPU_CHECKS, (double)n);
}

int kr__k_compare(kr_context *ctx, CUdeviceptr got, CUdeviceptr want, uint64_t n, int dtype,
                  double rtol, double atol, uint32_t poison, CUdeviceptr stats)
{
    uint32_t dt = (uint32_t)dtype;
    void *params[] = {&got, &want, &n, &dt, &rtol, &atol, &poison, &stats};
    return launch(ctx, kr__engine_of(ctx)->f_compare, n, params, "comparing outputs",
                  KR__GPU_CHECKS, 2.0 * (double)n * kr_gen_dtype_size(dt));
}

int kr__k_bitdiff(kr_context *ctx, CUdeviceptr a, CUdeviceptr b, uint64_t n, uint32_t elem,
                  CUdeviceptr count)
{
    void *params[] = {&a, &b, &n, &elem, &count};
    return launch(ctx, kr__engine_of(ctx)->f_bitdiff, n, params, "comparing runs",
                  KR__GPU_CHECKS, 2.0 * (double)n * elem);
}

int kr__k_scrub_shared(kr_context *ctx)
{
    kr__engine *e = kr__engine_of(ctx);
    uint64_t seed = kr__random64(); /* per call, from the OS: nothing to predict */
    uint32_t words = (uint32_t)e->scrub_bytes / 4;
    void *params[] = {&seed, &words};
    unsigned blocks = (unsigned)(e->sm_count > 0 ? e->sm_count : 1) * 2;
    CUresult r = kr__cuda()->cuLaunchKernel(e->f_scrub_shared, blocks, 1, 1, 256, 1, 1,
                                            (unsigned)e->scrub_bytes, e->stream, params, NULL);
    return r == CUDA_SUCCESS ? KR_OK : kr__cuda_fail(ctx, r, "scrubbing shared memory");
}
