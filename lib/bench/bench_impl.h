/* Shared by the benchmark's files: bench.c (entry, setup, teardown),
 * bench_sample.c (one timed sample, the measurement loop, timed-output
 * checks), bench_cupti.c (attributing CUPTI records to samples),
 * bench_results.c (statistics, speedup, roofline into the report) and
 * bench_robust.c (counters and robust conditions after a benchmark). */
#ifndef KR_BENCH_IMPL_H
#define KR_BENCH_IMPL_H

#include "bench/baseline_memo.h"
#include "run/reference.h"
#include "kreward/bench.h"
#include "report/report_impl.h"

#define KR__BENCH_MAX_SETS 8

enum { SIDE_CANDIDATE = 0, SIDE_BASELINE = 1 };

typedef struct bside {
    const char *name;
    int active;
    int callback;                 /* KR_BASELINE_CALLBACK */
    kr_baseline_fn fn;
    void *user;
    kr__bound_plan bp;
    int bound;
    kr__run run[KR__BENCH_MAX_SETS];   /* bound to set k */
    CUgraphExec graph[KR__BENCH_MAX_SETS];
    double *event_us, *clock_mhz;
    size_t n, cap;
    double gpu_seconds;           /* summed event time, for the stopping rule */
} bside;

typedef struct bstate {
    kr_context *ctx;
    kr__engine *e;
    const kr_problem *p;
    size_t c;                     /* the timing case */
    kr_bench_options o;
    size_t sets;
    kr__tset set[KR__BENCH_MAX_SETS];
    uint64_t set_seed[KR__BENCH_MAX_SETS]; /* the seed each set's values came from */
    uint64_t seeds;               /* advances per regeneration */
    /* the next sample's set (drawn: kr__bench_next_set), whichever side
     * takes it, and whether a set's fresh values are already queued: each
     * sample queues the next one's behind its call, so the GPU makes them
     * while the host reads this sample and queues the next call */
    size_t next;
    unsigned char ready[KR__BENCH_MAX_SETS];
    int ahead;                    /* the next sample's values queued ahead (KR_BENCH_AHEAD) */
    kr__dbuf flush;
    /* per sample in flight (two where a round's samples are queued
     * together, bench_sample.c): its start and stop, and ev_done after its
     * clock probe (the sample is done, the next one's values may not be) */
    CUevent ev_start[2], ev_stop[2];
    CUevent ev_done[2];
    int pair;                     /* a round's two samples queued before either is read (KR_BENCH_PAIR) */
    bside s[2];
    /* timed-output checks against the reference */
    kr__reference ref;
    int has_ref;
    kr__tset want;
    uint64_t key;                 /* input hash key, fresh per benchmark */
    size_t checks, checks_failed;
    uint64_t floor_checks;        /* timed candidate calls 0..63 checked whatever the draw */
    int last_checked;             /* the candidate's latest call was checked */
    uint64_t check_flags;         /* what the failed checks found */
    int candidate_failed;         /* the failure came from the candidate's plan or launch */
    int library_failed;           /* it came from a check of a call already waited for (the reference's run, the checks') */
    int slow;                     /* stopped early by the time budget */
    char check_failure[600];
    /* sample order, for attributing CUPTI records */
    int *order;
    size_t num_order, cap_order;
    /* KR_BENCH_ROBUST's co-running condition (bench_robust.c): blocks of a
     * kernel that hold that many SMs while the samples run */
    unsigned occupy;
    CUstream occupy_stream;
    /* the baseline samples shared with earlier benchmarks (baseline_memo.h):
     * memo_key 0 when this one may not share */
    uint64_t memo_key;
    enum {
        MEMO_NONE = 0,            /* nothing to share (none usable, or not allowed) */
        MEMO_PENDING,             /* taken at the start; the fresh samples not yet compared */
        MEMO_AGREED,              /* the fresh samples agree: the memo's count */
        MEMO_DISAGREED,           /* they did not: forgotten, and this run's do not join */
    } memo_state;
    kr__memo_view memo;
    size_t memo_fresh;            /* fresh samples to take before comparing (kr__memo_fresh_needed) */
    size_t memo_agreed_at;        /* fresh baseline samples when the memo agreed (0: it did not) */
    int times_cupti;              /* the results' times came from CUPTI */
    double fresh_us[KR__MEMO_SAMPLES]; /* this benchmark's baseline times, for the memo */
    size_t n_fresh;
} bstate;

