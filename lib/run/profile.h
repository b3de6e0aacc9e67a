/* Where an evaluation's wall time goes: a few counters the engine adds to
 * as it works (seconds), read as differences around one evaluation and
 * printed to stderr when KR_PROFILE is set (evaluate.c). For finding what
 * a throughput target costs on a GPU machine, where a profiler may not be. */
#ifndef KR_ENGINE_PROFILE_H
#define KR_ENGINE_PROFILE_H

#include "common/clock.h"

enum {
    KR__PROF_ALLOC,      /* device buffers: cuMemAlloc and their guard fills */
    KR__PROF_FREE,       /* cuMemFree */
    KR__PROF_WAIT,       /* waiting for the engine's stream */
    KR__PROF_REFERENCE,  /* reference runs (source or golden), waits included */
    KR__PROF_OPEN,       /* opening the reference: its compile (a cache hit), load, plan */
    KR__PROF_N
};

extern const char *const kr__prof_names[KR__PROF_N];

/* KR_PROFILE's value where it asks for a profile ("1", "metrics", ...),
 * NULL where it is unset, empty or "0". */
const char *kr__profile_mode(void);

/* Adds the seconds since t0 to counter `which` of the context's engine (a
 * no-op without one). */
struct kr_context;
void kr__prof_add(struct kr_context *ctx, int which, double t0);

#endif
