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
} kr__reference;

/* Compiles and binds a source reference (through the compile cache), or
 * checks that a golden problem has its callback. Close it even on failure. */
int kr__reference_open(kr_context *ctx, kr__reference *ref, const kr_problem *p);
void kr__reference_close(kr_context *ctx, kr__reference *ref);

/* The reference's outputs for (case c, seed) in want's output buffers
 * (want holds at least the outputs of case c). The buffers holding the
 * reference's inputs and scratch are scrubbed afterwards. */
int kr__reference_run(kr_context *ctx, kr__reference *ref, size_t c, uint64_t seed,
                      const kr__tset *want);
/* The same outputs in malloc'd host memory (host[t] for each output and
 * in-out tensor, NULL for inputs; the caller frees them), which the device
 * cannot reach; nothing of them is left on the device or in pinned memory. */
int kr__reference_outputs_host(kr_context *ctx, kr__reference *ref, size_t c, uint64_t seed,
                               void **host);

/* The compiled reference and its plan, checked for every case (source
 * problems); for kr_problem_check_reference and kr__reference_open. */
int kr__reference_build(kr_context *ctx, const kr_problem *p, kr_program **prog, kr_plan **plan);

#endif
