/* Shared by the verify engine's files: verify.c runs the units (one case x
 * seed each), verify_judge.c turns their check results into verdicts,
 * flags and words, verify_explain.c explains a wrong output. */
#ifndef KR_VERIFY_IMPL_H
#define KR_VERIFY_IMPL_H

#include "run/reference.h"
#include "common/kr_gen.h"
#include "kreward/verify.h"
#include "report/report_impl.h"
#include "common/strbuf.h"

typedef struct vstate {
    kr_context *ctx;
    const kr_problem *p;
    kr__bound_plan cand;
    int cand_bound;
    kr__reference ref;
    kr_verify_options o;
    uint64_t key;                /* input hash key, fresh per verify */
    kr_report *report;
    json_t *cases;
    /* summary */
    size_t units, units_passed;
    uint64_t flags, mismatches;
    double max_abs, max_rel, worst_l2;
    int verdict;
    unsigned char *failed_cases; /* one per case */
    kr__buf feedback;            /* about the first failing unit only */
    size_t feedback_unit;        /* its id (units are numbered from 1) */
    int feedback_explained;      /* its first wrong output has been explained */
    size_t explained;            /* wrong outputs explained so far (host scans; capped) */
    char message[1024];
} vstate;

typedef struct vunit {
    size_t id;
    size_t c, s;
    uint64_t seed;
    kr__tset in, out[2], want;
    /* Computed after the candidate's runs (verify.c): a source reference's
     * outputs into want; a golden one's into host_want, uploaded for the
     * comparison and scrubbed after it. */
    int want_on_device;
    void **host_want;            /* reference outputs on the host (malloc'd; for a
                                    source reference, downloaded to explain a failure) */
    uint64_t *in_hash;           /* expected keyed hash per input */
    json_t *json;
    int passed;
    int stopped;                 /* a fault, hang or refused launch ended it */
    int by_reference;            /* want holds the reference's own outputs again: judged
                                    with all of the tolerance (verify.c, rejudge) */
    double deadline_s;           /* a run's deadline (verify_deadline.c) */
    double reference_s;          /* the reference's time on the case it came from (0: none) */
} vunit;

/* Where one run's check results are: slots of two batches, each kept in a
 * snapshot (the engine's slots serve the next batch). */
typedef struct vchecks {
    kr__check *tensor_guards;    /* per tensor: in after_run */
    kr__check *scratch_guards;   /* per scratch buffer: in after_run */
    size_t num_scratch;
    kr__check *hash;             /* per input: in after_run */
    kr__check *cmp;              /* per output: in compared */
    kr__check *diff;             /* per output, second run only: in compared */
    kr__check *out_hash;         /* per output, first run only: in after_run */
    kr__check *out_hash_later;   /* the same after the second run: in compared */
    int rehashed;                /* out_hash_later was taken (two runs) */
    uint64_t *after_run;         /* the batch right after the run */
    uint64_t *compared;          /* the batch against the reference, after the runs */
} vchecks;

/* verify_deadline.c: how long one run of case c may take, from the
 * reference's time on the case (timed once per problem and case in the
 * context) and timeout_s; *reference_s is that time (0: none, the deadline
 * is timeout_s). The rule alone: kr__vdeadline_rule. */
int kr__vdeadline(vstate *v, size_t c, double *deadline, double *reference_s);
#define KR__DEADLINE_FACTOR 1e5 /* a run may take this many times the reference's time */
#define KR__DEADLINE_FLOOR_S 0.25  /* and at least this long */
double kr__vdeadline_rule(double reference_s, double timeout_s);

/* verify_want.c: the share of the tolerance the unit's outputs are judged
 * with: 3/4 against a fast kernel's outputs, all of it against the
 * reference's (fast_reference.c). */
double kr__vunit_share(const vstate *v, const vunit *u);

/* verify_want.c: the unit's reference outputs, after the candidate's runs.
 * Computed (source: on the device; golden: on the host), revealed (golden:
 * uploaded) for the comparison, concealed (golden: scrubbed) after it. */
int kr__vwant_compute(vstate *v, vunit *u);
int kr__vwant_reveal(vstate *v, vunit *u);
int kr__vwant_conceal(vstate *v, vunit *u);
/* Output t's reference values on the host (downloaded on first use for a
 * device-resident reference); NULL when they cannot be had. */
const void *kr__vunit_want_host(vstate *v, vunit *u, size_t t);

/* Records a failure of the unit: the verdict (most severe wins), flags, and
 * the words of the first failure for the message and the feedback. */
void kr__vfail(vstate *v, vunit *u, int verdict, uint64_t flags, const char *what);
/* Judges one run from its checks' snapshots (its outputs only where they
 * were compared: not after a later run poisoned the context). */
void kr__vjudge_run(vstate *v, vunit *u, int run, const vchecks *m);
/* A fault, timeout, refused launch or plan error during a run: the
 * candidate's verdict (KR_OK), or rc when it was not the candidate's doing. */
int kr__vjudge_error(vstate *v, vunit *u, int rc, size_t failed_launch);
/* Verdict, flags, metrics and feedback into the report. */
void kr__vsummarize(vstate *v);

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
 * Appends a sentence to feedback and fills details (a JSON object). share:
 * of the tolerance, as the comparison judged it (kr__reference_tolerance_share). */
void kr__explain_output(const kr_problem *p, size_t t, size_t c, double share, const void *got,
                        const void *want, uint32_t poison, size_t max_listed, kr__buf *feedback,
                        json_t *details);

#endif
