/* The GPU's own time for the engine's generator kernels, in profile mode
 * (KR_PROFILE set when the engine was made): the host-side counters of
 * profile.h see only waits, and fresh inputs are most of the bytes a
 * candidate's evaluation writes (issue 34's split). Each generator launch
 * is bracketed by an event pair; pairs are read when a wait finds the
 * stream done, so nothing here adds a synchronisation. */
#ifndef KR_GPU_PROFILE_H
#define KR_GPU_PROFILE_H

#include "driver/cuda_api.h"

#include <stddef.h>

/* Event pairs around generator launches between two waits. */
#define KR__GEN_EVENTS 64

typedef struct kr__gen_timer {
    int on;                            /* KR_PROFILE was set when the engine was made */
    CUevent ev[KR__GEN_EVENTS][2];
    size_t used;                       /* pairs recorded since the last harvest */
    double gpu_s;                      /* the generator's GPU time so far */
} kr__gen_timer;

/* The pair's slot (-1: off, or more launches than pairs: not counted),
 * its start recorded on stream; end records its stop. */
int kr__gen_timer_begin(kr__gen_timer *g, CUstream stream);
void kr__gen_timer_end(kr__gen_timer *g, int slot, CUstream stream);
/* Adds the recorded pairs' times (the stream done) to gpu_s. */
void kr__gen_timer_harvest(kr__gen_timer *g);
void kr__gen_timer_free(kr__gen_timer *g);

#endif
