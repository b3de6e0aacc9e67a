/* libkreward: launch plans: how to launch a candidate that is only device
 * code. One or more launches in order (kernel, grid, block, dynamic shared
 * memory, arguments), and scratch buffers; sizes are integer expressions over
 * the problem's dims (docs/problem-format.md). Written as `// kreward:` lines
 * in the source or as JSON.
 *
 * A plan is a value like a problem: no device state, usable with any context
 * and from several threads at once, immutable once parsed. */
#ifndef KREWARD_PLAN_H
#define KREWARD_PLAN_H

#include "problem.h"
#include "program.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kr_plan kr_plan;

/* Reads the `// kreward: launch ...` and `// kreward: scratch ...` lines of a
 * source. KR_ENOTFOUND when it has none. */
KR_API int kr_plan_from_source(kr_plan **out, kr_context *ctx, const char *source, size_t len,
                               const char *name);
/* Parses a plan given as JSON ({"launches": [...], "scratch": [...]}). */
KR_API int kr_plan_parse_json(kr_plan **out, kr_context *ctx, const char *json, size_t len,
                              const char *name);
KR_API void kr_plan_free(kr_plan *plan);
KR_API size_t kr_plan_launch_count(const kr_plan *plan);
KR_API const char *kr_plan_launch_kernel(const kr_plan *plan, size_t launch);

/* Checks a plan against a problem and a program, for every case: names
 * resolve, kernels exist, argument count and sizes match the kernels'
 * parameters, grid/block/shared memory evaluate and fit the device (or the
 * target architecture's limits without one). The first problem found is the
 * context's error, e.g. "plan line 3 (launch k): arg 3 'N' is 8 bytes,
 * kernel parameter 3 is 4 bytes". The program must be the context's. */
KR_API int kr_plan_check(kr_context *ctx, const kr_plan *plan, const kr_problem *problem,
                         const kr_program *program);
/* The plan as JSON: launches (kernel, grid, block, smem, args as written)
 * and scratch buffers. */
KR_API int kr_plan_json(char **json_out, const kr_plan *plan);

#ifdef __cplusplus
}
#endif
#endif
