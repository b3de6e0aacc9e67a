/* The GPU's own time per category in profile mode (gpu_profile.h). */
#include "run/gpu_profile.h"

const char *const kr__gpu_names[KR__GPU_N] = {"generate",  "fill",      "checks",  "reset",
                                              "reference", "candidate", "baseline"};

int kr__gpu_timer_begin(kr__gpu_timer *g, int cat, CUstream stream)
{
    if (!g->on)
        return -1;
    if (g->depth++ > 0 || g->used == KR__GPU_EVENTS)
        return -2;
    const kr__cuda_api *cu = kr__cuda();
    size_t i = g->used;
    for (int k = 0; k < 2; k++)
        if (!g->ev[i][k] && cu->cuEventCreate(&g->ev[i][k], CU_EVENT_DEFAULT) != CUDA_SUCCESS)
            return -2;
    g->cat[i] = (unsigned char)cat;
    return cu->cuEventRecord(g->ev[i][0], stream) == CUDA_SUCCESS ? (int)i : -2;
}

void kr__gpu_timer_end(kr__gpu_timer *g, int slot, CUstream stream)
{
    if (slot == -1)
        return;
    if (g->depth > 0)
        g->depth--;
    if (slot >= 0 && (size_t)slot == g->used &&
        kr__cuda()->cuEventRecord(g->ev[slot][1], stream) == CUDA_SUCCESS)
        g->used++;
}

void kr__gpu_timer_bytes(kr__gpu_timer *g, int cat, double bytes)
{
    /* only where the pair about to begin will be timed in cat: inside an
     * open pair its time is the outer category's */
    if (g->on && g->depth == 0 && g->used < KR__GPU_EVENTS)
        g->bytes[cat] += bytes;
}

void kr__gpu_timer_add(kr__gpu_timer *g, int cat, double seconds)
{
    if (g->on) {
        g->gpu_s[cat] += seconds;
        g->pairs[cat] += 1;
    }
}

void kr__gpu_timer_harvest(kr__gpu_timer *g)
{
    const kr__cuda_api *cu = kr__cuda();
    for (size_t i = 0; i < g->used; i++) {
        float ms = 0;
        if (cu->cuEventElapsedTime(&ms, g->ev[i][0], g->ev[i][1]) == CUDA_SUCCESS) {
            g->gpu_s[g->cat[i]] += ms * 1e-3;
            g->pairs[g->cat[i]] += 1;
        }
    }
    g->used = 0;
    g->depth = 0;
}

void kr__gpu_timer_harvest_done(kr__gpu_timer *g)
{
    const kr__cuda_api *cu = kr__cuda();
    size_t done = 0;
    if (!g->on || g->depth > 0) /* a pair still open: its slots are in use */
        return;
    while (done < g->used && cu->cuEventQuery(g->ev[done][1]) == CUDA_SUCCESS) {
        float ms = 0;
        if (cu->cuEventElapsedTime(&ms, g->ev[done][0], g->ev[done][1]) == CUDA_SUCCESS) {
            g->gpu_s[g->cat[done]] += ms * 1e-3;
            g->pairs[g->cat[done]] += 1;
        }
        done++;
    }
    /* the pending pairs to the front, their slots' events swapped so each
     * slot keeps events of its own */
    for (size_t i = done; i < g->used; i++) {
        size_t j = i - done;
        for (int k = 0; k < 2; k++) {
            CUevent t = g->ev[j][k];
            g->ev[j][k] = g->ev[i][k];
            g->ev[i][k] = t;
        }
        g->cat[j] = g->cat[i];
    }
    g->used -= done;
}

void kr__gpu_timer_free(kr__gpu_timer *g)
{
    for (size_t i = 0; i < KR__GPU_EVENTS; i++)
        for (int k = 0; k < 2; k++)
            if (g->ev[i][k])
                kr__cuda()->cuEventDestroy(g->ev[i][k]);
}
