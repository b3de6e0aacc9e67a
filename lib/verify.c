/* kr_verify: is the candidate right? One case x seed at a time:
 *
 *   inputs generated on the GPU, hashed (keyed hash, expected value on the host)
 *   reference run on its own poisoned outputs; results copied to the host,
 *     its buffers scrubbed and freed before the candidate runs
 *   candidate run 1: fresh outputs poisoned with pattern A, guard zones,
 *     then canaries, input hashes, comparison with the uploaded reference
 *   candidate run 2: other fresh addresses, pattern B; the same checks plus a
 *     bitwise comparison with run 1 (nondeterministic vs race)
 *
 * Nothing the candidate can reach holds the answer while it runs, and every
 * check's expected value lives on the host. */
#include "kreward/evaluate.h"
#include "dtype.h"
#include "launch.h"
#include "reference.h"
#include "verify_impl.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#define MAX_T 64
#define MAX_S 64

typedef struct {
    kr_context *ctx;
    kr__gpu *g;
    const kr_problem *p;
    kr__bound_plan cand;
    kr__bound_plan ref;          /* unused for golden problems */
    int has_ref;
    kr_verify_options o;
    uint64_t key;                /* hash key, fresh per verify */
    kr_report *report;
    json_t *cases;
    /* summary */
    size_t units, units_passed;
    uint64_t flags, mismatches;
    double max_abs, max_rel, worst_l2;
    int verdict;
    int failed_cases[256];
    kr__buf feedback;            /* about the first failing unit only */
    size_t feedback_unit;        /* its id (units are numbered from 1) */
    int feedback_explained;      /* its first wrong output has been explained */
    char message[1024];
} vstate;

typedef struct {
    size_t id;
    size_t c, s;
    uint64_t seed;
    kr__dbuf in[MAX_T], out[2][MAX_T], want[MAX_T];
    void *host_want[MAX_T];      /* reference outputs on the host */
    int host_want_owned;         /* malloc'd (golden) rather than pinned staging */
    uint64_t in_hash[MAX_T];
    json_t *json;
    int passed;
} vunit;

static int is_output(const kr__tensor *x)
{
    return x->role != KR_ROLE_IN;
}

static uint64_t elements(const kr_problem *p, size_t t, size_t c)
{
    return p->cases[c].bytes[t] / (uint64_t)kr__dtype_size(p->tensors[t].dtype);
}

/* Records the first failure's words for the message and the feedback. */
static void fail_unit(vstate *v, vunit *u, int verdict, uint64_t flags, const char *what)
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
    json_t *problems = json_object_get(u->json, "problems");
    json_array_append_new(problems, json_string(what));
}

static int alloc_tensor(vstate *v, vunit *u, kr__dbuf *b, size_t t, const char *role)
{
    char what[160];
    snprintf(what, sizeof what, "tensor '%s' (%s) in case '%s'", v->p->tensors[t].name, role,
             v->p->cases[u->c].name);
    return kr__dbuf_alloc(v->ctx, b, v->p->cases[u->c].bytes[t], what);
}

static int generate(vstate *v, vunit *u, const kr__dbuf *b, size_t t)
{
    return kr__k_generate(v->ctx, b->ptr, elements(v->p, t, u->c), &v->p->tensors[t].dist,
                          u->seed, (uint32_t)t);
}

/* Fresh output buffers for a run: poisoned outputs, regenerated in-outs. */
static int prepare_outputs(vstate *v, vunit *u, kr__dbuf *outs, int variant)
{
    for (size_t t = 0; t < v->p->num_tensors; t++) {
        const kr__tensor *x = &v->p->tensors[t];
        if (!is_output(x))
            continue;
        int rc = alloc_tensor(v, u, &outs[t], t, "output");
        if (rc == KR_OK)
            rc = x->role == KR_ROLE_OUT ? kr__poison(v->ctx, &outs[t], x->dtype, variant)
                                        : generate(v, u, &outs[t], t);
        if (rc != KR_OK)
            return rc;
    }
    return KR_OK;
}

/* The pointer each tensor argument gets: inputs shared, outputs per run. */
static void tensor_ptrs(const vstate *v, const vunit *u, const kr__dbuf *outs, CUdeviceptr *ptrs)
{
    for (size_t t = 0; t < v->p->num_tensors; t++)
        ptrs[t] = is_output(&v->p->tensors[t]) ? outs[t].ptr : u->in[t].ptr;
}

