/* libkreward: evaluate: the whole environment step in one call (compile,
 * plan, verify, benchmark, score), for a source or a ready program. */
#ifndef KREWARD_EVALUATE_H
#define KREWARD_EVALUATE_H

#include "bench.h"
#include "reward.h"
#include "verify.h"

#ifdef __cplusplus
extern "C" {
#endif

#define KR_EVALUATE_NO_BENCH 0x1u   /* verify only */

/* Every pointer is borrowed for the duration of the call. */
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
/* Fills the fields that existed in `version` with their defaults. */
KR_API int kr_evaluate_options_init(kr_evaluate_options *opts, uint32_t version);

/* The environment step: compile the candidate source, read its launch plan,
 * verify, benchmark against the baseline, score, all into report (a new
 * one, from kr_report_new). Every outcome is a report: a compile error, a
 * plan that does not fit, a wrong or faulting kernel are verdicts, and the
 * report's "feedback" text says what a model should fix. Returns KR_OK when
 * the candidate was judged; KR_ENODEVICE (verdict not_run, compile checks
 * done) without a GPU; other errors when the environment failed (the
 * report's message says why). */
KR_API int kr_evaluate(kr_report *report, kr_context *ctx, const kr_problem *problem,
                       const char *source, size_t len, const kr_evaluate_options *opts);

/* The same for a program built elsewhere (e.g. a Triton cubin through
 * kr_program_from_binary) and its plan: checks the plan, verifies,
 * benchmarks, scores. The program's compile metrics (compile_seconds,
 * registers, kernels) are in the report as for kr_evaluate; opts->compile
 * is not used. */
KR_API int kr_evaluate_program(kr_report *report, kr_context *ctx, const kr_problem *problem,
                               const kr_program *program, const kr_plan *plan,
                               const kr_evaluate_options *opts);

#ifdef __cplusplus
}
#endif
#endif
