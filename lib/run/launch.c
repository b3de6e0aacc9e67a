/* Running a bound plan on the device. */
#include "driver/context_impl.h"
#include "run/launch.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void kr__ready_free(kr__ready_plan *rp)
{
    free(rp->launches);
    memset(rp, 0, sizeof *rp);
}

int kr__ready(kr_context *ctx, const kr__bound_plan *bp, size_t c, kr__ready_plan *out)
{
    memset(out, 0, sizeof *out);
    if (!bp->program->module)
        return kr__fail(ctx, KR_ECUDA, "the program is not loaded on this device: %s",
                        bp->program->load_why[0] ? bp->program->load_why : "no device");
    out->launches = calloc(bp->num_launches ? bp->num_launches : 1, sizeof *out->launches);
    if (!out->launches)
        return kr__fail(ctx, KR_ENOMEM, "out of memory");
    out->num_launches = bp->num_launches;
    kr__limits lim;
    kr__limits_for(ctx, bp->program->arch, &lim);
    for (size_t l = 0; l < bp->num_launches; l++) {
        const kr__bound_launch *bl = &bp->launches[l];
        kr__ready_step *rl = &out->launches[l];
        rl->fn = bp->program->kernels[bl->kernel].fn;
        rl->num_args = bl->num_args;
        rl->args = bl->args;
        int rc = kr__plan_dims(ctx, bp, l, c, &lim, &rl->dims);
        for (size_t a = 0; a < bl->num_args && rc == KR_OK; a++) {
            rl->params[a] = &rl->values[a];
            rc = kr__plan_arg_value(ctx, bp, l, a, c, (unsigned char *)&rl->values[a]);
        }
        if (rc != KR_OK) {
            kr__ready_free(out);
            return rc;
        }
    }
    return KR_OK;
}

int kr__ready_launch(kr_context *ctx, const kr__bound_plan *bp, kr__ready_plan *rp, CUstream s,
                     size_t *failed_launch)
{
    const kr__cuda_api *cu = kr__cuda();
    *failed_launch = SIZE_MAX;
    for (size_t l = 0; l < rp->num_launches; l++) {
        kr__ready_step *rl = &rp->launches[l];
        const kr__launch_dims *d = &rl->dims;
        CUresult r = CUDA_SUCCESS;
        if (d->smem > 48 * 1024) /* the opt-in for large dynamic shared memory */
            r = cu->cuFuncSetAttribute(rl->fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                       (int)d->smem);
        if (r == CUDA_SUCCESS)
            r = cu->cuLaunchKernel(rl->fn, d->grid[0], d->grid[1], d->grid[2], d->block[0],
                                   d->block[1], d->block[2], d->smem, s, rl->params, NULL);
        if (r != CUDA_SUCCESS) {
            *failed_launch = l;
            const kr__launch_text *lt = bp->launches[l].text;
            char what[256];
            snprintf(what, sizeof what, "%s (launch %s, grid %ux%ux%u, block %ux%ux%u, smem %u)",
                     lt->where, lt->kernel, d->grid[0], d->grid[1], d->grid[2], d->block[0],
                     d->block[1], d->block[2], d->smem);
            return kr__cuda_fail(ctx, r, what);
        }
    }
    return KR_OK;
}