static int alloc_scratch(vstate *v, vunit *u, const kr__bound_plan *bp, kr__dbuf *scratch,
                         CUdeviceptr *ptrs)
{
    const kr__cuda_api *cu = kr__cuda();
    for (size_t s = 0; s < bp->plan->num_scratch; s++) {
        uint64_t bytes;
        int rc = kr__plan_scratch_bytes(v->ctx, bp, s, u->c, &bytes);
        if (rc == KR_OK)
            rc = kr__dbuf_alloc(v->ctx, &scratch[s], bytes, "a scratch buffer");
        if (rc != KR_OK)
            return rc;
        CUresult r = cu->cuMemsetD8Async(scratch[s].ptr, bp->plan->scratch[s].zero ? 0 : 0xA5,
                                         bytes, v->g->stream);
        if (r != CUDA_SUCCESS)
            return kr__cuda_fail(v->ctx, r, "cuMemsetD8Async (scratch)");
        ptrs[s] = scratch[s].ptr;
    }
    return KR_OK;
}

static void free_bufs(vstate *v, kr__dbuf *bufs, size_t n)
{
    for (size_t i = 0; i < n; i++)
        kr__dbuf_free(v->ctx, &bufs[i]);
}

/* Scrubs buffers that held reference results, so no later allocation finds
 * the answer in memory. */
static int scrub(vstate *v, kr__dbuf *bufs, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (!bufs[i].base)
            continue;
        CUresult r = kr__cuda()->cuMemsetD8Async(bufs[i].base, 0, bufs[i].alloc, v->g->stream);
        if (r != CUDA_SUCCESS)
            return kr__cuda_fail(v->ctx, r, "scrubbing reference buffers");
    }
    return KR_OK;
}

/* Queues the keyed hash of every input into slots; returns the first slot. */
static int hash_inputs(vstate *v, vunit *u, size_t *first)
{
    *first = v->g->slots_used;
    for (size_t t = 0; t < v->p->num_tensors; t++) {
        if (v->p->tensors[t].role != KR_ROLE_IN)
            continue;
        size_t slot;
        CUdeviceptr d = kr__gpu_slot(v->g, 1, &slot);
        int rc = d ? kr__k_hash(v->ctx, u->in[t].ptr, u->in[t].bytes, v->key, d)
                   : kr__fail(v->ctx, KR_ENOMEM, "too many checks");
        if (rc != KR_OK)
            return rc;
    }
    return KR_OK;
}

static int run_plan(vstate *v, vunit *u, const kr__bound_plan *bp, const kr__dbuf *outs,
                    kr__dbuf *scratch, size_t *failed)
{
    CUdeviceptr tptr[MAX_T], sptr[MAX_S];
    tensor_ptrs(v, u, outs, tptr);
    kr__ready_plan rp;
    int rc = alloc_scratch(v, u, bp, scratch, sptr);
    if (rc == KR_OK)
        rc = kr__ready(v->ctx, bp, u->c, &rp);
    if (rc != KR_OK)
        return rc;
    kr__ready_bind(&rp, tptr, sptr);
    rc = kr__ready_launch(v->ctx, bp, &rp, v->g->stream, failed);
    kr__ready_free(&rp);
    if (rc == KR_OK)
        rc = kr__gpu_wait(v->ctx, v->o.timeout_s, "the plan");
    return rc;
}

