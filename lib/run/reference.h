/* The one place where a problem's expected outputs come from: its
 * reference kernel (compiled, with its plan) or, for golden problems, the
 * caller's golden callback. Every run regenerates the inputs from the seed
 * itself, so what a candidate did to its own buffers never reaches the
 * expected values. */
#ifndef KR_REFERENCE_H
#define KR_REFERENCE_H

#include "run/workspace.h"

typedef struct kr__reference {
    const kr_problem *p;
    int golden;            /* 1: outputs come from the golden callback */
    kr_program *program;   /* source references: owned */
    kr_plan *plan;
    kr__bound_plan bp;
    int bound;
    kr__run *runs;         /* per case, prepared on first use */
    kr__tset *inputs;      /* per case: where the inputs are regenerated */
    /* reference.fast, where this context found it agrees with the
     * reference (fast_reference.c): the expected outputs come from it; the
     * reference above stays the baseline a benchmark times */
    kr_program *fast_program;
    kr_plan *fast_plan;
    kr__bound_plan fast_bp;
    int fast_bound;
    kr__run *fast_runs;    /* per case, prepared on first use */
    int use_fast;
    char fast_why[320];    /* why a problem's fast kernel is not used ("" when it is) */
    /* set by the caller: the next source runs time their launches alone
     * (event pair), into last_launch_s (verify_deadline.c) */
    int time_launch;
    double last_launch_s;
} kr__reference;

/* Compiles and binds a source reference (through the compile cache), or
 * checks that a golden problem has its callback. Close it even on failure.
 * The reference alone: kr__reference_open_serving adds the fast kernel. */
int kr__reference_open(kr_context *ctx, kr__reference *ref, const kr_problem *p);
void kr__reference_close(kr_context *ctx, kr__reference *ref);

/* How long a reference run may take before it is a hang (seconds). */
#define KR__REFERENCE_TIMEOUT_S 60

/* Keyed hashes (check slots, one per tensor; inputs only) of the inputs a
 * reference run regenerates, queued before the reference reads them: what a
 * candidate's inputs of the same seed must still hash to after its call, so
 * the candidate's call needs no hashing before it. */
typedef struct kr__input_hashes {
    uint64_t key;
    kr__check *ids;
} kr__input_hashes;
/* The reference's outputs for (case c, seed) in want's output buffers
 * (want holds at least the outputs of case c), queued on the engine's
 * stream with h's hashes (NULL: none); the buffers holding the reference's
 * inputs and scratch are scrubbed behind it. Queued only: the outputs are
 * there once the caller's next wait, of at least KR__REFERENCE_TIMEOUT_S
 * (kr__reference_fetch_checks), succeeds, and a fault or hang met
 * there is the library's error. A refused launch fails here. Golden
 * outputs are uploaded before it returns. */
int kr__reference_queue(kr_context *ctx, kr__reference *ref, size_t c, uint64_t seed,
                        const kr__tset *want, const kr__input_hashes *h);
/* kr__checks_fetch behind ref's queued runs of case c: copies every
 * queued check result to the host and waits for the stream (always, checks
 * or not), as long as a reference run may take and the checks' time; a
 * failure says the case. */
int kr__reference_fetch_checks(kr_context *ctx, const kr__reference *ref, size_t c);
/* The same outputs in malloc'd host memory (host[t] for each output and
 * in-out tensor, NULL for inputs; the caller frees them), which the device
 * cannot reach; nothing of them is left on the device or in pinned memory. */
int kr__reference_outputs_host(kr_context *ctx, kr__reference *ref, size_t c, uint64_t seed,
                               void **host);

/* The compiled reference and its plan, checked for every case (source
 * problems); for kr_problem_check_reference and kr__reference_open. fast:
 * the problem's reference.fast instead. */
int kr__reference_build(kr_context *ctx, const kr_problem *p, int fast, kr_program **prog,
                        kr_plan **plan);

/* fast_reference.c: after the reference is open, takes the problem's fast
 * kernel into ref if this context has found (or now finds) that it agrees
 * with the reference on every case; otherwise says why in ref->fast_why.
 * Fails only where the reference itself fails: a fast kernel that does not
 * build, faults or disagrees is not used, never an error. $KR_FAST_REFERENCE=0
 * turns it off (to measure what it saves). */
int kr__fast_reference_open(kr_context *ctx, kr__reference *ref);
/* kr__reference_open, then kr__fast_reference_open where the problem has a
 * fast kernel: what verification and the benchmark's checks open. */
int kr__reference_open_serving(kr_context *ctx, kr__reference *ref, const kr_problem *p);
/* The share of each output's tolerance a candidate is judged with against
 * ref's expected outputs: 1 from the reference, 3/4 from the fast kernel,
 * which agreed within 1/4 of it: what passes lies within the tolerance of
 * the reference (at the seed they were checked at), never in a wider band. */
double kr__reference_tolerance_share(const kr__reference *ref);

/* One run of the reference (fast 0) or of its fast kernel (1) for (case
 * c, seed) into want, no fallback, waited for: fast_reference.c compares
 * the two, and a failure here is the kernel's own. */
int kr__reference_run_kernel(kr_context *ctx, kr__reference *ref, size_t c, uint64_t seed,
                             const kr__tset *want, int fast);
/* The same, queued only, as kr__reference_queue (the rejudges: the
 * reference itself again after its fast kernel's outputs failed). */
int kr__reference_queue_kernel(kr_context *ctx, kr__reference *ref, size_t c, uint64_t seed,
                               const kr__tset *want, int fast);

#endif
