/* kr_verify: is the candidate right? One unit (case x seed) at a time:
 *
 *   inputs generated on the GPU, hashed (keyed hash, expected value on the host)
 *   candidate run 1: fresh outputs poisoned with pattern A, guard zones;
 *     then its canaries and input hashes
 *   candidate run 2: other fresh addresses, pattern B; the same checks
 *   then the reference's outputs, computed from the same seed on inputs of
 *     its own (verify_want.c), and both runs' outputs compared with them,
 *     and bit for bit with each other (nondeterministic vs race)
 *
 * The answer does not exist on the device while candidate code runs, and
 * every check's expected value lives on the host. Judging is in
 * verify_judge.c. */
#include "verify/verify_impl.h"
#include "verify/verify.h"
#include "common/options.h"
#include "common/random.h"
#include "compile/program_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const kr_verify_options verify_defaults = KR_VERIFY_OPTIONS_INIT;
static const size_t verify_sizes[] = {0, KR__UPTO(kr_verify_options, max_mismatches)};
static const kr__versioned verify_version = {"kr_verify_options", verify_sizes,
                                             KR_VERIFY_OPTIONS_VERSION, sizeof(kr_verify_options)};

int kr_verify_options_init(kr_verify_options *o, uint32_t version)
{
    return kr__options_init(&verify_version, o, &verify_defaults, version);
}

int kr__verify_options_read(kr_verify_options *dst, const kr_verify_options *src, char *why,
                            size_t why_size)
{
    return kr__options_read(&verify_version, dst, &verify_defaults, src, why, why_size);
}

/* The inputs of the unit, and their hashes as the candidate must leave
 * them, read to the host before any candidate code runs: the runs are
 * judged against that copy (u->in_hash), never against device memory. */
static int inputs_and_hashes(vstate *v, vunit *u)
{
    const kr_problem *p = v->p;
    kr__check *ids = calloc(p->num_tensors, sizeof *ids);
    int rc = ids ? kr__tset_alloc(v->ctx, &u->in, p, u->c, KR__SET_INPUTS, "input")
                 : kr__fail(v->ctx, KR_ENOMEM, "out of memory");
    if (rc == KR_OK)
        rc = kr__tset_fill_inputs(v->ctx, &u->in, u->seed);
    if (rc == KR_OK)
        rc = kr__checks_begin(v->ctx);
    for (size_t t = 0; t < p->num_tensors && rc == KR_OK; t++)
        if (u->in.buf[t].base)
            rc = kr__check_hash(v->ctx, &u->in.buf[t], v->key, &ids[t]);
    if (rc == KR_OK)
        rc = kr__checks_fetch(v->ctx);
    for (size_t t = 0; t < p->num_tensors && rc == KR_OK; t++)
        if (u->in.buf[t].base)
            u->in_hash[t] = kr__check_value(v->ctx, ids[t]);
    free(ids);
    return rc;
}

/* Whether a run's comparison found values out of tolerance. */
static int values_differ(const vstate *v, const vchecks *m)
{
    for (size_t t = 0; t < v->p->num_tensors; t++) {
        if (!kr__is_output(&v->p->tensors[t]))
            continue;
        kr__cmp_stats s;
        memcpy(&s, &m->compared[m->cmp[t]], sizeof s);
        if (s.mismatches || s.nan_mismatch)
            return 1;
    }
    return 0;
}

static int alloc_checks(vchecks *m, size_t tensors, size_t scratch)
{
    size_t n = tensors ? tensors : 1;
    m->tensor_guards = calloc(n, sizeof(kr__check));
    m->scratch_guards = calloc(scratch ? scratch : 1, sizeof(kr__check));
    m->hash = calloc(n, sizeof(kr__check));
    m->cmp = calloc(n, sizeof(kr__check));
    m->diff = calloc(n, sizeof(kr__check));
    m->out_hash = calloc(n, sizeof(kr__check));
    m->out_hash_later = calloc(n, sizeof(kr__check));
    return m->tensor_guards && m->scratch_guards && m->hash && m->cmp && m->diff && m->out_hash &&
                   m->out_hash_later
               ? 0
               : -1;
}

static void free_checks(vchecks *m)
{
    free(m->tensor_guards);
    free(m->scratch_guards);
    free(m->hash);
    free(m->cmp);
    free(m->diff);
    free(m->out_hash);
    free(m->out_hash_later);
    free(m->after_run);
    free(m->compared);
}

