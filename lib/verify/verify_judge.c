/* Judging verify runs: check results become verdicts, flags, the message,
 * the feedback a model can act on, and the per-unit details. */
#include "verify/verify_impl.h"
#include "common/dtype.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void kr__vfail(vstate *v, vunit *u, int verdict, uint64_t flags, const char *what)
{
    char dims[256];
    kr__case_dims_text(v->p, u->c, dims, sizeof dims);
    if (v->feedback_unit == 0) {
        kr__buf_printf(&v->feedback, "case '%s' (%s): %s", v->p->cases[u->c].name, dims, what);
        v->feedback_unit = u->id;
    }
    if (!v->message[0])
        snprintf(v->message, sizeof v->message, "case '%s' (%s): %s", v->p->cases[u->c].name, dims,
                 what);
    u->passed = 0;
    v->flags |= flags;
    /* the most severe verdict wins: fault/timeout over launch error over incorrect */
    if (verdict > v->verdict || v->verdict == KR_VERDICT_PASSED)
        v->verdict = verdict;
    json_array_append_new(json_object_get(u->json, "problems"), json_string(what));
}

static double bits_double(unsigned long long b)
{
    double d;
    memcpy(&d, &b, 8);
    return d;
}

/* Explanations per evaluation besides the feedback's: each downloads the
 * output and the reference and scans them on the host (about 0.25 s for
 * 128 MiB); a wrong candidate fails in every unit and both runs, and was
 * paying seconds for words nobody reads past the first. The device's
 * counts stay in every unit's details. */
#define MAX_EXPLAINED 2

/* Downloads a wrong output and explains it in the details and, for the first
 * wrong output of the unit the feedback is about, in the feedback. */
static void explain(vstate *v, vunit *u, int run, size_t t, json_t *oj)
{
    int for_feedback = v->feedback_unit == u->id && !v->feedback_explained;
    if (!for_feedback && v->explained >= MAX_EXPLAINED)
        return;
    v->explained += !for_feedback;
    const kr__dbuf *b = &u->out[run].buf[t];
    void *got = malloc(b->bytes ? b->bytes : 1);
    if (!got)
        return;
    if (kr__cuda()->cuMemcpyDtoH(got, b->ptr, b->bytes) == CUDA_SUCCESS) {
        kr__buf text = KR__BUF_INIT;
        const void *want = kr__vunit_want_host(v, u, t);
        if (want)
            kr__explain_output(v->p, t, u->c, kr__vunit_share(v, u), got, want,
                               kr__output_poison(&v->p->tensors[t], run), v->o.max_mismatches,
                               &text, oj);
        if (text.data && v->feedback_unit == u->id && !v->feedback_explained) {
            kr__buf_printf(&v->feedback, "; %s", text.data);
            v->feedback_explained = 1;
        }
        kr__buf_free(&text);
    }
    free(got);
}

static json_t *output_json(const kr__tensor *x, int run, uint64_t n, const kr__cmp_stats *st,
                           double max_abs, double max_rel, double l2)
{
    json_t *oj = json_object();
    json_object_set_new(oj, "tensor", json_string(x->name));
    json_object_set_new(oj, "run", json_integer(run));
    json_object_set_new(oj, "elements", json_integer((json_int_t)n));
    json_object_set_new(oj, "mismatches", json_integer((json_int_t)st->mismatches));
    json_object_set_new(oj, "unwritten", json_integer((json_int_t)st->unwritten));
    json_object_set_new(oj, "max_abs_error", json_real(max_abs));
    json_object_set_new(oj, "max_rel_error", json_real(max_rel));
    json_object_set_new(oj, "rel_l2_error", json_real(l2));
    return oj;
}

