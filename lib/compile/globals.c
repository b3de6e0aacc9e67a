/* A program's writable device globals: every call of a candidate starts
 * from the module's state at load, so no `__device__` variable can carry a
 * call counter, a cached result or anything else from one call to the next.
 *
 * The image says which globals exist (and, for a CUBIN, their section,
 * offset and size); after the module is loaded the driver says where each
 * is and how large, by name. A global the driver does not find by name
 * (internal linkage can hide it) is placed from its section's layout when
 * two others of the section agree on where the section starts; else the
 * program is refused as a candidate. Each region's contents at load are copied to
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

/* Where the module's section of global g starts, from the other globals
 * of the section the driver found by name: only when at least two of them
 * agree (the section is laid out as the image says); else 0. */
static CUdeviceptr section_base(const kr_program *prog, const kr__image_global *g,
                                const CUdeviceptr *found)
{
    CUdeviceptr base = 0;
    int agreeing = 0;
    for (size_t i = 0; i < prog->facts.num_globals; i++) {
        const kr__image_global *o = &prog->facts.globals[i];
        if (o == g || o->group != g->group || !found[i])
            continue;
        CUdeviceptr b = found[i] - o->offset;
        if (agreeing && b != base)
            return 0;
        base = b;
        agreeing++;
    }
    return agreeing >= 2 ? base : 0;
}

static int add_region(kr_program *prog, CUdeviceptr addr, size_t bytes)
{
    kr__global_region *r = &prog->regions[prog->num_regions++];
    r->addr = addr;
    r->bytes = bytes;
    prog->global_bytes += bytes;
    return snapshot(prog, r);
}

int kr__program_locate_globals(kr_program *prog)
{
    size_t n = prog->facts.num_globals;
    if (!n)
        return KR_OK;
    const kr__cuda_api *cu = kr__cuda();
    CUdeviceptr *found = calloc(n, sizeof *found);
    size_t *bytes = calloc(n, sizeof *bytes);
    prog->regions = calloc(n, sizeof *prog->regions);
    int rc = found && bytes && prog->regions ? KR_OK
                                            : kr__fail(prog->ctx, KR_ENOMEM, "out of memory");
    /* first every global the driver knows by name, with the size it gives */
    for (size_t i = 0; i < n && rc == KR_OK; i++)
        if (cu->cuModuleGetGlobal(&found[i], &bytes[i], prog->module, prog->facts.globals[i].name) !=
            CUDA_SUCCESS)
            found[i] = 0;
    for (size_t i = 0; i < n && rc == KR_OK; i++) {
        const kr__image_global *g = &prog->facts.globals[i];
        CUdeviceptr base = found[i] ? 0 : section_base(prog, g, found);
        if (found[i])
            rc = add_region(prog, found[i], bytes[i]);
        else if (base && g->size)
            rc = add_region(prog, base + g->offset, (size_t)g->size);
        else if (!prog->refusal[0])
            snprintf(prog->refusal, sizeof prog->refusal,
                     "its device global '%s' cannot be reset between calls (the driver does not "
                     "find it by name): declare it at namespace scope without static",
                     g->name);
    }
    free(found);
    free(bytes);
    return rc;
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