/* The reference's outputs for this unit, on the host. */
static int reference_outputs(vstate *v, vunit *u)
{
    const kr_problem *p = v->p;
    size_t total = 0;
    for (size_t t = 0; t < p->num_tensors; t++)
        if (is_output(&p->tensors[t]))
            total += p->cases[u->c].bytes[t];
    if (!v->has_ref)
        return KR_OK; /* golden: filled by the caller in golden_outputs */
    void *stage = NULL;
    kr__dbuf outs[MAX_T] = {{0}}, scratch[MAX_S] = {{0}};
    size_t failed;
    /* device buffers first: a problem too large for the card fails here,
     * before any host staging is taken */
    int rc = prepare_outputs(v, u, outs, 0);
    if (rc == KR_OK && (rc = kr__gpu_pinned(v->ctx, total, &stage)) != KR_OK)
        rc = kr__fail(v->ctx, KR_ENOMEM, "the reference outputs need %.2f GB of pinned host memory",
                      (double)total / 1e9);
    if (rc == KR_ENOMEM) {
        free_bufs(v, outs, MAX_T);
        return rc;
    }
    if (rc == KR_OK)
        rc = run_plan(v, u, &v->ref, outs, scratch, &failed);
    if (rc != KR_OK) {
        char msg[1200];
        snprintf(msg, sizeof msg, "the reference failed in case '%s': %s", p->cases[u->c].name,
                 kr_context_errmsg(v->ctx));
        kr__fail(v->ctx, rc == KR_EFAULT ? KR_EFAULT : KR_ECUDA, "%s", msg);
        return rc == KR_EFAULT ? KR_EFAULT : KR_ECUDA;
    }
    size_t off = 0;
    for (size_t t = 0; t < p->num_tensors && rc == KR_OK; t++) {
        if (!is_output(&p->tensors[t]))
            continue;
        u->host_want[t] = (char *)stage + off;
        CUresult r = kr__cuda()->cuMemcpyDtoHAsync(u->host_want[t], outs[t].ptr, outs[t].bytes,
                                                   v->g->stream);
        if (r != CUDA_SUCCESS)
            rc = kr__cuda_fail(v->ctx, r, "copying reference outputs");
        off += p->cases[u->c].bytes[t];
    }
    if (rc == KR_OK)
        rc = scrub(v, outs, MAX_T);
    if (rc == KR_OK)
        rc = scrub(v, scratch, MAX_S);
    if (rc == KR_OK)
        rc = kr__gpu_wait(v->ctx, 60, "copying reference outputs");
    free_bufs(v, outs, MAX_T);
    free_bufs(v, scratch, MAX_S);
    return rc;
}

/* Golden problems: the caller computes outputs from host copies of inputs. */
static int golden_outputs(vstate *v, vunit *u)
{
    const kr_problem *p = v->p;
    if (!p->golden)
        return kr__fail(v->ctx, KR_ESTATE, "problem '%s' has a golden reference but no golden "
                        "callback (kr_problem_set_golden)", p->name);
    void *host[MAX_T] = {0};
    uint64_t bytes[MAX_T];
    int rc = KR_OK;
    for (size_t t = 0; t < p->num_tensors && rc == KR_OK; t++) {
        bytes[t] = p->cases[u->c].bytes[t];
        if (!(host[t] = malloc(bytes[t])))
            rc = kr__fail(v->ctx, KR_ENOMEM, "out of host memory for golden outputs");
        else if (p->tensors[t].role != KR_ROLE_OUT)
            rc = kr_problem_generate_host(v->ctx, p, t, u->c, u->seed, host[t], bytes[t]);
        else
            memset(host[t], 0, bytes[t]);
    }
    char err[512] = "";
    if (rc == KR_OK) {
        kr_golden_request req = {KR_GOLDEN_REQUEST_VERSION, (uint32_t)u->c, u->seed,
                                 p->num_tensors, host, bytes, p->cases[u->c].dims, err, sizeof err};
        if (p->golden(p->golden_user, &req) != 0)
            rc = kr__fail(v->ctx, KR_EPLUGIN, "the golden callback failed for case '%s': %s",
                          p->cases[u->c].name, err[0] ? err : "no message");
    }
    for (size_t t = 0; t < p->num_tensors; t++) {
        if (rc == KR_OK && is_output(&p->tensors[t])) {
            u->host_want[t] = host[t];
            host[t] = NULL;
        }
        free(host[t]);
    }
    u->host_want_owned = 1;
    return rc;
}

/* Uploads the reference outputs, after the candidate ran. */
static int upload_want(vstate *v, vunit *u)
{
    for (size_t t = 0; t < v->p->num_tensors; t++) {
        if (!is_output(&v->p->tensors[t]) || u->want[t].base)
            continue;
        int rc = alloc_tensor(v, u, &u->want[t], t, "reference copy");
        if (rc != KR_OK)
            return rc;
        CUresult r = kr__cuda()->cuMemcpyHtoDAsync(u->want[t].ptr, u->host_want[t],
                                                   u->want[t].bytes, v->g->stream);
        if (r != CUDA_SUCCESS)
            return kr__cuda_fail(v->ctx, r, "uploading reference outputs");
    }
    return KR_OK;
}

