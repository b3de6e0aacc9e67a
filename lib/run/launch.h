/* Running a bound plan: evaluate a case once (grid, block, smem, argument
 * values), then launch it on any buffers (the workspace points the pointer
 * arguments at them), as often as needed. */
#ifndef KR_LAUNCH_H
#define KR_LAUNCH_H

#include "problem/plan_impl.h"

typedef struct kr__ready_step {
    CUfunction fn;
    kr__launch_dims dims;
    size_t num_args;
    uint64_t values[KR__PLAN_MAX_ARGS];   /* 8-byte slots; kernelParams point here */
    void *params[KR__PLAN_MAX_ARGS];
    const kr__bound_arg *args;
} kr__ready_step;

typedef struct kr__ready_plan {
    size_t num_launches;
    kr__ready_step *launches;
} kr__ready_plan;

/* Evaluates every launch of the plan for a case; needs the program loaded. */
int kr__ready(kr_context *ctx, const kr__bound_plan *bp, size_t case_index, kr__ready_plan *out);
void kr__ready_free(kr__ready_plan *rp);
/* Queues every launch on the stream. On a refused launch, the context error
 * names the launch; *failed_launch says which one (else SIZE_MAX). */
int kr__ready_launch(kr_context *ctx, const kr__bound_plan *bp, kr__ready_plan *rp, CUstream s,
                     size_t *failed_launch);

#endif
