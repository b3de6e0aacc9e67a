/* libkreward: verify (is the candidate right?), and later benchmark, score
 * and evaluate (all in one). */
#ifndef KREWARD_EVALUATE_H
#define KREWARD_EVALUATE_H

#include "problem.h"
#include "report.h"
#include "score.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Skip the second run (determinism and race check). */
#define KR_VERIFY_SINGLE_RUN 0x1u

#define KR_VERIFY_OPTIONS_VERSION 1u
typedef struct kr_verify_options {
    uint32_t version;          /* KR_VERIFY_OPTIONS_VERSION */
    uint32_t seeds_per_case;   /* 0: 2 */
    uint64_t seed;             /* 0: fresh from the OS (recorded in the report) */
    double timeout_s;          /* per run of the plan; 0: 10 s */
    uint32_t flags;            /* KR_VERIFY_* */
    uint32_t max_mismatches;   /* listed per output; 0: 5 */
} kr_verify_options;

#define KR_VERIFY_OPTIONS_INIT { KR_VERIFY_OPTIONS_VERSION, 0, 0, 0.0, 0u, 0 }
KR_API int kr_verify_options_init(kr_verify_options *opts, uint32_t version);

/* Runs the candidate (program + plan) against the problem's reference on
 * every case with fresh inputs and several seeds: fresh buffers with canary
 * guard zones, poisoned outputs, the reference's results never left on the
 * device while the candidate runs, inputs hashed before and after, a second
 * run with another poison pattern at other addresses.
 *
 * *out always receives a report (also when the answer is not KR_OK). The
 * return value is KR_OK when the candidate was judged (passed or not: see
 * kr_report_verdict), or an error when it could not be (no GPU, the
 * reference failed, the context is unusable); the report says why. A
 * candidate that faults or hangs is judged (verdict fault/timeout) and
 * leaves the context unusable: later calls return KR_EPOISONED. */
KR_API int kr_verify(kr_context *ctx, const kr_problem *problem, const kr_program *candidate,
                     const kr_plan *plan, const kr_verify_options *opts, kr_report **out);

/* ---- benchmark ---- */

enum kr_bench_preset {
    KR_BENCH_FAST = 1,     /* RL: a tight budget per candidate (default) */
    KR_BENCH_PRECISE = 2,  /* leaderboard quality */
};

#define KR_BENCH_NO_FLUSH 0x1u      /* keep L2 warm between samples */
#define KR_BENCH_GRAPH 0x2u         /* replay the plan as a CUDA graph (kernels of a few us) */
#define KR_BENCH_NO_CHECK 0x4u      /* do not check the outputs of timed calls */
#define KR_BENCH_EVENTS_ONLY 0x8u   /* ignore CUPTI even where it runs */

#define KR_BENCH_OPTIONS_VERSION 1u
typedef struct kr_bench_options {
    uint32_t version;         /* KR_BENCH_OPTIONS_VERSION */
    uint32_t preset;          /* KR_BENCH_FAST when 0 */
    uint32_t min_samples;     /* per side; 0: the preset's */
    uint32_t max_samples;
    double min_time_s;        /* GPU time per side before stopping may happen */
    double max_time_s;        /* wall time for the whole measurement */
    double target_noise;      /* stop once the relative stdev is below this */
    uint32_t buffer_sets;     /* rotated buffer sets (fresh addresses and values) */
    uint32_t flags;           /* KR_BENCH_* */
    double check_fraction;    /* share of timed candidate calls whose outputs are checked */
    uint64_t seed;            /* 0: fresh from the OS */
    int64_t case_index;       /* -1: the problem's timing case */
} kr_bench_options;

#define KR_BENCH_OPTIONS_INIT { KR_BENCH_OPTIONS_VERSION, KR_BENCH_FAST, 0, 0, 0.0, 0.0, 0.0, 0, 0u, 0.0, 0, -1 }
KR_API int kr_bench_options_init(kr_bench_options *opts, uint32_t version, uint32_t preset);