typedef struct {
    size_t hash_slot;
    size_t guard_slot[MAX_T * 3 + MAX_S];
    size_t num_guards;
    const char *guard_name[MAX_T * 3 + MAX_S];
    size_t cmp_slot[MAX_T];
    size_t diff_slot[MAX_T];
} slots_map;

static int queue_checks(vstate *v, vunit *u, int run, kr__dbuf *scratch, size_t num_scratch,
                        slots_map *m)
{
    const kr_problem *p = v->p;
    kr__gpu *g = v->g;
    int rc = kr__gpu_slots_reset(v->ctx, g);
    m->num_guards = 0;
    for (size_t t = 0; t < p->num_tensors && rc == KR_OK; t++) {
        kr__dbuf *b = is_output(&p->tensors[t]) ? &u->out[run][t] : &u->in[t];
        m->guard_name[m->num_guards] = p->tensors[t].name;
        rc = kr__dbuf_check_guards(v->ctx, g, b, &m->guard_slot[m->num_guards++]);
    }
    for (size_t s = 0; s < num_scratch && rc == KR_OK; s++) {
        m->guard_name[m->num_guards] = v->cand.plan->scratch[s].name;
        rc = kr__dbuf_check_guards(v->ctx, g, &scratch[s], &m->guard_slot[m->num_guards++]);
    }
    if (rc == KR_OK)
        rc = hash_inputs(v, u, &m->hash_slot);
    if (rc == KR_OK)
        rc = upload_want(v, u);
    for (size_t t = 0; t < p->num_tensors && rc == KR_OK; t++) {
        const kr__tensor *x = &p->tensors[t];
        if (!is_output(x))
            continue;
        CUdeviceptr stats = kr__gpu_slot(g, sizeof(kr__cmp_stats) / 8, &m->cmp_slot[t]);
        if (!stats)
            return kr__fail(v->ctx, KR_ENOMEM, "too many checks");
        /* first_bad starts at ~0 for atomicMin */
        CUresult r = kr__cuda()->cuMemsetD8Async(stats + 24, 0xff, 8, g->stream);
        if (r != CUDA_SUCCESS)
            return kr__cuda_fail(v->ctx, r, "cuMemsetD8Async");
        uint32_t poison = x->role == KR_ROLE_OUT ? kr__poison_bits(x->dtype, run) : 0xffffffffu;
        rc = kr__k_compare(v->ctx, u->out[run][t].ptr, u->want[t].ptr, elements(p, t, u->c),
                           x->dtype, x->rtol, x->atol, poison, stats);
        if (rc == KR_OK && run == 1) {
            CUdeviceptr d = kr__gpu_slot(g, 1, &m->diff_slot[t]);
            rc = d ? kr__k_bitdiff(v->ctx, u->out[0][t].ptr, u->out[1][t].ptr, elements(p, t, u->c),
                                   (uint32_t)kr__dtype_size(x->dtype), d)
                   : kr__fail(v->ctx, KR_ENOMEM, "too many checks");
        }
    }
    if (rc == KR_OK)
        rc = kr__gpu_fetch_slots(v->ctx, g);
    return rc;
}

static double bits_double(unsigned long long b)
{
    double d;
    memcpy(&d, &b, 8);
    return d;
}

/* Downloads a wrong output and explains it in the details and, for the first
 * wrong output of the unit the feedback is about, in the feedback. */
static void explain(vstate *v, vunit *u, int run, size_t t, json_t *oj)
{
    const kr__tensor *x = &v->p->tensors[t];
    void *got = malloc(u->out[run][t].bytes);
    if (!got)
        return;
    if (kr__cuda()->cuMemcpyDtoH(got, u->out[run][t].ptr, u->out[run][t].bytes) == CUDA_SUCCESS) {
        kr__buf text = KR__BUF_INIT;
        uint32_t poison = x->role == KR_ROLE_OUT ? kr__poison_bits(x->dtype, run) : 0xffffffffu;
        kr__explain_output(v->p, t, u->c, got, u->host_want[t], poison,
                           v->o.max_mismatches, &text, oj);
        if (text.data && v->feedback_unit == u->id && !v->feedback_explained) {
            kr__buf_printf(&v->feedback, "; %s", text.data);
            v->feedback_explained = 1;
        }
        kr__buf_free(&text);
    }
    free(got);
}

