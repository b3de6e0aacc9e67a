/* A program's writable device globals: every call of a candidate starts
 * from the module's state at load, so no `__device__` variable can carry a
 * call counter, a cached result or anything else from one call to the next.
 *
 * The image says which globals exist and how they are grouped (an ELF
 * section is laid out in one piece; each PTX global is its own piece);
 * after the module is loaded the driver says where one global of each group
 * is, which places the whole group. Its contents at load are copied to
 * pageable host memory (out of the device's reach) and written back before
 * every call: zeroed with a memset where they were all zero, copied where
 * they were not (initialised tables, relocated pointers). Device heap
 * blocks (malloc) and managed variables would outlive a call out of this
 * reach: programs that use them are refused as candidates. */
#include "compile/program_impl.h"
#include "driver/context_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int all_zero(const unsigned char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i])
            return 0;
    return 1;
}

/* The region of one group: from the first of its globals the driver finds. */
static int locate_group(kr_program *prog, const kr__image_group *g, kr__global_region *out)
{
    const kr__cuda_api *cu = kr__cuda();
    for (size_t i = 0; i < prog->facts.num_globals; i++) {
        const kr__image_global *v = &prog->facts.globals[i];
        CUdeviceptr addr = 0;
        size_t bytes = 0;
        if (v->group != g->id ||
            cu->cuModuleGetGlobal(&addr, &bytes, prog->module, v->name) != CUDA_SUCCESS)
            continue;
        out->addr = g->size ? addr - v->offset : addr;
        out->bytes = g->size ? (size_t)g->size : bytes;
        return 0;
    }
    return -1;
}

static int snapshot(kr_program *prog, kr__global_region *r)
{
    if (!r->bytes)
        return KR_OK;
    unsigned char *copy = malloc(r->bytes);
    if (!copy)
        return kr__fail(prog->ctx, KR_ENOMEM, "out of memory for a program's globals");
    CUresult res = kr__cuda()->cuMemcpyDtoH(copy, r->addr, r->bytes);
    if (res != CUDA_SUCCESS) {
        free(copy);
        return kr__cuda_fail(prog->ctx, res, "reading a program's globals");
    }
    if (all_zero(copy, r->bytes))
        free(copy);
    else
        r->initial = copy;
    return KR_OK;
}

int kr__program_locate_globals(kr_program *prog)
{
    size_t n = prog->facts.num_groups;
    if (!n)
        return KR_OK;
    prog->regions = calloc(n, sizeof *prog->regions);
    if (!prog->regions)
        return kr__fail(prog->ctx, KR_ENOMEM, "out of memory");
    for (size_t i = 0; i < n; i++) {
        const kr__image_group *g = &prog->facts.groups[i];
        kr__global_region *r = &prog->regions[prog->num_regions];
        if (locate_group(prog, g, r) != 0) {
            if (!prog->refusal[0])
                snprintf(prog->refusal, sizeof prog->refusal,
                         "its device globals in '%s' cannot be reset between calls (the driver "
                         "finds none of them by name)", g->name);
            continue;
        }
        prog->num_regions++;
        prog->global_bytes += r->bytes;
        int rc = snapshot(prog, r);
        if (rc != KR_OK)
            return rc;
    }
    return KR_OK;
}

int kr__program_restore_globals(kr_context *ctx, const kr_program *prog, CUstream stream)
{
    const kr__cuda_api *cu = kr__cuda();
    for (size_t i = 0; i < prog->num_regions; i++) {
        const kr__global_region *r = &prog->regions[i];
        CUresult res = r->initial ? cu->cuMemcpyHtoDAsync(r->addr, r->initial, r->bytes, stream)
                                  : cu->cuMemsetD8Async(r->addr, 0, r->bytes, stream);
        if (res != CUDA_SUCCESS)
            return kr__cuda_fail(ctx, res, "restoring a program's globals");
    }
    return KR_OK;
}

int kr__program_admissible(kr_context *ctx, const kr_program *prog)
{
    if (!prog->refusal[0])
        return KR_OK;
    return kr__fail(ctx, KR_ECOMPILE, "the program is not accepted as a candidate: %s",
                    prog->refusal);
}
