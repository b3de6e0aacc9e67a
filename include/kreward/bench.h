/* libkreward: benchmark: how fast is the candidate, against a baseline? */
#ifndef KREWARD_BENCH_H
#define KREWARD_BENCH_H

#include "plan.h"
#include "report.h"

#ifdef __cplusplus
extern "C" {
#endif

enum kr_bench_preset {
    KR_BENCH_FAST = 1,     /* RL: a tight budget per candidate (default) */
    KR_BENCH_PRECISE = 2,  /* leaderboard quality */
};

#define KR_BENCH_NO_FLUSH 0x1u      /* keep L2 warm between samples */
#define KR_BENCH_GRAPH 0x2u         /* replay the plan as a CUDA graph (kernels of a few us) */
#define KR_BENCH_NO_CHECK 0x4u      /* do not check the outputs of timed calls */
#define KR_BENCH_EVENTS_ONLY 0x8u   /* ignore CUPTI even where it runs */
/* Time the reference baseline afresh only: by default (fast preset) a
 * benchmark adds the recent baseline samples of the same problem and case in
 * this context to its own fresh, interleaved ones when they agree
 * (docs/benchmarking.md); the precise preset never shares. */
#define KR_BENCH_NO_SHARE 0x40u
/* After the measurement, never during it (docs/counters.md): */
#define KR_BENCH_COUNTERS 0x10u     /* hardware counters per kernel, on an extra profiled run */
#define KR_BENCH_ROBUST 0x20u       /* the speedup again under perturbed conditions */

#define KR_BENCH_OPTIONS_VERSION 2u
typedef struct kr_bench_options {
    uint32_t version;         /* KR_BENCH_OPTIONS_VERSION */
    uint32_t preset;          /* enum kr_bench_preset; KR_BENCH_FAST when 0 */
    uint32_t min_samples;     /* per side; 0: the preset's */
    uint32_t max_samples;
    double min_time_s;        /* GPU time per side before stopping may happen */
    double max_time_s;        /* wall time for the whole measurement */
    double target_noise;      /* stop once the relative stdev is below this, or the
                                 median's relative standard error below a quarter of it */
    uint32_t buffer_sets;     /* rotated buffer sets (fresh addresses and values) */
    uint32_t flags;           /* KR_BENCH_* */
    double check_fraction;    /* share of timed candidate calls whose outputs are checked */
    uint64_t seed;            /* 0: fresh from the OS */
    int64_t case_index;       /* -1: the problem's timing case */
    /* version 2: the time budget. A candidate whose median is more than
     * max_slowdown times the baseline's, or one call of which takes more
     * than max_call_s, stops the measurement early with the flag `slow`
     * (the speed terms of a reward then pay their floor). */
    double max_slowdown;      /* 0: 50 */
    double max_call_s;        /* 0: 1.0 s */
} kr_bench_options;

#define KR_BENCH_OPTIONS_INIT \
    { KR_BENCH_OPTIONS_VERSION, KR_BENCH_FAST, 0, 0, 0.0, 0.0, 0.0, 0, 0u, 0.0, 0, -1, 0.0, 0.0 }
/* Fills the fields that existed in `version` with the defaults of `preset`. */
KR_API int kr_bench_options_init(kr_bench_options *opts, uint32_t version, int preset);

/* A baseline enqueued by the caller (e.g. PyTorch eager or torch.compile):
 * put the work on `stream` (a CUstream), reading and writing the tensors at
 * these device addresses (problem order). Return 0, or non-zero with a
 * message in errbuf. Called many times, from the thread that called
 * kr_benchmark; must not synchronize. */
typedef int (*kr_baseline_fn)(void *user, void *stream, const uint64_t *tensors, size_t num_tensors,
                              char *errbuf, size_t errbuf_size);

enum kr_baseline_kind {
    KR_BASELINE_NONE = 0,
    KR_BASELINE_REFERENCE = 1, /* the problem's reference kernel (default) */
    KR_BASELINE_PROGRAM = 2,   /* another program + plan */
    KR_BASELINE_CALLBACK = 3,  /* kr_baseline_fn */
};

/* Borrowed for the duration of one call: the caller keeps program, plan
 * and user alive until the call returns. */
#define KR_BASELINE_VERSION 1u
typedef struct kr_baseline {
    uint32_t version;          /* KR_BASELINE_VERSION */
    uint32_t kind;             /* enum kr_baseline_kind */
    const kr_program *program; /* KR_BASELINE_PROGRAM: of the same context */
    const kr_plan *plan;
    kr_baseline_fn fn;         /* KR_BASELINE_CALLBACK */
    void *user;
    const char *name;          /* shown in the report, e.g. "torch.compile" */
} kr_baseline;

#define KR_BASELINE_INIT { KR_BASELINE_VERSION, KR_BASELINE_REFERENCE, NULL, NULL, NULL, NULL, NULL }
/* Fills the fields that existed in `version` with their defaults. */
KR_API int kr_baseline_init(kr_baseline *baseline, uint32_t version);

/* Times the candidate, interleaved with the baseline, under identical
 * conditions: L2 flushed before every sample, host launch latency hidden
 * behind a spinning kernel, several rotated buffer sets (fresh addresses and
 * freshly generated values), CUPTI as the ground truth for GPU time where it
 * runs (events otherwise), samples taken at a throttled SM clock dropped,
 * adaptive stopping on noise. Outputs of sampled timed calls are checked
 * against the reference. Adds timing metrics and details to report (which
 * may hold a verify result already). baseline NULL: the problem's
 * reference. CUPTI records are process-wide: benchmarks in one process take
 * turns (a process-wide lock), so no measurement sees another's kernels. */
KR_API int kr_benchmark(kr_report *report, kr_context *ctx, const kr_problem *problem,
                        const kr_program *candidate, const kr_plan *plan,
                        const kr_bench_options *opts, const kr_baseline *baseline);

#ifdef __cplusplus
}
#endif
#endif