static void judge_output(vstate *v, vunit *u, int run, size_t t, const kr__cmp_stats *st,
                         json_t *outputs)
{
    const kr__tensor *x = &v->p->tensors[t];
    uint64_t n = elements(v->p, t, u->c);
    double max_abs = bits_double(st->max_abs_bits), max_rel = bits_double(st->max_rel_bits);
    double l2 = st->sum_sq_ref > 0 ? sqrt(st->sum_sq_err / st->sum_sq_ref) : sqrt(st->sum_sq_err);
    v->max_abs = fmax(v->max_abs, max_abs);
    v->max_rel = fmax(v->max_rel, max_rel);
    v->worst_l2 = fmax(v->worst_l2, l2);
    json_t *oj = json_object();
    json_object_set_new(oj, "tensor", json_string(x->name));
    json_object_set_new(oj, "run", json_integer(run));
    json_object_set_new(oj, "elements", json_integer((json_int_t)n));
    json_object_set_new(oj, "mismatches", json_integer((json_int_t)st->mismatches));
    json_object_set_new(oj, "unwritten", json_integer((json_int_t)st->unwritten));
    json_object_set_new(oj, "max_abs_error", json_real(max_abs));
    json_object_set_new(oj, "max_rel_error", json_real(max_rel));
    json_object_set_new(oj, "rel_l2_error", json_real(l2));
    json_array_append_new(outputs, oj);
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
    fail_unit(v, u, KR_VERDICT_INCORRECT, flags, what);
    explain(v, u, run, t, oj);
}

