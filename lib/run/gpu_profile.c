/* The generator's GPU time in profile mode (gpu_profile.h). */
#include "run/gpu_profile.h"

int kr__gen_timer_begin(kr__gen_timer *g, CUstream stream)
{
    if (!g->on || g->used == KR__GEN_EVENTS)
        return -1;
    const kr__cuda_api *cu = kr__cuda();
    size_t i = g->used;
    for (int k = 0; k < 2; k++)
        if (!g->ev[i][k] && cu->cuEventCreate(&g->ev[i][k], CU_EVENT_DEFAULT) != CUDA_SUCCESS)
            return -1;
    return cu->cuEventRecord(g->ev[i][0], stream) == CUDA_SUCCESS ? (int)i : -1;
}

void kr__gen_timer_end(kr__gen_timer *g, int slot, CUstream stream)
{
    if (slot >= 0 && (size_t)slot == g->used &&
        kr__cuda()->cuEventRecord(g->ev[slot][1], stream) == CUDA_SUCCESS)
        g->used++;
}

void kr__gen_timer_harvest(kr__gen_timer *g)
{
    const kr__cuda_api *cu = kr__cuda();
    for (size_t i = 0; i < g->used; i++) {
        float ms = 0;
        if (cu->cuEventElapsedTime(&ms, g->ev[i][0], g->ev[i][1]) == CUDA_SUCCESS)
            g->gpu_s += ms * 1e-3;
    }
    g->used = 0;
}

void kr__gen_timer_free(kr__gen_timer *g)
{
    for (size_t i = 0; i < KR__GEN_EVENTS; i++)
        for (int k = 0; k < 2; k++)
            if (g->ev[i][k])
                kr__cuda()->cuEventDestroy(g->ev[i][k]);
}
