/* Attributing CUPTI kernel records to the benchmark's samples: per sample
 * (records in start order, each sample opened by its spin kernel), the
 * kernels on the sample's stream between the spin kernel and the clock
 * probe, and every kernel on any other stream until the next sample; the
 * span from the first start to the last end, plus the whole of any
 * side-stream kernel that started while the stream was blocked. */
#include "bench/bench_impl.h"
#include "driver/trace.h"

#include <stdlib.h>

int kr__bench_cupti_times(bstate *b, double *out[2], size_t n_out[2], int *side_stream,
                          int *device_launched)
{
    kr__kernel_record *r;
    size_t n;
    if (kr__trace_collect(&r, &n) != 0)
        return -1;
    size_t sample = 0, found = 0;
    uint64_t pending = 0; /* other-stream work since the last probe */
    uint32_t own = 0;     /* the engine's stream, as CUPTI numbers it */
    for (size_t i = 0; i < n; i++)
        if (r[i].marker == KR__MARK_SPIN) {
            own = r[i].stream;
            break;
        }
    for (size_t i = 0; i < n && sample < b->num_order; i++) {
        if (r[i].marker != KR__MARK_SPIN) {
            /* another stream's kernel that started before this sample's spin
             * kernel (e.g. launched by a callback while the stream was still
             * flushing) belongs to the sample that follows */
            if (r[i].marker == 0 && r[i].stream != own) {
                pending += r[i].end - r[i].start;
                *side_stream = 1;
            }
            continue;
        }
        uint64_t lo = UINT64_MAX, hi = 0, hidden = pending;
        pending = 0;
        int probe_seen = 0;
        size_t j = i + 1;
        for (; j < n && r[j].marker != KR__MARK_SPIN && !probe_seen; j++) {
            if (r[j].marker == KR__MARK_PROBE) {
                probe_seen = 1;
                continue;
            }
            if (r[j].stream == r[i].stream) {
                if (r[j].start < r[i].end)
                    continue;
            } else {
                *side_stream = 1;
                /* started while the sample's stream was blocked: counts in
                 * full, so hiding work never makes anything look faster */
                if (r[j].start < r[i].end) {
                    hidden += r[j].end - r[j].start;
                    continue;
                }
            }
            lo = r[j].start < lo ? r[j].start : lo;
            hi = r[j].end > hi ? r[j].end : hi;
            *device_launched |= r[j].device_launched;
        }
        i = j - 1; /* after the probe: the engine's own kernels, then the next sample */
        int which = b->order[sample++];
        if (hi > lo || hidden) {
            out[which][n_out[which]++] = (double)((hi > lo ? hi - lo : 0) + hidden) * 1e-3;
            found++;
        }
    }
    free(r);
    return found == b->num_order ? 0 : -1;
}