static void judge_output(vstate *v, vunit *u, int run, size_t t, const kr__cmp_stats *st)
{
    const kr__tensor *x = &v->p->tensors[t];
    uint64_t n = kr__elements(v->p, t, u->c);
    double max_abs = bits_double(st->max_abs_bits), max_rel = bits_double(st->max_rel_bits);
    double l2 = st->sum_sq_ref > 0 ? sqrt(st->sum_sq_err / st->sum_sq_ref) : sqrt(st->sum_sq_err);
    v->max_abs = fmax(v->max_abs, max_abs);
    v->max_rel = fmax(v->max_rel, max_rel);
    v->worst_l2 = fmax(v->worst_l2, l2);
    json_t *oj = output_json(x, run, n, st, max_abs, max_rel, l2);
    json_array_append_new(json_object_get(u->json, "outputs"), oj);
    if (!st->mismatches)
        return;
    v->mismatches += st->mismatches;
    uint64_t flags = 0;
    if (st->unwritten)
        flags |= KR_FLAG_UNWRITTEN;
    if (st->nan_mismatch > st->unwritten)
        flags |= KR_FLAG_NAN;
    /* small, dense relative errors with nothing unwritten: reduced precision */
    if (!st->unwritten && !st->nan_mismatch && kr__dtype_is_float(x->dtype) && l2 > x->rtol &&
        l2 < 2e-2)
        flags |= KR_FLAG_PRECISION;
    char count[32], total[32], errors[128] = "", what[700];
    kr__count_text(st->mismatches, count, sizeof count);
    kr__count_text(n, total, sizeof total);
    if (max_abs > 0) /* unwritten and NaN elements have no finite error */
        snprintf(errors, sizeof errors, " (max abs error %.3g, relative L2 error %.3g)", max_abs, l2);
    snprintf(what, sizeof what, "%s%s of %s outputs of '%s' wrong%s%s", run ? "second run: " : "",
             count, total, x->name, errors,
             flags & KR_FLAG_PRECISION ? "; the errors look like reduced precision" : "");
    kr__vfail(v, u, KR_VERDICT_INCORRECT, flags, what);
    explain(v, u, run, t, oj);
}

static void judge_guard(vstate *v, vunit *u, uint64_t bad, const char *name)
{
    if (!bad)
        return;
    char what[300];
    snprintf(what, sizeof what, "wrote outside the bounds of '%s' (%llu bytes of its guard zones "
             "changed)", name, (unsigned long long)bad);
    kr__vfail(v, u, KR_VERDICT_INCORRECT, KR_FLAG_OUT_OF_BOUNDS, what);
}

void kr__vjudge_run(vstate *v, vunit *u, int run, const vchecks *m)
{
    const kr_problem *p = v->p;
    for (size_t t = 0; t < p->num_tensors; t++)
        judge_guard(v, u, m->after_run[m->tensor_guards[t]], p->tensors[t].name);
    for (size_t s = 0; s < m->num_scratch; s++)
        judge_guard(v, u, m->after_run[m->scratch_guards[s]], v->cand.plan->scratch[s].name);
    for (size_t t = 0; t < p->num_tensors; t++) {
        if (p->tensors[t].role != KR_ROLE_IN || m->after_run[m->hash[t]] == u->in_hash[t])
            continue;
        char what[200];
        snprintf(what, sizeof what, "modified input '%s' (inputs must stay unchanged)",
                 p->tensors[t].name);
        kr__vfail(v, u, KR_VERDICT_INCORRECT, KR_FLAG_INPUT_MUTATED, what);
    }
    for (size_t t = 0; t < p->num_tensors && m->compared && m->rehashed; t++) {
        if (!u->out[0].buf[t].base || m->after_run[m->out_hash[t]] == m->compared[m->out_hash_later[t]])
            continue;
        char what[240];
        snprintf(what, sizeof what, "the second run wrote into the first run's outputs of '%s' "
                 "(an earlier call's buffers are not the kernel's to write)", p->tensors[t].name);
        kr__vfail(v, u, KR_VERDICT_INCORRECT, KR_FLAG_OUT_OF_BOUNDS, what);
    }
    int was_passing = u->passed;
    for (size_t t = 0; t < p->num_tensors && m->compared; t++) {
        if (!kr__is_output(&p->tensors[t]))
            continue;
        kr__cmp_stats st;
        memcpy(&st, &m->compared[m->cmp[t]], sizeof st);
        judge_output(v, u, run, t, &st);
        /* unwritten elements hold a different poison in each run: only the
         * differences beyond them say the kernel itself is nondeterministic */
        if (run == 1 && m->compared[m->diff[t]] > st.unwritten) {
            /* bitwise different runs: fine within tolerance, a race beyond it */
            json_object_set_new(u->json, "nondeterministic", json_true());
            if (st.mismatches)
                v->flags |= KR_FLAG_RACE;
            else if (was_passing)
                v->flags |= KR_FLAG_NONDETERMINISTIC;
        }
    }
    if (run == 1 && was_passing && !u->passed) {
        v->flags |= KR_FLAG_RACE;
        json_array_append_new(json_object_get(u->json, "problems"),
                              json_string("the second run disagrees beyond tolerance: a race or "
                                          "a read of uninitialised memory"));
        if (v->feedback_unit == u->id)
            kr__buf_printf(&v->feedback, " (the first run was right: a race or a read of "
                           "uninitialised memory)");
    }
}