/* What a run can be checked for without the reference: guard zones
 * (inputs, outputs, scratch) and the inputs' hashes, queued behind the run
 * with the copy of their results, so one wait serves the run and its
 * checks (a round trip less a run); read by checks_read. */
static int checks_queue(vstate *v, vunit *u, int run, const kr__run *cr, vchecks *m)
{
    const kr_problem *p = v->p;
    kr_context *ctx = v->ctx;
    int rc = alloc_checks(m, p->num_tensors, cr->num_scratch) ? kr__fail(ctx, KR_ENOMEM, "out of memory")
                                                              : kr__checks_begin(ctx);
    if (rc == KR_OK)
        rc = kr__tset_check_guards(ctx, &u->in, m->tensor_guards);
    if (rc == KR_OK)
        rc = kr__tset_check_guards(ctx, &u->out[run], m->tensor_guards);
    if (rc == KR_OK)
        rc = kr__run_check_guards(ctx, cr, m->scratch_guards);
    m->num_scratch = cr->num_scratch;
    for (size_t t = 0; t < p->num_tensors && rc == KR_OK; t++)
        if (u->in.buf[t].base)
            rc = kr__check_hash(ctx, &u->in.buf[t], v->key, &m->hash[t]);
    /* the first run's outputs as it left them: compared with the reference
     * only after the second run, which must not have touched them */
    for (size_t t = 0; t < p->num_tensors && rc == KR_OK && run == 0; t++)
        if (u->out[0].buf[t].base)
            rc = kr__check_hash(ctx, &u->out[0].buf[t], v->key, &m->out_hash[t]);
    return rc == KR_OK ? kr__checks_fetch_queued(ctx) : rc;
}

/* The run's checks, its wait done: a kernel that changed its inputs gets
 * them back for the next run (that run then judges the kernel, not the
 * damage). */
static int checks_read(vstate *v, vunit *u, vchecks *m)
{
    const kr_problem *p = v->p;
    kr_context *ctx = v->ctx;
    int rc = KR_OK;
    if (!(m->after_run = kr__checks_snapshot(ctx)))
        rc = kr__fail(ctx, KR_ENOMEM, "out of memory");
    int changed = 0;
    for (size_t t = 0; t < p->num_tensors && rc == KR_OK; t++)
        changed |= u->in.buf[t].base && m->after_run[m->hash[t]] != u->in_hash[t];
    return rc == KR_OK && changed ? kr__tset_fill_inputs(ctx, &u->in, u->seed) : rc;
}

/* One run of the candidate on fresh outputs (poison variant `run`) and
 * fresh scratch, then its checks that need no reference. A fault, hang or
 * refused launch ends the unit: *err and *failed say which, for judging
 * after the runs before it. */
static int candidate_run(vstate *v, vunit *u, int run, vchecks *m, int *err, size_t *failed)
{
    kr_context *ctx = v->ctx;
    kr__run cr;
    *failed = SIZE_MAX;
    int rc = kr__tset_alloc(ctx, &u->out[run], v->p, u->c, KR__SET_OUTPUTS, "output");
    if (rc == KR_OK)
        rc = kr__tset_fill_outputs(ctx, &u->out[run], u->seed, run);
    int prepared = rc == KR_OK ? kr__run_prepare(ctx, &cr, &v->cand, u->c) : KR_OK;
    if (rc != KR_OK)
        memset(&cr, 0, sizeof cr);
    else if (prepared == KR_ENOMEM) /* its scratch does not fit: the plan's doing */
        rc = KR_EPLAN;
    else
        rc = prepared;
    if (rc == KR_OK)
        rc = kr__run_reset(ctx, &cr);
    if (rc == KR_OK) {
        kr__run_bind(&cr, &u->in, &u->out[run]);
        int slot = kr__gpu_begin(kr__engine_of(ctx), KR__GPU_CANDIDATE);
        rc = kr__run_launch(ctx, &cr, failed);
        kr__gpu_end(kr__engine_of(ctx), slot);
    }
    int queued = KR_OK;
    if (rc == KR_OK) {
        /* the checks run behind the plan, under its deadline (they take
         * milliseconds at most; a deadline is 0.25 s or more): a hang or
         * fault the wait meets is still the run's (they are the library's
         * kernels, on buffers it made) */
        queued = checks_queue(v, u, run, &cr, m);
        rc = kr__engine_wait(ctx, u->deadline_s, "the plan");
    } else if (*failed != SIZE_MAX && *failed > 0) {
        /* a later launch refused: the ones before it run, and one that
         * hangs or faults is this run's, not a reference's or a check's */
        rc = kr__engine_settle_refused(ctx, rc, u->deadline_s,
                                       "the plan's launches before the refused one");
    }
    if (rc != KR_OK) {
        kr__run_free(ctx, &cr);
        u->stopped = 1;
        *err = rc;
        return KR_OK;
    }
    rc = queued == KR_OK ? checks_read(v, u, m) : queued;
    kr__run_free(ctx, &cr);
    return rc;
}