/* A baseline enqueued by the caller (e.g. PyTorch eager or torch.compile):
 * put the work on `stream` (a CUstream), reading and writing the tensors at
 * these device addresses (problem order). Return 0, or non-zero with a
 * message in errbuf. Called many times; must not synchronize. */
typedef int (*kr_baseline_fn)(void *user, void *stream, const uint64_t *tensors, size_t num_tensors,
                              char *errbuf, size_t errbuf_size);

enum kr_baseline_kind {
    KR_BASELINE_NONE = 0,
    KR_BASELINE_REFERENCE = 1, /* the problem's reference kernel (default) */
    KR_BASELINE_PROGRAM = 2,   /* another program + plan */
    KR_BASELINE_CALLBACK = 3,  /* kr_baseline_fn */
};

#define KR_BASELINE_VERSION 1u
typedef struct kr_baseline {
    uint32_t version;
    uint32_t kind;             /* enum kr_baseline_kind */
    const kr_program *program; /* KR_BASELINE_PROGRAM */
    const kr_plan *plan;
    kr_baseline_fn fn;         /* KR_BASELINE_CALLBACK */
    void *user;
    const char *name;          /* shown in the report, e.g. "torch.compile" */
} kr_baseline;

#define KR_BASELINE_INIT { KR_BASELINE_VERSION, KR_BASELINE_REFERENCE, NULL, NULL, NULL, NULL, NULL }

/* Times the candidate, interleaved with the baseline, under identical
 * conditions: L2 flushed before every sample, host launch latency hidden
 * behind a spinning kernel, several rotated buffer sets (fresh addresses and
 * freshly generated values), CUPTI as the ground truth for GPU time where it
 * runs (events otherwise), samples taken at a throttled SM clock dropped,
 * adaptive stopping on noise. Outputs of sampled timed calls are checked
 * against the reference. Adds timing metrics and details to *report (which
 * may hold a verify result already; one is created when *report is NULL). */
KR_API int kr_benchmark(kr_context *ctx, const kr_problem *problem, const kr_program *candidate,
                        const kr_plan *plan, const kr_bench_options *opts,
                        const kr_baseline *baseline, kr_report **report);

/* ---- evaluate: all of it in one call ---- */

#define KR_EVALUATE_NO_BENCH 0x1u   /* verify only */

#define KR_EVALUATE_OPTIONS_VERSION 1u
typedef struct kr_evaluate_options {
    uint32_t version;                    /* KR_EVALUATE_OPTIONS_VERSION */
    uint32_t flags;                      /* KR_EVALUATE_* */
    const kr_compile_options *compile;   /* NULL: defaults */
    const kr_verify_options *verify;     /* NULL: defaults */
    const kr_bench_options *bench;       /* NULL: the fast preset */
    const kr_baseline *baseline;         /* NULL: the problem's reference */
    kr_reward *reward;                   /* NULL: not scored */
    const char *name;                    /* the candidate's file name, for messages */
} kr_evaluate_options;

#define KR_EVALUATE_OPTIONS_INIT { KR_EVALUATE_OPTIONS_VERSION, 0u, NULL, NULL, NULL, NULL, NULL, NULL }
KR_API int kr_evaluate_options_init(kr_evaluate_options *opts, uint32_t version);

/* The environment step: compile the candidate source, read its launch plan,
 * verify, benchmark against the baseline, score. Every outcome is a report
 * (*out is always set): a compile error, a plan that does not fit, a wrong
 * or faulting kernel are verdicts, and the report's "feedback" text says
 * what a model should fix. Returns KR_OK when the candidate was judged;
 * KR_ENODEVICE (verdict not_run, compile checks done) without a GPU; other
 * errors when the environment failed (the report's message says why). */
KR_API int kr_evaluate(kr_context *ctx, const kr_problem *problem, const char *source, size_t len,
                       const kr_evaluate_options *opts, kr_report **out);

#ifdef __cplusplus
}
#endif
#endif
