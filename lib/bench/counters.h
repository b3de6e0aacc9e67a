/* Hardware counters of a candidate's plan (KR_BENCH_COUNTERS): collected
 * on replay runs after the benchmark, one range per kernel launch, never
 * during timed samples (counters.c); turned into report fields, a
 * per-kernel section and feedback text a model can act on
 * (counters_derive.c, counters_text.c: no GPU needed, unit-tested).
 * docs/counters.md says what each field means. */
#ifndef KR_ENGINE_COUNTERS_H
#define KR_ENGINE_COUNTERS_H

#include "kreward/report.h"
#include "kreward/problem.h"
#include "kreward/program.h"
#include "kreward/plan.h"

#include <stddef.h>
#include <stdint.h>

/* The raw counters, by CUPTI metric name (counters_derive.c holds the
 * names). A metric the chip lacks reads NaN; what depends on it is left
 * out of the report. */
enum {
    KR__CM_DURATION_NS,      /* gpu__time_duration.sum */
    KR__CM_DRAM_READ,        /* bytes */
    KR__CM_DRAM_WRITE,
    KR__CM_DRAM_PCT,         /* DRAM throughput, % of peak over the kernel's time */
    KR__CM_SM_PCT,           /* SM throughput, % of peak */
    KR__CM_TENSOR_PCT,       /* tensor pipe active, % of peak */
    KR__CM_WARPS_PCT,        /* achieved occupancy, % of the SM's warps */
    KR__CM_L1_HIT_PCT,
    KR__CM_L2_HIT_PCT,
    KR__CM_BANK_LD,          /* shared-memory bank conflicts, loads */
    KR__CM_BANK_ST,          /* stores */
    KR__CM_SHARED_WAVEFRONTS, /* shared-memory wavefronts (conflicts add to them) */
    KR__CM_THREADS_PER_INST, /* active threads per executed warp instruction */
    KR__CM_BRANCHES,         /* branch targets */
    KR__CM_DIVERGENT,        /* divergent branch targets */
    KR__CM_LOCAL_LD,         /* local-memory bytes: spills and stack arrays */
    KR__CM_LOCAL_ST,
    KR__CM_INST,             /* warp instructions executed */
    KR__CM_N
};
extern const char *const kr__counter_metrics[KR__CM_N];

/* What limits how many blocks of a kernel an SM holds at once. */
enum { KR__LIMIT_NONE = 0, KR__LIMIT_WARPS, KR__LIMIT_REGISTERS, KR__LIMIT_SHARED,
       KR__LIMIT_BLOCKS };
const char *kr__limiter_name(int limiter);

/* A kernel launch and the device, as the occupancy calculation needs them
 * (kernel attributes and cuDeviceGetAttribute). */
typedef struct kr__occupancy_in {
    int threads;             /* per block */
    int regs;                /* per thread */
    int64_t smem;            /* per block: static plus dynamic */
    int warp_size;           /* 32 */
    int max_threads_sm;      /* 2048 on sm_80/sm_90 */
    int max_blocks_sm;       /* 32 */
    int regs_sm;             /* 65536 */
    int64_t smem_sm;         /* shared memory per SM usable by blocks (228 KiB on sm_90) */
    int64_t smem_reserved;   /* per block, by the system (1 KiB on sm_80 and later) */
} kr__occupancy_in;

typedef struct kr__occupancy {
    int by_warps, by_registers, by_shared, by_blocks; /* blocks per SM each resource allows */
    int blocks;              /* the least of them */
    double occupancy;        /* blocks x warps per block / the SM's warps, in [0, 1] */
    int limiter;             /* KR__LIMIT_*: the resource that allows the fewest */
} kr__occupancy;

/* The theoretical occupancy and its limiter (the CUDA occupancy
 * calculator's rules: registers in units of 256 per warp, in whole warps
 * per quarter of the SM; shared memory in units of 128 bytes plus the
 * per-block reservation). -1 when the input is not a launch. */
int kr__occupancy_of(const kr__occupancy_in *in, kr__occupancy *out);

/* One profiled launch of the plan. */
typedef struct kr__kernel_counters {
    char name[128];
    size_t launch;           /* index in the plan */
    double v[KR__CM_N];      /* NaN: not collected */
    kr__occupancy occ;       /* blocks == 0: unknown */
    int regs;                /* per thread */
    int threads;             /* per block */
    int64_t smem;            /* per block */
    int64_t local_bytes;     /* per thread, from the compiler (spills, stack) */
} kr__kernel_counters;

/* The plan's totals: sums of bytes and instructions, time-weighted means
 * of rates; NaN where no kernel had the counter. */
typedef struct kr__counters_summary {
    double duration_s, dram_bytes, dram_read, dram_write, dram_gbps, dram_fraction;
    double sm_fraction, tensor_fraction, occupancy, occupancy_theoretical;
    double l1_hit, l2_hit, bank_conflicts, bank_per_request, warp_efficiency, divergence;
    double spill_bytes, instructions;
    size_t slowest;          /* index of the kernel with the most time */
} kr__counters_summary;

void kr__counters_summarize(const kr__kernel_counters *k, size_t n, kr__counters_summary *out);

/* The summary as report metrics (docs/report-format.md) and every kernel
 * in a "counters" section. */
void kr__counters_report(kr_report *r, const kr__kernel_counters *k, size_t n,
                         const kr__counters_summary *s);

/* What a model can act on, in one paragraph: the bound (memory, compute,
 * latency) with the numbers behind it, the occupancy and its limiter, and
 * the problems counters show (bank conflicts, divergence, spills, poor L2
 * reuse), for the kernels that take the most time (counters_text.c).
 * Writes "" when there is nothing to say. */
void kr__counters_feedback(char *out, size_t size, const kr__kernel_counters *k, size_t n,
                           const kr__counters_summary *s);

/* Appends to the report's "feedback" what KR_BENCH_ROBUST and
 * KR_BENCH_COUNTERS found ("; under perturbed conditions at least 0.92x
 * (...)", "; profile: memory-bound: ..."), from the report alone; nothing
 * when neither ran (kr_evaluate calls it for a passing candidate). */
void kr__bench_feedback(kr_report *r);

/* Collects the counters of the candidate's plan on the case (after its
 * benchmark: one untimed replay run, profiled kernel by kernel) into the
 * report: metrics, section, "counters_feedback" text and counters_wall_s.
 * Without counters (no permission, no CUPTI 12.6+) the report says why
 * (counters_available 0, text counters_why) and still gets each kernel's
 * theoretical occupancy and its limiter; KR_OK either way unless the
 * device failed. */
struct kr_context;
int kr__counters_collect(kr_report *r, struct kr_context *ctx, const kr_problem *p,
                         const kr_program *prog, const kr_plan *plan, size_t case_index);

#endif