/* Compares every run's outputs with want (the second's also bit for bit
 * with the first's) into a snapshot each run's checks point to; the wait
 * for them is also the wait for the reference run queued before them. */
static int compare_runs(vstate *v, vunit *u, int runs, vchecks *m, double share)
{
    const kr_problem *p = v->p;
    kr_context *ctx = v->ctx;
    int rc = kr__checks_begin(ctx);
    /* the first run's outputs again, after the second run: a second run
     * that rewrote them (finding them by address) would make both runs
     * agree, and the first right */
    for (size_t t = 0; t < p->num_tensors && rc == KR_OK && runs == 2; t++)
        if (u->out[0].buf[t].base)
            rc = kr__check_hash(ctx, &u->out[0].buf[t], v->key, &m[0].out_hash_later[t]);
    m[0].rehashed = runs == 2;
    for (int run = 0; run < runs && rc == KR_OK; run++)
        for (size_t t = 0; t < p->num_tensors && rc == KR_OK; t++) {
            const kr__tensor *x = &p->tensors[t];
            if (!kr__is_output(x))
                continue;
            rc = kr__check_compare(ctx, &u->out[run].buf[t], &u->want.buf[t], x, share,
                                   kr__output_poison(x, run), &m[run].cmp[t]);
            if (rc == KR_OK && run == 1)
                rc = kr__check_bitdiff(ctx, &u->out[0].buf[t], &u->out[1].buf[t], x->dtype,
                                       &m[1].diff[t]);
        }
    if (rc == KR_OK)
        rc = kr__reference_fetch_checks(ctx, &v->ref, u->c);
    for (int run = 0; run < runs && rc == KR_OK; run++) {
        free(m[run].compared);
        if (!(m[run].compared = kr__checks_snapshot(ctx)))
            rc = kr__fail(ctx, KR_ENOMEM, "out of memory");
    }
    return rc;
}

/* After the candidate's runs, the reference's outputs: none of them exists
 * on the device while candidate code runs, so there is nothing to find and
 * nothing to hide (they were kept masked through both runs before). The
 * runs' outputs are compared with them; outputs that fail against the fast
 * kernel (three quarters of the tolerance) are judged again against the
 * reference itself, with all of it: what passes is what the reference
 * passes, whichever kernel served (fast_reference.c). */
static int judge_against_reference(vstate *v, vunit *u, int runs, vchecks *m)
{
    int rc = kr__vwant_compute(v, u);
    if (rc == KR_OK)
        rc = kr__vwant_reveal(v, u);
    if (rc == KR_OK)
        rc = compare_runs(v, u, runs, m, kr__vunit_share(v, u));
    int differ = 0;
    for (int run = 0; run < runs && rc == KR_OK; run++)
        differ |= values_differ(v, &m[run]);
    if (rc == KR_OK && differ && v->ref.use_fast && u->want_on_device) {
        u->by_reference = 1;
        rc = kr__reference_queue_kernel(v->ctx, &v->ref, u->c, u->seed, &u->want, 0);
        if (rc == KR_OK)
            rc = compare_runs(v, u, runs, m, 1.0);
    }
    return rc;
}

