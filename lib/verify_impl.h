/* Shared by the verify engine's files. */
#ifndef KR_VERIFY_IMPL_H
#define KR_VERIFY_IMPL_H

#include "gpu.h"
#include "problem_impl.h"
#include "report_impl.h"
#include "strbuf.h"

/* "M=1023, N=4097" */
void kr__case_dims_text(const kr_problem *p, size_t c, char *out, size_t size);
/* "4.19M" */
void kr__count_text(uint64_t n, char *out, size_t size);
/* "[0,4096]" for a flat index of tensor t in case c */
void kr__index_text(const kr_problem *p, size_t t, size_t c, uint64_t flat, char *out, size_t size);
/* The element's bits as kr_compare sees them (for poison detection). */
uint32_t kr__element_bits(int dtype, const void *base, uint64_t i);
/* The allclose rule of kr_compare, on the host. */
int kr__element_ok(double got, double want, uint32_t got_bits, uint32_t poison, double rtol,
                   double atol);

/* Explains a wrong output from its host copy: the first mismatches (by
 * index, with got/expected), and the shape of what was never written.
 * Appends a sentence to feedback and fills details (a JSON object). */
void kr__explain_output(const kr_problem *p, size_t t, size_t c, const void *got, const void *want,
                        uint32_t poison, size_t max_listed, kr__buf *feedback, json_t *details);

/* Runs the reference (or the golden callback) for one case and seed and
 * returns its outputs in malloc'd host buffers (host[t] NULL for inputs). */
int kr__reference_case_outputs(kr_context *ctx, const kr_problem *p, size_t c, uint64_t seed,
                               void **host);

#endif
