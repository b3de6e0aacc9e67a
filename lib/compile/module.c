/* Loading a program on the device and reading what each kernel uses. */
#include "driver/context_impl.h"
#include "compile/program_impl.h"
#include "common/strbuf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void read_resources(const kr__cuda_api *cu, kr__kernel *k)
{
    static const struct {
        int attr;
        CUfunction_attribute cu_attr;
    } map[] = {
        {KR_KERNEL_REGISTERS, CU_FUNC_ATTRIBUTE_NUM_REGS},
        {KR_KERNEL_SHARED_STATIC, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES},
        {KR_KERNEL_LOCAL_BYTES, CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES},
        {KR_KERNEL_MAX_THREADS, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK},
        {KR_KERNEL_CONST_BYTES, CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES},
    };
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++) {
        int v = -1;
        if (cu->cuFuncGetAttribute(&v, map[i].cu_attr, k->fn) == CUDA_SUCCESS)
            k->attrs[map[i].attr] = v;
    }
}

/* The driver's parameter list is the truth; it replaces what was read from
 * the image (they agree for CUBINs, which the gpu tests check). */
static int read_params(const kr__cuda_api *cu, kr__kernel *k)
{
    uint32_t n = 0;
    size_t off, size;
    while (n < 4096 && cu->cuFuncGetParamInfo(k->fn, n, &off, &size) == CUDA_SUCCESS)
        n++;
    uint32_t *po = malloc((n ? n : 1) * sizeof *po), *ps = malloc((n ? n : 1) * sizeof *ps);
    if (!po || !ps) {
        free(po);
        free(ps);
        return -1;
    }
    uint32_t total = 0;
    for (uint32_t i = 0; i < n; i++) {
        cu->cuFuncGetParamInfo(k->fn, i, &off, &size);
        po[i] = (uint32_t)off;
        ps[i] = (uint32_t)size;
        if (po[i] + ps[i] > total)
            total = po[i] + ps[i];
    }
    free(k->param_offset);
    free(k->param_size);
    k->param_offset = po;
    k->param_size = ps;
    k->num_params = n;
    k->params_known = 1;
    k->attrs[KR_KERNEL_NUM_PARAMS] = n;
    k->attrs[KR_KERNEL_PARAM_BYTES] = total;
    return 0;
}

int kr__program_load(kr_program *prog)
{
    if (prog->module)
        return KR_OK;
    kr_context *ctx = prog->ctx;
    int rc = kr__device_enter(ctx);
    if (rc != KR_OK)
        return rc;
    const kr__cuda_api *cu = kr__cuda();
    char error_log[8192] = "", info_log[4096] = "";
    CUjit_option keys[] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
                           CU_JIT_INFO_LOG_BUFFER, CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES};
    void *values[] = {error_log, (void *)(uintptr_t)sizeof error_log, info_log,
                      (void *)(uintptr_t)sizeof info_log};
    CUresult r = cu->cuModuleLoadDataEx(&prog->module, prog->image, 4, keys, values);
    if (r != CUDA_SUCCESS) {
        prog->module = NULL;
        char desc[200];
        kr__cuda_describe(r, desc, sizeof desc);
        snprintf(prog->load_why, sizeof prog->load_why, "%s%s%.700s", desc,
                 error_log[0] ? ": " : "", error_log);
        if (kr__cuda_is_sticky(r))
            return kr__cuda_fail(ctx, r, "cuModuleLoadDataEx");
        return kr__fail_detail(ctx, KR_ECUDA, error_log,
                               "the program (arch %s) does not load on %s (%s): %s",
                               prog->arch[0] ? prog->arch : "?", ctx->device_name, ctx->arch,
                               desc);
    }
    for (size_t i = 0; i < prog->num_kernels; i++) {
        kr__kernel *k = &prog->kernels[i];
        r = cu->cuModuleGetFunction(&k->fn, prog->module, k->name);
        if (r != CUDA_SUCCESS)
            return kr__cuda_fail(ctx, r, "cuModuleGetFunction");
        read_resources(cu, k);
        if (read_params(cu, k) != 0)
            return kr__fail(ctx, KR_ENOMEM, "out of memory");
    }
    /* before anything runs: the globals as they are at load */
    return kr__program_locate_globals(prog);
}
