/* libkreward: reports. Everything one evaluation produced: the verdict,
 * flags, named metrics (numbers), texts (message, feedback for the model,
 * compile log), details as JSON, and the reward with its per-term breakdown.
 *
 * Reports can be created and filled by hand, so reward terms are unit-tested
 * on a machine without a GPU. Metric keys are documented in
 * docs/report-format.md; any other key may be set for custom terms.
 *
 * One report travels through an evaluation: the engine verbs (kr_verify,
 * kr_benchmark, kr_evaluate) and kr_reward_score write into the report they
 * are given. A report is used by one thread at a time. */
#ifndef KREWARD_REPORT_H
#define KREWARD_REPORT_H

#include "common.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kr_report kr_report;

/* Pinned: appear in JSON and in reward configurations by name. */
enum kr_verdict {
    KR_VERDICT_NONE = 0,          /* nothing evaluated yet */
    KR_VERDICT_PASSED = 1,        /* correct on every case and seed */
    KR_VERDICT_INCORRECT = 2,     /* ran, produced wrong or unwritten outputs, or broke a rule */
    KR_VERDICT_COMPILE_ERROR = 3,
    KR_VERDICT_INVALID_PLAN = 4,  /* the launch plan does not fit the kernels or the device */
    KR_VERDICT_LAUNCH_ERROR = 5,  /* the driver refused a launch (resources, configuration) */
    KR_VERDICT_FAULT = 6,         /* illegal address, trap, misaligned access ... */
    KR_VERDICT_TIMEOUT = 7,       /* a kernel ran past its deadline (hang) */
    KR_VERDICT_NOT_RUN = 8,       /* could not be evaluated here (no GPU); not the candidate's fault */
    KR_VERDICT_ERROR = 9,         /* infrastructure error; not the candidate's fault */
};

/* Flags: facts noticed on the way; some fail the candidate, some only inform. */
#define KR_FLAG_NONDETERMINISTIC   (1ull << 0)  /* bitwise different runs within tolerance (e.g. atomics) */
#define KR_FLAG_UNWRITTEN          (1ull << 1)  /* outputs left holding the poison pattern */
#define KR_FLAG_OUT_OF_BOUNDS      (1ull << 2)  /* a canary guard zone was overwritten */
#define KR_FLAG_INPUT_MUTATED      (1ull << 3)  /* an input tensor changed */
#define KR_FLAG_RACE               (1ull << 4)  /* a second run disagreed beyond tolerance */
#define KR_FLAG_NAN                (1ull << 5)  /* NaN where the reference has none (or the reverse) */
#define KR_FLAG_SHAPE_SPECIFIC     (1ull << 6)  /* correct on some cases only */
#define KR_FLAG_IMPLAUSIBLE_SPEED  (1ull << 7)  /* faster than the bytes it must move allow */
#define KR_FLAG_SIDE_STREAM        (1ull << 8)  /* work seen on another stream or device-launched */
#define KR_FLAG_TIMED_OUTPUT_WRONG (1ull << 9)  /* outputs of timed calls were wrong */
#define KR_FLAG_THROTTLED          (1ull << 10) /* samples were dropped for a low SM clock */
#define KR_FLAG_NOISY              (1ull << 11) /* the timing did not reach its noise target */
#define KR_FLAG_PRECISION          (1ull << 12) /* errors look like reduced precision (e.g. fp16 math) */
#define KR_FLAG_SLOW               (1ull << 13) /* stopped early: far slower than the baseline */
#define KR_FLAG_WEAK_PROBLEM       (1ull << 14) /* the problem's outputs barely depend on its inputs */
#define KR_FLAG_REFERENCE_COPY     (1ull << 15) /* the candidate is the reference: its source,
                                                  * normalised, or its compiled kernels */
/* Evidence about whose kernels did the work (ModelNew candidates: torch code
 * that may call kernels of its own; docs/kernelbench.md, "Attribution") */
#define KR_FLAG_TORCH_FALLBACK     (1ull << 16) /* no kernel of its own ran: torch or a library did the work */
#define KR_FLAG_MOSTLY_TORCH       (1ull << 17) /* its own kernels took under half of its GPU time */
#define KR_FLAG_UNATTRIBUTED       (1ull << 18) /* whose kernels ran is unknown (no profiler here) */
#define KR_FLAG_LAUNCH_BOUND       (1ull << 19) /* a call's time is mostly the host's: the speedup is noisy */
#define KR_FLAG_TIMING_MISMATCH    (1ull << 20) /* the candidate's own clock disagreed with the caller's */
#define KR_FLAG_SANDBOX_DENIED     (1ull << 21) /* the sandbox refused something the candidate did */

KR_API int kr_report_new(kr_report **out);
KR_API void kr_report_free(kr_report *report);

KR_API int kr_report_verdict(const kr_report *report);
KR_API int kr_report_set_verdict(kr_report *report, int verdict);
KR_API const char *kr_verdict_name(int verdict);   /* "passed", "incorrect", ... */
KR_API int kr_verdict_from_name(const char *name);  /* 0 when unknown */

KR_API uint64_t kr_report_flags(const kr_report *report);
KR_API int kr_report_set_flags(kr_report *report, uint64_t flags);
KR_API const char *kr_flag_name(uint64_t flag);     /* one flag: "nondeterministic", ... */
KR_API uint64_t kr_flag_from_name(const char *name);

/* Named numbers ("time_us", "speedup", "correct", ...). get returns
 * KR_ENOTFOUND when the metric was never set. */
KR_API int kr_report_get(double *value, const kr_report *report, const char *key);
KR_API int kr_report_set(kr_report *report, const char *key, double value);
KR_API size_t kr_report_metric_count(const kr_report *report);
KR_API const char *kr_report_metric_name(const kr_report *report, size_t i);

/* Named texts: "message" (one line: why it failed), "feedback" (for a model
 * in a multi-turn loop; never contains seeds), "compile_log", "problem",
 * "candidate", "source" (the candidate's code). NULL when unset. */
KR_API const char *kr_report_text(const kr_report *report, const char *key);
KR_API int kr_report_set_text(kr_report *report, const char *key, const char *text);

/* The reward and its breakdown, written by scoring. */
KR_API double kr_report_reward(const kr_report *report);
KR_API size_t kr_report_term_count(const kr_report *report);
KR_API const char *kr_report_term_name(const kr_report *report, size_t i);
KR_API double kr_report_term_value(const kr_report *report, size_t i);   /* unweighted */
KR_API double kr_report_term_weight(const kr_report *report, size_t i);
KR_API int kr_report_term_counted(const kr_report *report, size_t i);    /* 0 when gated off */

/* The whole report as JSON (docs/report-format.md); caller frees. */
KR_API int kr_report_json(char **json_out, const kr_report *report);

#ifdef __cplusplus
}
#endif
#endif
