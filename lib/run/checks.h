/* Checks queued on the device behind a run, read back in one transfer:
 * guard zones, keyed input hashes, output comparisons, bitwise run
 * differences. Each queue call returns a handle to its result; results are
 * valid after kr__checks_fetch until the next kr__checks_begin. Every
 * expected value (hash, canary, reference) lives on the host or in buffers
 * the candidate never saw. */
#ifndef KR_CHECKS_H
#define KR_CHECKS_H

#include "run/dbuf.h"
#include "problem/problem_impl.h"

typedef size_t kr__check; /* index of the check's first result slot */

/* Starts a new batch of checks (the previous results are dropped). */
int kr__checks_begin(kr_context *ctx);
/* Queues the canary check of both guard zones of b. */
int kr__check_guards(kr_context *ctx, const kr__dbuf *b, kr__check *out);
/* Queues the keyed hash of b's usable bytes. */
int kr__check_hash(kr_context *ctx, const kr__dbuf *b, uint64_t key, kr__check *out);
/* Queues the comparison of got (the candidate's output of tensor x) with
 * want (the reference's) under share (1: all) of x's tolerance; poison is
 * what an unwritten element of got holds (kr__output_poison). */
int kr__check_compare(kr_context *ctx, const kr__dbuf *got, const kr__dbuf *want,
                      const kr__tensor *x, double share, uint32_t poison, kr__check *out);
/* Queues a count of the elements whose bits differ between a and b. */
int kr__check_bitdiff(kr_context *ctx, const kr__dbuf *a, const kr__dbuf *b, int dtype,
                      kr__check *out);
/* Copies every queued result to the host (waits for the stream). */
int kr__checks_fetch(kr_context *ctx);
/* Queues that copy only: the results are valid after the caller's next
 * wait for the stream (one wait for a run and its checks). */
int kr__checks_fetch_queued(kr_context *ctx);

/* Results (after kr__checks_fetch). */
uint64_t kr__check_guard_bytes(kr_context *ctx, kr__check c);  /* canary bytes changed */
uint64_t kr__check_value(kr_context *ctx, kr__check c);        /* hash or differing elements */
void kr__check_stats(kr_context *ctx, kr__check c, kr__cmp_stats *out);
/* Every fetched result in malloc'd memory (the caller frees it; NULL when
 * out of memory), indexed by the handles, valid past the next
 * kr__checks_begin: for results judged after later batches ran. */
uint64_t *kr__checks_snapshot(kr_context *ctx);

/* The bits an unwritten element of output x holds in a run with poison
 * variant v: the poison pattern for outputs, none (~0) for in-outs, which
 * start from generated values. */
uint32_t kr__output_poison(const kr__tensor *x, int variant);

#endif
