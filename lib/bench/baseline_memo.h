/* Baseline samples shared between benchmarks of one problem in a context.
 *
 * A GRPO batch evaluates many candidates of one problem in a row, and the
 * baseline (often a naive reference, milliseconds a call) cost most of each
 * benchmark when every candidate timed it afresh. The memo keeps the recent
 * baseline samples per (problem, case, options) key: a later benchmark of the
 * same key still takes fresh baseline samples interleaved with its
 * candidate's (at least KR__MEMO_FRESH), and adds the memo's to them only
 * when its fresh ones agree with the memo (kr__memo_agrees); otherwise the
 * memo is forgotten and the baseline is timed in full. Samples enter the memo
 * only from benchmarks that found nothing wrong, so a candidate that disturbs
 * its baseline's samples (work left on the GPU) neither gains from the memo
 * nor leaves its disturbance in it. Pure bookkeeping: no CUDA here. */
#ifndef KR_BASELINE_MEMO_H
#define KR_BASELINE_MEMO_H

#include <stddef.h>
#include <stdint.h>

#define KR__MEMO_KEYS 16        /* problems remembered per context (least recent goes) */
#define KR__MEMO_SAMPLES 48     /* samples per key: the most recent */
#define KR__MEMO_MAX_AGE_S 30.0 /* older memos are not used (clocks, other load) */
#define KR__MEMO_FRESH 3        /* fresh baseline samples a benchmark takes before comparing */
/* ...and where the memo was added to this recently (the previous candidate
 * of a batch's problem, moments ago): one, each a naive reference's whole
 * call (2-8 ms on the bundled large cases; three of them were a fifth of the
 * pool's GPU time). A sample that misses is looked at again with every
 * further one, as three would be. */
#define KR__MEMO_YOUNG_S 5.0
#define KR__MEMO_FRESH_YOUNG 1
/* ...but no more than this many benchmarks in a row: each joins its one
 * sample and keeps the memo young, and a chain of single samples, each
 * within the agreement's tolerance, must not walk the memo's median away
 * (every ninth compares three). */
#define KR__MEMO_QUICK_MAX 8

typedef struct kr__memo_entry {
    uint64_t key;               /* 0: unused */
    double at;                  /* when samples were last added (kr__now) */
    int cupti;                  /* time_us came from CUPTI (1) or events (0) */
    unsigned quick;             /* additions in a row of fewer than KR__MEMO_FRESH samples */
    size_t n_event, n_time;     /* filled, up to KR__MEMO_SAMPLES */
    size_t head_event, head_time;
    double event_us[KR__MEMO_SAMPLES]; /* event times: the stopping rule's currency */
    double time_us[KR__MEMO_SAMPLES];  /* the times the results use */
} kr__memo_entry;

typedef struct kr__memo_table {
    kr__memo_entry e[KR__MEMO_KEYS];
} kr__memo_table;

/* What a benchmark took from the memo. */
typedef struct kr__memo_view {
    size_t n_event, n_time;
    int cupti;
    double age_s;               /* since samples were last added */
    unsigned quick;             /* the entry's count of quick additions in a row */
    double event_us[KR__MEMO_SAMPLES];
    double time_us[KR__MEMO_SAMPLES];
} kr__memo_view;

/* The key's samples when they are younger than KR__MEMO_MAX_AGE_S at now:
 * 1 with *out filled, else 0 (nothing usable). */
int kr__memo_get(const kr__memo_table *t, uint64_t key, double now, kr__memo_view *out);
/* Adds a benchmark's fresh baseline samples to the key (its least recent
 * samples go first); times of another source than the memo's replace them. */
void kr__memo_add(kr__memo_table *t, uint64_t key, double now, const double *event_us,
                  size_t n_event, const double *time_us, size_t n_time, int cupti);
/* How many fresh samples a benchmark takes before comparing them with m:
 * KR__MEMO_FRESH_YOUNG for a memo younger than KR__MEMO_YOUNG_S that has
 * had fewer than KR__MEMO_QUICK_MAX such additions in a row, else
 * KR__MEMO_FRESH. */
size_t kr__memo_fresh_needed(const kr__memo_view *m);
/* Drops the key's samples (the conditions they were taken in are gone). */
void kr__memo_forget(kr__memo_table *t, uint64_t key);
/* Whether fresh event samples agree with the memo's: their median within
 * 3 x the memo's relative spread (at least 3 %, at most 5 %) of the memo's
 * median. */
int kr__memo_agrees(const kr__memo_view *m, const double *fresh_us, size_t n);

#endif
