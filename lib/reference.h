/* A problem's reference: compiled program and launch plan. */
#ifndef KR_REFERENCE_H
#define KR_REFERENCE_H

#include "kreward/problem.h"

/* Compiles the reference source, reads its plan (JSON from the problem, else
 * the source's annotations), checks it for every case and binds it to the
 * problem; the bound plan owns the program and the plan until
 * kr__reference_unbind, which also undoes a bind that failed part way. */
struct kr__bound_plan;
int kr__reference_bind(kr_context *ctx, const kr_problem *p, struct kr__bound_plan *out);
void kr__reference_unbind(struct kr__bound_plan *bp);

#endif
