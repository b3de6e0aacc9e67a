/* The case-run layer every engine verb shares (verify, benchmark, the
 * reference, sanity): tensor sets and runs of a bound plan.
 *
 * A tensor set holds one guarded device buffer per tensor of a problem in
 * one case, for the roles asked for. Inputs are generated from a seed (the
 * same bits every time for the same seed), outputs are poisoned, in-outs
 * start from generated values. A run is a bound plan made ready for one
 * case: its scratch buffers (guarded, zeroed or poisoned before each
 * launch, as the plan declares) and its launches with every argument
 * evaluated; it is pointed at tensor sets and launched as often as needed.
 * The policy (what to run when, what to check, how to judge) stays in the
 * verbs' own files. */
#ifndef KR_WORKSPACE_H
#define KR_WORKSPACE_H

#include "run/checks.h"
#include "run/launch.h"

/* Which tensors a set holds. */
#define KR__SET_INPUTS 0x1u   /* role in */
#define KR__SET_OUTPUTS 0x2u  /* roles out and inout */
#define KR__SET_ALL (KR__SET_INPUTS | KR__SET_OUTPUTS)

typedef struct kr__tset {
    const kr_problem *p;
    size_t c;             /* the case */
    unsigned roles;       /* KR__SET_* */
    kr__dbuf *buf;        /* one per tensor; empty where the role is not held */
} kr__tset;

int kr__is_output(const kr__tensor *x);
/* Elements of tensor t in case c. */
uint64_t kr__elements(const kr_problem *p, size_t t, size_t c);

/* Allocates the buffers of the roles asked for (what: for messages). */
int kr__tset_alloc(kr_context *ctx, kr__tset *s, const kr_problem *p, size_t c, unsigned roles,
                   const char *what);
void kr__tset_free(kr_context *ctx, kr__tset *s);
/* Generates the set's inputs for a seed. */
int kr__tset_fill_inputs(kr_context *ctx, const kr__tset *s, uint64_t seed);
/* Poisons the set's outputs (variant 0 or 1) and generates its in-outs. */
int kr__tset_fill_outputs(kr_context *ctx, const kr__tset *s, uint64_t seed, int variant);
/* Refills the guard zones of every buffer (state left there does not
 * survive into the next call). */
int kr__tset_reguard(kr_context *ctx, const kr__tset *s);
/* Zeroes every buffer (they held reference results). */
int kr__tset_scrub(kr_context *ctx, const kr__tset *s);
/* Queues the guard checks of every buffer the set holds; ids[t] per tensor
 * (unset where the set holds none). */
int kr__tset_check_guards(kr_context *ctx, const kr__tset *s, kr__check *ids);

typedef struct kr__run {
    const kr__bound_plan *bp;
    size_t c;
    kr__ready_plan ready;
    size_t num_scratch;
    kr__dbuf *scratch;
} kr__run;

/* Evaluates the plan for case c and allocates its scratch buffers. */
int kr__run_prepare(kr_context *ctx, kr__run *r, const kr__bound_plan *bp, size_t c);
void kr__run_free(kr_context *ctx, kr__run *r);
/* Points the tensor arguments at these sets: inputs from `in`, outputs and
 * in-outs from `out` (the same set for both is fine). */
void kr__run_bind(kr__run *r, const kr__tset *in, const kr__tset *out);
/* Restores the program's device globals to their state at load, resets
 * the scratch buffers (zero or poison, as declared) and refills their guard
 * zones: queue it before every launch, outside any timing. */
int kr__run_reset(kr_context *ctx, const kr__run *r);
/* Queues the plan's launches. *failed_launch: the launch the driver
 * refused, else SIZE_MAX. */
int kr__run_launch(kr_context *ctx, kr__run *r, size_t *failed_launch);
/* Queues the guard checks of the scratch buffers; ids[s] per buffer. */
int kr__run_check_guards(kr_context *ctx, const kr__run *r, kr__check *ids);

#endif