static void judge_run(vstate *v, vunit *u, int run, const slots_map *m)
{
    const kr_problem *p = v->p;
    unsigned long long *slots = v->g->slots;
    json_t *outputs = json_object_get(u->json, "outputs");
    for (size_t i = 0; i < m->num_guards; i++) {
        unsigned long long bad = slots[m->guard_slot[i]];
        if (bad) {
            char what[300];
            snprintf(what, sizeof what, "wrote outside the bounds of '%s' (%llu bytes of its guard "
                     "zones changed)", m->guard_name[i], bad);
            fail_unit(v, u, KR_VERDICT_INCORRECT, KR_FLAG_OUT_OF_BOUNDS, what);
        }
    }
    size_t h = m->hash_slot;
    for (size_t t = 0; t < p->num_tensors; t++) {
        if (p->tensors[t].role != KR_ROLE_IN)
            continue;
        if (slots[h++] != u->in_hash[t]) {
            char what[200];
            snprintf(what, sizeof what, "modified input '%s' (inputs must stay unchanged)",
                     p->tensors[t].name);
            fail_unit(v, u, KR_VERDICT_INCORRECT, KR_FLAG_INPUT_MUTATED, what);
        }
    }
    int was_passing = u->passed;
    for (size_t t = 0; t < p->num_tensors; t++) {
        if (!is_output(&p->tensors[t]))
            continue;
        kr__cmp_stats st;
        memcpy(&st, &slots[m->cmp_slot[t]], sizeof st);
        judge_output(v, u, run, t, &st, outputs);
        /* unwritten elements hold a different poison in each run: only the
         * differences beyond them say the kernel itself is nondeterministic */
        if (run == 1 && slots[m->diff_slot[t]] > st.unwritten) {
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

/* A fault, timeout or refused launch ends the unit (and, for faults, the
 * whole verification: the context is gone). */
static int judge_error(vstate *v, vunit *u, int rc, size_t failed_launch)
{
    char what[1200];
    if (rc == KR_EFAULT) {
        snprintf(what, sizeof what, "the kernel faulted: %s", kr_context_errmsg(v->ctx));
        fail_unit(v, u, KR_VERDICT_FAULT, 0, what);
    } else if (rc == KR_ETIMEOUT) {
        snprintf(what, sizeof what, "the kernel did not finish within %.1f s", v->o.timeout_s);
        fail_unit(v, u, KR_VERDICT_TIMEOUT, 0, what);
    } else if (rc == KR_EPLAN) {
        fail_unit(v, u, KR_VERDICT_INVALID_PLAN, 0, kr_context_errmsg(v->ctx));
    } else if (rc == KR_ECUDA && failed_launch != SIZE_MAX) {
        snprintf(what, sizeof what, "the launch was refused: %s", kr_context_errmsg(v->ctx));
        fail_unit(v, u, KR_VERDICT_LAUNCH_ERROR, 0, what);
    } else {
        return rc; /* not the candidate's doing */
    }
    return KR_OK;
}

static void free_unit(vstate *v, vunit *u)
{
    free_bufs(v, u->in, MAX_T);
    free_bufs(v, u->out[0], MAX_T);
    free_bufs(v, u->out[1], MAX_T);
    free_bufs(v, u->want, MAX_T);
    if (u->host_want_owned)
        for (size_t t = 0; t < MAX_T; t++)
            free(u->host_want[t]);
}

static int inputs_and_hashes(vstate *v, vunit *u)
{
    int rc = KR_OK;
    for (size_t t = 0; t < v->p->num_tensors && rc == KR_OK; t++)
        if (v->p->tensors[t].role == KR_ROLE_IN && (rc = alloc_tensor(v, u, &u->in[t], t, "input")) == KR_OK)
            rc = generate(v, u, &u->in[t], t);
    size_t first;
    if (rc == KR_OK && (rc = kr__gpu_slots_reset(v->ctx, v->g)) == KR_OK &&
        (rc = hash_inputs(v, u, &first)) == KR_OK && (rc = kr__gpu_fetch_slots(v->ctx, v->g)) == KR_OK)
        for (size_t t = 0; t < v->p->num_tensors; t++)
            if (v->p->tensors[t].role == KR_ROLE_IN)
                u->in_hash[t] = v->g->slots[first++];
    return rc;
}

static int verify_unit(vstate *v, vunit *u)
{
    int rc = inputs_and_hashes(v, u);
    if (rc == KR_OK)
        rc = v->has_ref ? reference_outputs(v, u) : golden_outputs(v, u);
    if (rc != KR_OK)
        return rc;
    int runs = v->o.flags & KR_VERIFY_SINGLE_RUN ? 1 : 2;
    for (int run = 0; run < runs; run++) {
        kr__dbuf scratch[MAX_S] = {{0}};
        size_t failed = SIZE_MAX;
        rc = prepare_outputs(v, u, u->out[run], run);
        if (rc == KR_OK)
            rc = run_plan(v, u, &v->cand, u->out[run], scratch, &failed);
        if (rc != KR_OK) {
            free_bufs(v, scratch, MAX_S);
            return judge_error(v, u, rc, failed);
        }
        slots_map m;
        rc = queue_checks(v, u, run, scratch, v->cand.plan->num_scratch, &m);
        free_bufs(v, scratch, MAX_S);
        if (rc != KR_OK)
            return rc;
        judge_run(v, u, run, &m);
        /* a kernel that changed its inputs gets them back for the second run,
         * so that run judges the kernel and not the damage */
        for (size_t t = 0, h = m.hash_slot; t < v->p->num_tensors && rc == KR_OK; t++)
            if (v->p->tensors[t].role == KR_ROLE_IN && v->g->slots[h++] != u->in_hash[t])
                rc = generate(v, u, &u->in[t], t);
    }
    return rc;
}

int kr_verify_options_init(kr_verify_options *o, uint32_t version)
{
    if (!o)
        return KR_EINVAL;
    if (version != KR_VERIFY_OPTIONS_VERSION)
        return KR_EVERSION;
    kr_verify_options d = KR_VERIFY_OPTIONS_INIT;
    *o = d;
    return KR_OK;
}

static uint64_t fresh_seed(void)
{
    uint64_t s = 0;
    while (s == 0 && getrandom(&s, sizeof s, 0) != (ssize_t)sizeof s)
        ;
    return s ? s : 0x6b7265776172641ull;
}

static void summarize(vstate *v)
{
    kr_report *r = v->report;
    if (v->verdict == KR_VERDICT_NONE)
        v->verdict = KR_VERDICT_PASSED;
    size_t failed_cases = 0, cases = v->p->num_cases;
    for (size_t c = 0; c < cases && c < 256; c++)
        failed_cases += v->failed_cases[c] != 0;
    if (v->verdict == KR_VERDICT_INCORRECT && failed_cases && failed_cases < cases)
        v->flags |= KR_FLAG_SHAPE_SPECIFIC;
    kr_report_set_verdict(r, v->verdict);
    kr_report_set_flags(r, kr_report_flags(r) | v->flags);
    kr_report_set(r, "correct", v->verdict == KR_VERDICT_PASSED);
    kr_report_set(r, "checks_total", (double)v->units);
    kr_report_set(r, "checks_passed", (double)v->units_passed);
    kr_report_set(r, "cases_total", (double)cases);
    kr_report_set(r, "cases_failed", (double)failed_cases);
    kr_report_set(r, "mismatches", (double)v->mismatches);
    kr_report_set(r, "max_abs_error", v->max_abs);
    kr_report_set(r, "max_rel_error", v->max_rel);
    kr_report_set(r, "rel_l2_error", v->worst_l2);
    if (v->verdict == KR_VERDICT_PASSED) {
        kr__report_printf(r, "feedback", "correct on all %zu cases (%zu checks)%s", cases, v->units,
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

static int setup_reference(vstate *v)
{
    int rc = kr__gpu_get(v->ctx, &v->g);
    if (rc != KR_OK)
        return rc;
    if (v->p->num_tensors > MAX_T)
        return kr__fail(v->ctx, KR_EUNSUPPORTED, "at most %d tensors", MAX_T);
    if (v->p->reference_kind == KR_REFERENCE_SOURCE) {
        /* compiled through the cache: the first verify of a problem pays for it */
        rc = kr__reference_bind(v->ctx, v->p, &v->ref);
        v->has_ref = 1;
    }
    return rc;
}

static int setup(vstate *v, const kr_program *cand, const kr_plan *plan)
{
    if (plan->num_scratch > MAX_S)
        return kr__fail(v->ctx, KR_EUNSUPPORTED, "at most %d scratch buffers", MAX_S);
    /* the candidate first: a plan that does not fit is the candidate's verdict */
    int rc = kr__gpu_get(v->ctx, &v->g);
    if (rc == KR_OK)
        rc = kr__plan_bind(v->ctx, plan, v->p, cand, &v->cand);
    if (rc == KR_OK)
        rc = setup_reference(v);
    return rc;
}

static void teardown(vstate *v)
{
    kr__plan_unbind(&v->cand);
    kr__reference_unbind(&v->ref);
    kr__buf_free(&v->feedback);
}

static int not_judged(kr_report *r, kr_context *ctx, int rc)
{
    kr_report_set_verdict(r, rc == KR_ENODEVICE ? KR_VERDICT_NOT_RUN : KR_VERDICT_ERROR);
    kr_report_set_text(r, "message", kr_context_errmsg(ctx));
    return rc;
}

int kr_verify(kr_context *ctx, const kr_problem *problem, const kr_program *cand,
              const kr_plan *plan, const kr_verify_options *opts, kr_report **out)
{
    if (!out)
        return KR_EINVAL;
    *out = NULL;
    if (kr_report_new(out) != KR_OK)
        return KR_ENOMEM;
    if (!ctx || !problem || !cand || !plan)
        return not_judged(*out, ctx, kr__fail(ctx, KR_EINVAL, "kr_verify needs a context, problem, "
                                              "program and plan"));
    kr__clear_error(ctx);
    vstate v;
    memset(&v, 0, sizeof v);
    v.ctx = ctx;
    v.p = problem;
    v.report = *out;
    kr_verify_options d = KR_VERIFY_OPTIONS_INIT;
    v.o = opts ? *opts : d;
    if (v.o.version == 0 || v.o.version > KR_VERIFY_OPTIONS_VERSION)
        return not_judged(*out, ctx, kr__fail(ctx, KR_EVERSION, "kr_verify_options version %u "
                                              "is newer than this library", v.o.version));
    v.o.seeds_per_case = v.o.seeds_per_case ? v.o.seeds_per_case : 2;
    v.o.timeout_s = v.o.timeout_s > 0 ? v.o.timeout_s : 10;
    v.o.max_mismatches = v.o.max_mismatches ? v.o.max_mismatches : 5;
    uint64_t seed = v.o.seed ? v.o.seed : fresh_seed();
    v.key = fresh_seed();
    int rc = setup(&v, cand, plan);
    if (rc == KR_EPLAN) {
        kr_report_set_verdict(*out, KR_VERDICT_INVALID_PLAN);
        kr_report_set_text(*out, "message", kr_context_errmsg(ctx));
        kr_report_set_text(*out, "feedback", kr_context_errmsg(ctx));
        kr_report_set(*out, "correct", 0);
        teardown(&v);
        return KR_OK;
    }
    if (rc != KR_OK) {
        teardown(&v);
        return not_judged(*out, ctx, rc);
    }
    json_t *sec = kr__report_section(*out, "verify");
    char seed_text[32];
    snprintf(seed_text, sizeof seed_text, "0x%016llx", (unsigned long long)seed);
    json_object_set_new(sec, "seed", json_string(seed_text));
    json_object_set_new(sec, "seeds_per_case", json_integer(v.o.seeds_per_case));
    v.cases = json_array();
    json_object_set_new(sec, "checks", v.cases);
    for (size_t c = 0; c < problem->num_cases && rc == KR_OK && !ctx->poisoned; c++) {
        for (size_t s = 0; s < v.o.seeds_per_case && rc == KR_OK && !ctx->poisoned; s++) {
            vunit *u = calloc(1, sizeof *u);
            if (!u) {
                rc = kr__fail(ctx, KR_ENOMEM, "out of memory");
                break;
            }
            u->id = v.units + 1;
            u->c = c;
            u->s = s;
            u->seed = kr_problem_case_seed(seed + s * 0x632BE59BD9B4E019ull, c);
            u->passed = 1;
            u->json = json_object();
            json_object_set_new(u->json, "case", json_string(problem->cases[c].name));
            json_object_set_new(u->json, "seed_index", json_integer((json_int_t)s));
            json_object_set_new(u->json, "outputs", json_array());
            json_object_set_new(u->json, "problems", json_array());
            rc = verify_unit(&v, u);
            json_object_set_new(u->json, "passed", json_boolean(u->passed && rc == KR_OK));
            json_array_append_new(v.cases, u->json);
            v.units++;
            v.units_passed += u->passed && rc == KR_OK;
            if (!u->passed && c < 256)
                v.failed_cases[c] = 1;
            free_unit(&v, u);
            free(u);
        }
    }
    if (rc != KR_OK) {
        teardown(&v);
        return not_judged(*out, ctx, rc);
    }
    summarize(&v);
    teardown(&v);
    return KR_OK;
}

int kr__reference_case_outputs(kr_context *ctx, const kr_problem *p, size_t c, uint64_t seed,
                               void **host)
{
    vstate v;
    memset(&v, 0, sizeof v);
    v.ctx = ctx;
    v.p = p;
    kr_verify_options d = KR_VERIFY_OPTIONS_INIT;
    v.o = d;
    v.o.timeout_s = 10;
    v.key = fresh_seed();
    vunit *u = calloc(1, sizeof *u);
    if (!u)
        return kr__fail(ctx, KR_ENOMEM, "out of memory");
    u->c = c;
    u->seed = seed;
    u->passed = 1;
    int rc = setup_reference(&v);
    if (rc == KR_OK)
        rc = inputs_and_hashes(&v, u);
    if (rc == KR_OK)
        rc = v.has_ref ? reference_outputs(&v, u) : golden_outputs(&v, u);
    for (size_t t = 0; t < p->num_tensors; t++) {
        host[t] = NULL;
        if (rc != KR_OK || !is_output(&p->tensors[t]))
            continue;
        if (!(host[t] = malloc(p->cases[c].bytes[t])))
            rc = kr__fail(ctx, KR_ENOMEM, "out of host memory");
        else
            memcpy(host[t], u->host_want[t], p->cases[c].bytes[t]);
    }
    free_unit(&v, u);
    free(u);
    teardown(&v);
    return rc;
}