static int verify_unit(vstate *v, vunit *u)
{
    int runs = v->o.flags & KR_VERIFY_SINGLE_RUN ? 1 : 2, done = 0, err = KR_OK;
    size_t failed = SIZE_MAX;
    vchecks m[2];
    memset(m, 0, sizeof m);
    int rc = kr__vdeadline(v, u->c, &u->deadline_s, &u->reference_s);
    if (rc == KR_OK)
        json_object_set_new(u->json, "deadline_s", json_real(u->deadline_s));
    if (rc == KR_OK)
        rc = inputs_and_hashes(v, u);
    for (; done < runs && rc == KR_OK && !u->stopped; done++)
        if ((rc = candidate_run(v, u, done, &m[done], &err, &failed)) == KR_OK && u->stopped)
            break;
    /* the runs that finished, judged in order, then the one that did not.
     * A fault or hang in the second run leaves a context that runs nothing
     * more (poisoned): the first run's guards and inputs are judged, its
     * outputs cannot be, and the unit's verdict is the fault's (it was
     * before too: the most severe wins) */
    if (rc == KR_OK && done && !v->ctx->poisoned)
        rc = judge_against_reference(v, u, done, m);
    for (int run = 0; run < done && rc == KR_OK; run++)
        kr__vjudge_run(v, u, run, &m[run]);
    if (rc == KR_OK && !v->ctx->poisoned)
        rc = kr__vwant_conceal(v, u);
    if (rc == KR_OK && err != KR_OK)
        rc = kr__vjudge_error(v, u, err, failed);
    free_checks(&m[0]);
    free_checks(&m[1]);
    return rc;
}

static vunit *unit_new(vstate *v, size_t c, size_t s, uint64_t seed)
{
    vunit *u = calloc(1, sizeof *u);
    if (!u)
        return NULL;
    u->id = v->units + 1;
    u->c = c;
    u->s = s;
    u->seed = kr_problem_case_seed(seed + s * 0x632BE59BD9B4E019ull, c);
    u->passed = 1;
    u->host_want = calloc(v->p->num_tensors ? v->p->num_tensors : 1, sizeof *u->host_want);
    u->in_hash = calloc(v->p->num_tensors ? v->p->num_tensors : 1, sizeof *u->in_hash);
    u->json = json_object();
    if (!u->host_want || !u->in_hash || !u->json) {
        free(u->host_want);
        free(u->in_hash);
        json_decref(u->json);
        free(u);
        return NULL;
    }
    json_object_set_new(u->json, "case", json_string(v->p->cases[c].name));
    json_object_set_new(u->json, "seed_index", json_integer((json_int_t)s));
    json_object_set_new(u->json, "outputs", json_array());
    json_object_set_new(u->json, "problems", json_array());
    return u;
}

static void unit_free(vstate *v, vunit *u)
{
    /* freed memory keeps no answer: kr__dbuf_free zeroes every buffer it
     * keeps or gives back (dbuf.c) */
    kr__tset_free(v->ctx, &u->in);
    kr__tset_free(v->ctx, &u->out[0]);
    kr__tset_free(v->ctx, &u->out[1]);
    kr__tset_free(v->ctx, &u->want);
    for (size_t t = 0; t < v->p->num_tensors; t++)
        free(u->host_want[t]);
    free(u->host_want);
    free(u->in_hash);
    free(u);
}

static int run_units(vstate *v, uint64_t seed)
{
    int rc = KR_OK;
    for (size_t c = 0; c < v->p->num_cases && rc == KR_OK && !v->ctx->poisoned; c++) {
        for (size_t s = 0; s < v->o.seeds_per_case && rc == KR_OK && !v->ctx->poisoned; s++) {
            vunit *u = unit_new(v, c, s, seed);
            if (!u)
                return kr__fail(v->ctx, KR_ENOMEM, "out of memory");
            rc = verify_unit(v, u);
            json_object_set_new(u->json, "passed", json_boolean(u->passed && rc == KR_OK));
            json_array_append_new(v->cases, u->json);
            v->units++;
            v->units_passed += u->passed && rc == KR_OK;
            if (!u->passed)
                v->failed_cases[c] = 1;
            unit_free(v, u);
        }
    }
    return rc;
}

/* The candidate first: a program that may not run as a candidate, or a
 * plan that does not fit, is its verdict. */
static int setup(vstate *v, const kr_program *cand, const kr_plan *plan)
{
    kr__engine *e;
    int rc = kr__program_admissible(v->ctx, cand);
    if (rc == KR_OK)
        rc = kr__engine_get(v->ctx, &e);
    if (rc == KR_OK) {
        rc = kr__plan_bind(v->ctx, plan, v->p, cand, &v->cand);
        v->cand_bound = 1;
    }
    if (rc == KR_OK && !(v->failed_cases = calloc(v->p->num_cases ? v->p->num_cases : 1, 1)))
        rc = kr__fail(v->ctx, KR_ENOMEM, "out of memory");
    if (rc == KR_OK)
        rc = kr__reference_open_serving(v->ctx, &v->ref, v->p);
    return rc;
}

