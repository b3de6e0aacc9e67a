/* Where the GPU's own time goes, in profile mode (KR_PROFILE set when the
 * engine was made): the host-side counters of profile.h see only waits,
 * and issue 34's split needs the GPU's side of them. The engine's own work
 * (fresh inputs, fills, checks, the reset before a call,
 * reference runs) is bracketed by event pairs, read when a wait finds the
 * stream done, so nothing here adds a synchronisation. The candidate's and
 * the baseline's calls are counted from the event pairs that already time
 * them (a benchmark sample's start and stop: no event joins a timed
 * window). What a wait saw and no category holds is the GPU idle between
 * the host's steps. */
#ifndef KR_GPU_PROFILE_H
#define KR_GPU_PROFILE_H

#include "driver/cuda_api.h"

#include <stddef.h>

enum {
    KR__GPU_GENERATE,  /* the generator kernels: fresh inputs */
    KR__GPU_FILL,      /* poison, guard zones, the L2 flush, freed buffers zeroed */
    KR__GPU_CHECKS,    /* hashes, canary checks, comparisons, bit differences */
    KR__GPU_RESET,     /* before a call: sections restored, scratch reset, shared memory scrubbed */
    KR__GPU_REFERENCE, /* reference runs for expected outputs (the fast kernel or the naive one) */
    KR__GPU_CANDIDATE, /* the candidate's calls: verification runs and benchmark samples */
    KR__GPU_BASELINE,  /* the baseline's benchmark samples */
    KR__GPU_N
};

extern const char *const kr__gpu_names[KR__GPU_N];

/* Event pairs between two waits; launches past them go uncounted. */
#define KR__GPU_EVENTS 256

typedef struct kr__gpu_timer {
    int on;                            /* KR_PROFILE was set when the engine was made */
    CUevent ev[KR__GPU_EVENTS][2];
    unsigned char cat[KR__GPU_EVENTS];
    size_t used;                       /* pairs recorded since the last harvest */
    int depth;                         /* open pairs: one inside another counts in the outer only */
    double gpu_s[KR__GPU_N];           /* each category's GPU time so far */
    /* what each category's time bought: its harvested pairs (kernels or
     * copies, bracketed one by one) and the bytes they touched (read plus
     * written), so a category's GB/s tells a slow kernel from launch gaps */
    double pairs[KR__GPU_N], bytes[KR__GPU_N];
} kr__gpu_timer;

/* The pair's slot, its start recorded on stream (-1: off; -2: inside an
 * open pair, which counts it, or no pair left); end(slot) closes it,
 * whatever begin returned. A wait's harvest closes whatever an error path
 * left open. */
int kr__gpu_timer_begin(kr__gpu_timer *g, int cat, CUstream stream);
void kr__gpu_timer_end(kr__gpu_timer *g, int slot, CUstream stream);
/* Counts bytes a category's work touches (read plus written); called just
 * before the work's begin, and counted only where that pair will be timed. */
void kr__gpu_timer_bytes(kr__gpu_timer *g, int cat, double bytes);
/* Adds seconds measured otherwise (a sample's own event pair). */
void kr__gpu_timer_add(kr__gpu_timer *g, int cat, double seconds);
/* Adds the recorded pairs' times (the stream done) to their categories. */
void kr__gpu_timer_harvest(kr__gpu_timer *g);
/* The same for the pairs done so far, in order, at a wait for one event
 * (work past it still running); the rest stay for a later harvest. */
void kr__gpu_timer_harvest_done(kr__gpu_timer *g);
void kr__gpu_timer_free(kr__gpu_timer *g);

#endif
