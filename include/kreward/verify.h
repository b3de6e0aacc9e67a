/* libkreward: verify: is the candidate right? */
#ifndef KREWARD_VERIFY_H
#define KREWARD_VERIFY_H

#include "plan.h"
#include "report.h"

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
    double timeout_s;          /* per run of the plan, at most; 0: 10 s. A run's
                                * deadline is 10^5 x the reference's GPU time on
                                * its case (timed once per problem in a context),
                                * at least 0.25 s, at most this: a hang on a small
                                * case ends in a fraction of a second (a candidate
                                * calling device printf: this) */
    uint32_t flags;            /* KR_VERIFY_* */
    uint32_t max_mismatches;   /* listed per output; 0: 5 */
} kr_verify_options;

#define KR_VERIFY_OPTIONS_INIT { KR_VERIFY_OPTIONS_VERSION, 0, 0, 0.0, 0u, 0 }
/* Fills the fields that existed in `version` with their defaults. */
KR_API int kr_verify_options_init(kr_verify_options *opts, uint32_t version);

/* Runs the candidate (program + plan) against the problem's reference on
 * every case with fresh inputs and several seeds: fresh buffers with canary
 * guard zones, poisoned outputs, the reference's results never left on the
 * device while the candidate runs, inputs hashed before and after, a second
 * run with another poison pattern at other addresses. Writes the verdict,
 * metrics, feedback and details into report.
 *
 * Returns KR_OK when the candidate was judged (passed or not: see
 * kr_report_verdict), or an error when it could not be (no GPU, the
 * reference failed, the context is unusable); the report says why. A
 * candidate that faults or hangs is judged (verdict fault/timeout) and
 * leaves the context unusable: later calls return KR_EPOISONED. */
KR_API int kr_verify(kr_report *report, kr_context *ctx, const kr_problem *problem,
                     const kr_program *candidate, const kr_plan *plan,
                     const kr_verify_options *opts);

#ifdef __cplusplus
}
#endif
#endif