/* Where one checked call's results are (bench_check.c). */
typedef struct bcheck {
    kr__check *pre, *post;        /* input hashes as generated (the reference's
                                   * regenerated copy) and after, per tensor */
    kr__check *guards;            /* per tensor */
    kr__check *scratch;           /* per scratch buffer of the candidate's run */
    kr__check *cmp;               /* per output */
} bcheck;

/* The fewest checked calls a benchmark makes, however early it stops. */
#define KR__BENCH_MIN_CHECKS 3
/* Of them, this many at calls drawn among the first min_samples timed ones;
 * the rest after the last timed call (kr__bench_measure). */
#define KR__BENCH_EARLY_CHECKS (KR__BENCH_MIN_CHECKS - 1)

/* Whether the next timed candidate call is checked: one of the floor's
 * calls (kr__bench_pick_floor), or a draw from the OS at the options' check
 * fraction. */
int kr__bench_draw_check(const bstate *b);
/* The early part of the floor: KR__BENCH_EARLY_CHECKS distinct call
 * numbers below min_samples, drawn from the OS. */
uint64_t kr__bench_pick_floor(const bstate *b);
/* Before the call: c's slots allocated (nothing queued on the device). */
int kr__bench_check_begin(bstate *b, size_t k, bcheck *c);
/* After the call: hashes, guards, the reference on the set's seed, the
 * comparison; records failures in b. */
int kr__bench_check_end(bstate *b, size_t k, bcheck *c);
void kr__bench_check_free(bcheck *c);

/* The memo key of this benchmark, 0 when it may not share baseline samples
 * (bench.c): only the fast preset's reference baseline, nothing co-running,
 * not KR_BENCH_NO_SHARE. */
uint64_t kr__bench_memo_key(const bstate *b, const kr_baseline *bl);
/* The fresh baseline samples disagree with the memo (bench_sample.c): its
 * conditions are gone; it is forgotten and this run adds nothing to it. */
void kr__bench_memo_disagree(bstate *b);

/* The next sample's buffer set (either side), from a random word r: any
 * set but the current one (its values are made while this call and its
 * checks use the current set), so whatever the schedule every side meets
 * every set. */
size_t kr__bench_next_set(size_t current, size_t sets, uint64_t r);
/* The same, never `avoid` either (a set a sample in flight still needs)
 * where there are three sets or more; SIZE_MAX avoids nothing. */
size_t kr__bench_next_set_avoiding(size_t current, size_t avoid, size_t sets, uint64_t r);

/* Runs the warm-up and the timed rounds until the stopping rule holds. */
int kr__bench_measure(bstate *b, double *wall);
/* CUPTI times per side from the records of the measurement; -1 when they
 * are incomplete (the caller falls back to events). */
int kr__bench_cupti_times(bstate *b, double *out[2], size_t n_out[2], int *side_stream,
                          int *device_launched);
/* Statistics, speedup, flags, memory and roofline into the report. */
int kr__bench_results(bstate *b, kr_report *r, double wall);

/* What a measurement used: its options and baseline as read (defaults
 * filled in) and its case; read is 1 when they were. */
typedef struct kr__bench_used {
    kr_bench_options o;
    kr_baseline bl;
    size_t c;
    int read;
} kr__bench_used;

/* The measurement alone (bench.c): kr_benchmark without the extras, with
 * `occupy` SMs held by another kernel during the samples (0: none); what it
 * used in *used when not NULL. */
int kr__bench_run(kr_report *r, kr_context *ctx, const kr_problem *problem,
                  const kr_program *cand, const kr_plan *plan, const kr_bench_options *opts,
                  const kr_baseline *baseline, unsigned occupy, kr__bench_used *used);
/* The flag word the occupying kernel spins on, in the engine's flag page. */
#define KR__OCCUPY_FLAG_OFFSET 32
/* Starts and releases the occupying kernel around the measurement
 * (bench_occupy.c). */
int kr__bench_occupy_start(bstate *b);
void kr__bench_occupy_stop(bstate *b);
/* After a benchmark that judged nothing against the candidate, what
 * KR_BENCH_COUNTERS and KR_BENCH_ROBUST ask for (bench_robust.c), on case
 * c with the options and baseline as read. */
int kr__bench_extras(kr_report *r, kr_context *ctx, const kr_problem *problem,
                     const kr_program *cand, const kr_plan *plan, const kr_bench_options *o,
                     const kr_baseline *bl, size_t c);

/* The device's measured copy bandwidth and FMA rate (peaks.c). */
int kr__peaks(kr_context *ctx);

#endif