static void teardown(vstate *v)
{
    if (v->cand_bound)
        kr__plan_unbind(&v->cand);
    kr__reference_close(v->ctx, &v->ref);
    kr__buf_free(&v->feedback);
    free(v->failed_cases);
}

static int not_judged(kr_report *r, kr_context *ctx, int rc)
{
    kr_report_set_verdict(r, rc == KR_ENODEVICE ? KR_VERDICT_NOT_RUN : KR_VERDICT_ERROR);
    kr_report_set_text(r, "message", kr_context_errmsg(ctx));
    return rc;
}

static void record_setup(vstate *v, uint64_t seed)
{
    json_t *sec = kr__report_section(v->report, "verify");
    char seed_text[32];
    snprintf(seed_text, sizeof seed_text, "0x%016llx", (unsigned long long)seed);
    json_object_set_new(sec, "seed", json_string(seed_text));
    json_object_set_new(sec, "seeds_per_case", json_integer(v->o.seeds_per_case));
    v->cases = json_array();
    json_object_set_new(sec, "checks", v->cases);
}

/* Where the expected outputs came from, once every unit ran (a fast kernel
 * may have been dropped on the way), and why not from the fast one. */
static void record_expected(vstate *v)
{
    if (!v->p->fast_source || v->p->reference_kind != KR_REFERENCE_SOURCE)
        return;
    json_t *sec = kr__report_section(v->report, "verify");
    json_object_set_new(sec, "expected_from",
                        json_string(v->ref.use_fast ? "reference.fast" : "reference"));
    if (!v->ref.use_fast)
        json_object_set_new(sec, "fast_reference_unused", json_string(v->ref.fast_why));
}

int kr_verify(kr_report *report, kr_context *ctx, const kr_problem *problem,
              const kr_program *cand, const kr_plan *plan, const kr_verify_options *opts)
{
    if (!report)
        return KR_EINVAL;
    if (!ctx || !problem || !cand || !plan)
        return not_judged(report, ctx, kr__fail(ctx, KR_EINVAL, "kr_verify needs a context, "
                                                "problem, program and plan"));
    kr__clear_error(ctx);
    if (kr__program_check_owner(ctx, cand, "the candidate") != KR_OK)
        return not_judged(report, ctx, KR_EINVAL);
    vstate v;
    memset(&v, 0, sizeof v);
    v.ctx = ctx;
    v.p = problem;
    v.report = report;
    char why[256];
    if (kr__options_read(&verify_version, &v.o, &verify_defaults, opts, why, sizeof why) != KR_OK)
        return not_judged(report, ctx, kr__fail(ctx, KR_EVERSION, "%s", why));
    v.o.seeds_per_case = v.o.seeds_per_case ? v.o.seeds_per_case : 2;
    v.o.timeout_s = v.o.timeout_s > 0 ? v.o.timeout_s : 10;
    v.o.max_mismatches = v.o.max_mismatches ? v.o.max_mismatches : 5;
    uint64_t seed = v.o.seed ? v.o.seed : kr__random64();
    v.key = kr__random64();
    int rc = setup(&v, cand, plan);
    if (rc == KR_EPLAN || rc == KR_ECOMPILE) {
        kr_report_set_verdict(report, rc == KR_EPLAN ? KR_VERDICT_INVALID_PLAN
                                                     : KR_VERDICT_COMPILE_ERROR);
        kr_report_set_text(report, "message", kr_context_errmsg(ctx));
        kr_report_set_text(report, "feedback", kr_context_errmsg(ctx));
        kr_report_set(report, "correct", 0);
        teardown(&v);
        return KR_OK;
    }
    if (rc == KR_OK) {
        record_setup(&v, seed);
        rc = run_units(&v, seed);
    }
    if (rc == KR_OK)
        kr__vsummarize(&v);
    if (rc == KR_OK)
        record_expected(&v);
    teardown(&v);
    return rc == KR_OK ? KR_OK : not_judged(report, ctx, rc);
}