int kr__vjudge_error(vstate *v, vunit *u, int rc, size_t failed_launch)
{
    char what[1200];
    if (rc == KR_EFAULT) {
        snprintf(what, sizeof what, "the kernel faulted: %s", kr_context_errmsg(v->ctx));
        kr__vfail(v, u, KR_VERDICT_FAULT, 0, what);
    } else if (rc == KR_ETIMEOUT) {
        if (u->reference_s > 0 && u->deadline_s < v->o.timeout_s)
            snprintf(what, sizeof what, "the kernel did not finish within %.2f s (the reference "
                     "took %.3f ms on this case; a run may take %.0fx that, at least %.2f s, at "
                     "most timeout_s %.1f s)", u->deadline_s, u->reference_s * 1e3,
                     KR__DEADLINE_FACTOR, KR__DEADLINE_FLOOR_S, v->o.timeout_s);
        else
            snprintf(what, sizeof what, "the kernel did not finish within %.2f s", u->deadline_s);
        kr__vfail(v, u, KR_VERDICT_TIMEOUT, 0, what);
    } else if (rc == KR_EPLAN) {
        kr__vfail(v, u, KR_VERDICT_INVALID_PLAN, 0, kr_context_errmsg(v->ctx));
    } else if (rc == KR_ECUDA && failed_launch != SIZE_MAX) {
        snprintf(what, sizeof what, "the launch was refused: %s", kr_context_errmsg(v->ctx));
        kr__vfail(v, u, KR_VERDICT_LAUNCH_ERROR, 0, what);
    } else {
        return rc; /* not the candidate's doing */
    }
    return KR_OK;
}

static void put_metrics(vstate *v, size_t failed_cases)
{
    kr_report *r = v->report;
    kr_report_set(r, "correct", v->verdict == KR_VERDICT_PASSED);
    kr_report_set(r, "checks_total", (double)v->units);
    kr_report_set(r, "checks_passed", (double)v->units_passed);
    kr_report_set(r, "cases_total", (double)v->p->num_cases);
    kr_report_set(r, "cases_failed", (double)failed_cases);
    kr_report_set(r, "mismatches", (double)v->mismatches);
    kr_report_set(r, "max_abs_error", v->max_abs);
    kr_report_set(r, "max_rel_error", v->max_rel);
    kr_report_set(r, "rel_l2_error", v->worst_l2);
}

void kr__vsummarize(vstate *v)
{
    kr_report *r = v->report;
    if (v->verdict == KR_VERDICT_NONE)
        v->verdict = KR_VERDICT_PASSED;
    size_t failed_cases = 0, cases = v->p->num_cases;
    for (size_t c = 0; c < cases; c++)
        failed_cases += v->failed_cases[c] != 0;
    if (v->verdict == KR_VERDICT_INCORRECT && failed_cases && failed_cases < cases)
        v->flags |= KR_FLAG_SHAPE_SPECIFIC;
    kr_report_set_verdict(r, v->verdict);
    kr_report_set_flags(r, kr_report_flags(r) | v->flags);
    put_metrics(v, failed_cases);
    if (v->verdict == KR_VERDICT_PASSED) {
        /* never how many calls verification made: nothing a policy could
         * count on to tell checked calls from timed ones */
        kr__report_printf(r, "feedback", "correct on all %zu cases%s", cases,
                          v->flags & KR_FLAG_NONDETERMINISTIC
                              ? "; results differ bitwise between runs (within tolerance)" : "");
        return;
    }
    if (failed_cases > 1)
        kr__buf_printf(&v->feedback, " (%zu of %zu cases fail)", failed_cases, cases);
    else if (failed_cases == 1 && cases == 2)
        kr__buf_printf(&v->feedback, " (the other case passes)");
    else if (failed_cases == 1 && cases > 2)
        kr__buf_printf(&v->feedback, " (the other %zu cases pass)", cases - 1);
    kr_report_set_text(r, "feedback", v->feedback.data ? v->feedback.data : v->message);
    kr_report_set_text(r, "message", v->message);
}
