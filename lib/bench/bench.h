/* What the pool calls of bench besides the public kr_benchmark. */
#ifndef KR_BENCH_H
#define KR_BENCH_H

#include "kreward/bench.h"

#include <stddef.h>

/* The caller's versioned options read into a full struct (for the pool,
 * which copies a job at submission); KR_EVERSION with why. */
int kr__bench_options_read(kr_bench_options *dst, const kr_bench_options *src, char *why,
                           size_t why_size);

#endif
