/* CUPTI activity tracing of every kernel in the process, the ground truth
 * for timing: it sees kernels on every stream and device-launched ones,
 * which event pairs on one stream miss. CUPTI allows one activity
 * subscriber per process (nsys, ncu or torch.profiler would clash): when it
 * cannot start, timing falls back to events and the report says so. */
#ifndef KR_TRACE_H
#define KR_TRACE_H

#include <cuda.h>
#include <stddef.h>
#include <stdint.h>

typedef struct kr__kernel_record {
    uint64_t start, end;      /* ns, CUPTI's clock */
    uint32_t stream;
    uint32_t correlation;
    uint8_t device_launched;
    uint8_t marker;           /* KR__MARK_SPIN, KR__MARK_PROBE, or 0: anything else */
} kr__kernel_record;

/* The library's own launches that frame a benchmark sample. */
#define KR__MARK_SPIN 1   /* kr_spin_until: a sample starts after it */
#define KR__MARK_PROBE 2  /* kr_spin_cycles: the clock probe that ends it */

/* Starts tracing once per process (before modules are loaded, so nothing
 * is missed). 0, or -1 with the reason. Safe to call again. */
int kr__trace_start(const char *cuda_home, char *why, size_t why_size);
int kr__trace_active(void);
/* Flushes CUPTI and hands over every record gathered since the last call,
 * in start order (caller frees). */
int kr__trace_collect(kr__kernel_record **records, size_t *count);
/* Launches of this function carry the marker in the records (matched by
 * function handle at launch and correlation id after, never by kernel
 * name). The engine registers its spin kernel and clock probe per context,
 * and unregisters them before their module goes. */
void kr__trace_register_marker(CUfunction fn, uint8_t marker);
void kr__trace_unregister_marker(CUfunction fn);
/* Drops whatever was gathered so far. */
void kr__trace_discard(void);
/* Records are process-wide, so a measurement that reads them holds this
 * process-wide lock from its first sample to its collection: two contexts
 * benchmarking at once take turns instead of taking each other's records. */
void kr__trace_lock(void);
void kr__trace_unlock(void);

#endif
