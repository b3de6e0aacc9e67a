/* Hardware counters through CUPTI's range profiler and profiler host API
 * (CUPTI 12.6 and later), loaded at run time from the CUPTI that tracing
 * loads: never linked, and a CUPTI without these entry points only turns
 * counters off. One session profiles the kernels some work launches, each
 * kernel a range (auto ranges), every pass replayed by CUPTI around each
 * kernel (kernel replay: it saves and restores device memory between
 * passes). It knows nothing of plans or reports: the engine says what to
 * launch (bench/counters.c). */
#ifndef KR_PROFILER_H
#define KR_PROFILER_H

#include <cuda.h>
#include <stddef.h>

/* Enqueues the work to profile and waits for it; 0, or a KR_E* status. */
typedef int (*kr__profiler_work)(void *user);

typedef struct kr__profiler_out {
    size_t num_ranges;     /* kernels seen (one range each), at most max_ranges */
    size_t passes;         /* replays CUPTI needed for the metrics collected */
    int no_permission;     /* refused: counters are restricted to administrators */
    int work_rc;           /* what the work returned (0 when it was not run) */
    size_t num_collected;  /* metrics the chip knows, of those asked */
} kr__profiler_out;

/* Profiles the kernels `work` launches on context `cu` (current on this
 * thread) of device `device_index`. values[range * num_metrics + m] gets
 * metric m of the range-th kernel, NaN where the chip has no such metric
 * (the others are still collected). 0 on success; -1 with the reason in why
 * when counters cannot be collected here (no CUPTI, a CUPTI before 12.6,
 * no permission, another profiler in the process), or when the work
 * failed (out->work_rc). */
int kr__profiler_run(const char *cuda_home, CUcontext cu, int device_index,
                     const char *const *metrics, size_t num_metrics, size_t max_ranges,
                     kr__profiler_work work, void *user, double *values, kr__profiler_out *out,
                     char *why, size_t why_size);

#endif
