/* What evaluate and the pool call of verify besides the public kr_verify:
 * the callers' options read into full structs and a problem's soundness
 * (sanity.c), cached per context. */
#ifndef KR_VERIFY_H
#define KR_VERIFY_H

#include "kreward/problem.h"
#include "kreward/verify.h"

#include <stddef.h>

/* Whether a problem can be passed without computing it (sanity.c): its
 * outputs constant, or independent of the inputs, or matched by zeros,
 * ones or a copy of an input, in every case. Cached per context. */
int kr__problem_weak(kr_context *ctx, const kr_problem *p, int *weak);
/* Tells the context a problem's soundness found elsewhere (a pool's earlier
 * worker), so kr__problem_weak does not check it again. */
int kr__problem_weak_note(kr_context *ctx, const kr_problem *p, int weak);
/* 1 with *weak when the context holds a completed check of the problem
 * (its own or noted), 0 otherwise; never runs the check. */
int kr__problem_weak_cached(kr_context *ctx, const kr_problem *p, int *weak);

/* The callers' versioned options read into a full struct (for the pool,
 * which copies a job at submission); KR_EVERSION with why. */
int kr__verify_options_read(kr_verify_options *dst, const kr_verify_options *src, char *why,
                            size_t why_size);

#endif
