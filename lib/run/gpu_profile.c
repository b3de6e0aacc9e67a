/* The GPU's own time for the engine's generator kernels, in profile mode
 * (KR_PROFILE set when the engine was made): the host-side counters of
 * profile.h see only waits, and fresh inputs are most of the bytes a
 * candidate's evaluation writes (issue 34's split). Each generator launch
 * is bracketed by an event pair; pairs are read when a wait finds the
 * stream done, so nothing here adds a synchronisation. */
#include "run/engine.h"

#include <stdlib.h>
#include <string.h>

int kr__gpu_profile_begin(kr_context *ctx)
{
    kr__engine *e = kr__engine_of(ctx);
    if (!e || !e->gpu_profile || e->gen_used == KR__GEN_EVENTS)
        return -1; /* off, or more launches than pairs between two waits: not counted */
    const kr__cuda_api *cu = kr__cuda();
    size_t i = e->gen_used;
    for (int k = 0; k < 2; k++)
        if (!e->gen_ev[i][k] && cu->cuEventCreate(&e->gen_ev[i][k], CU_EVENT_DEFAULT) != CUDA_SUCCESS)
            return -1;
    if (cu->cuEventRecord(e->gen_ev[i][0], e->stream) != CUDA_SUCCESS)
        return -1;
    return (int)i;
}

void kr__gpu_profile_end(kr_context *ctx, int slot)
{
    kr__engine *e = kr__engine_of(ctx);
    if (slot < 0 || !e || (size_t)slot != e->gen_used)
        return;
    if (kr__cuda()->cuEventRecord(e->gen_ev[slot][1], e->stream) == CUDA_SUCCESS)
        e->gen_used++;
}

void kr__gpu_profile_harvest(kr__engine *e)
{
    const kr__cuda_api *cu = kr__cuda();
    for (size_t i = 0; i < e->gen_used; i++) {
        float ms = 0;
        if (cu->cuEventElapsedTime(&ms, e->gen_ev[i][0], e->gen_ev[i][1]) == CUDA_SUCCESS)
            e->gen_gpu_s += ms * 1e-3;
    }
    e->gen_used = 0;
}

void kr__gpu_profile_free(kr__engine *e)
{
    for (size_t i = 0; i < KR__GEN_EVENTS; i++)
        for (int k = 0; k < 2; k++)
            if (e->gen_ev[i][k])
                kr__cuda()->cuEventDestroy(e->gen_ev[i][k]);
}
