/* kr_benchmark: the measurement (bench.c), then what KR_BENCH_COUNTERS and
 * KR_BENCH_ROBUST ask for (bench_robust.c), on runs of their own after the
 * measurement's buffers are gone. Its own file: the robust conditions are
 * measurements again, so bench.c must not call bench_robust.c. */
#include "bench/bench_impl.h"

int kr_benchmark(kr_report *r, kr_context *ctx, const kr_problem *problem, const kr_program *cand,
                 const kr_plan *plan, const kr_bench_options *opts, const kr_baseline *baseline)
{
    kr__bench_used used;
    int rc = kr__bench_run(r, ctx, problem, cand, plan, opts, baseline, 0, &used);
    if (rc == KR_OK && used.read && (used.o.flags & (KR_BENCH_COUNTERS | KR_BENCH_ROBUST)))
        rc = kr__bench_extras(r, ctx, problem, cand, plan, &used.o, &used.bl, used.c);
    return rc;
}
