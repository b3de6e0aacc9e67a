/* Reference and golden runs (reference.h). */
#include "run/reference.h"
#include "common/options.h"
#include "run/profile.h"
#include "kreward/plan.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int kr__reference_build(kr_context *ctx, const kr_problem *p, int fast, kr_program **prog,
                        kr_plan **plan)
{
    *prog = NULL;
    *plan = NULL;
    if (p->reference_kind != KR_REFERENCE_SOURCE)
        return kr__fail(ctx, KR_EINVAL, "%s: the reference is golden outputs, not source", p->name);
    const char *source = fast ? p->fast_source : p->reference_source;
    const char *name = fast ? p->fast_name : p->reference_name;
    const char *plan_json = fast ? p->fast_plan_json : p->reference_plan_json;
    if (!source)
        return kr__fail(ctx, KR_EINVAL, "%s: no fast reference", p->name);
    kr_compile_options o = KR_COMPILE_OPTIONS_INIT;
    o.name = name;
    int rc = kr_compile(prog, ctx, source, strlen(source), &o);
    if (rc != KR_OK)
        return rc;
    if (plan_json)
        rc = kr_plan_parse_json(plan, ctx, plan_json, strlen(plan_json), name);
    else
        rc = kr_plan_from_source(plan, ctx, source, strlen(source), name);
    if (rc == KR_OK)
        rc = kr_plan_check(ctx, *plan, p, *prog);
    if (rc != KR_OK) {
        kr_plan_free(*plan);
        kr_program_free(*prog);
        *plan = NULL;
        *prog = NULL;
    }
    return rc;
}

int kr_problem_check_reference(kr_context *ctx, const kr_problem *p)
{
    if (!ctx || !p)
        return KR_EINVAL;
    kr__clear_error(ctx);
    if (p->reference_kind == KR_REFERENCE_GOLDEN)
        return KR_OK;
    kr_program *prog;
    kr_plan *plan;
    int rc = kr__reference_build(ctx, p, 0, &prog, &plan);
    kr_plan_free(plan);
    kr_program_free(prog);
    if (rc != KR_OK || !p->fast_source)
        return rc;
    rc = kr__reference_build(ctx, p, 1, &prog, &plan);
    kr_plan_free(plan);
    kr_program_free(prog);
    if (rc != KR_OK) {
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", kr_context_errmsg(ctx));
        return kr__fail(ctx, rc, "reference.fast: %s", msg);
    }
    return KR_OK;
}

static int reference_open(kr_context *ctx, kr__reference *ref, const kr_problem *p);

int kr__reference_open(kr_context *ctx, kr__reference *ref, const kr_problem *p)
{
    double t0 = kr__now();
    int rc = reference_open(ctx, ref, p);
    kr__prof_add(ctx, KR__PROF_OPEN, t0);
    return rc;
}

static int reference_open(kr_context *ctx, kr__reference *ref, const kr_problem *p)
{
    memset(ref, 0, sizeof *ref);
    ref->p = p;
    ref->golden = p->reference_kind == KR_REFERENCE_GOLDEN;
    ref->runs = calloc(p->num_cases, sizeof *ref->runs);
    ref->inputs = calloc(p->num_cases, sizeof *ref->inputs);
    if (!ref->runs || !ref->inputs)
        return kr__fail(ctx, KR_ENOMEM, "out of memory");
    if (ref->golden)
        return p->golden ? KR_OK
                         : kr__fail(ctx, KR_ESTATE, "problem '%s' has a golden reference but no "
                                    "golden callback (kr_problem_set_golden)", p->name);
    /* compiled through the cache: the first evaluation of a problem pays for it */
    int rc = kr__reference_build(ctx, p, 0, &ref->program, &ref->plan);
    if (rc == KR_OK) {
        rc = kr__plan_bind(ctx, ref->plan, p, ref->program, &ref->bp);
        ref->bound = 1;
    }
    return rc;
}

void kr__reference_close(kr_context *ctx, kr__reference *ref)
{
    for (size_t c = 0; ref->p && c < ref->p->num_cases; c++) {
        if (ref->runs)
            kr__run_free(ctx, &ref->runs[c]);
        if (ref->fast_runs)
            kr__run_free(ctx, &ref->fast_runs[c]);
        if (ref->inputs)
            kr__tset_free(ctx, &ref->inputs[c]);
    }
    free(ref->runs);
    free(ref->fast_runs);
    free(ref->inputs);
    if (ref->bound)
        kr__plan_unbind(&ref->bp);
    if (ref->fast_bound)
        kr__plan_unbind(&ref->fast_bp);
    kr_plan_free(ref->plan);
    kr_program_free(ref->program);
    kr_plan_free(ref->fast_plan);
    kr_program_free(ref->fast_program);
    memset(ref, 0, sizeof *ref);
}

/* The case's input set (and, for source references, the run of the
 * kernel that serves: the fast one or the reference), made on first use
 * and kept for the evaluation. */
static int case_state(kr_context *ctx, kr__reference *ref, size_t c, int fast)
{
    int rc = KR_OK;
    if (!ref->inputs[c].buf)
        rc = kr__tset_alloc(ctx, &ref->inputs[c], ref->p, c, KR__SET_INPUTS, "reference input");
    if (rc == KR_OK && !ref->golden && !fast && !ref->runs[c].bp)
        rc = kr__run_prepare(ctx, &ref->runs[c], &ref->bp, c);
    if (rc == KR_OK && fast && !ref->fast_runs[c].bp)
        rc = kr__run_prepare(ctx, &ref->fast_runs[c], &ref->fast_bp, c);
    return rc;
}

static int reference_failed(kr_context *ctx, const kr_problem *p, size_t c, int fast, int rc)
{
    char msg[1200];
    snprintf(msg, sizeof msg, "the %s failed in case '%s': %s",
             fast ? "fast reference (reference.fast)" : "reference", p->cases[c].name,
             kr_context_errmsg(ctx));
    rc = rc == KR_EFAULT || rc == KR_ETIMEOUT ? rc : KR_ECUDA;
    return kr__fail(ctx, rc, "%s", msg);
}

/* Intermediate values in scratch, the inputs and whatever the kernel left
 * in its module's globals are not left behind. */
static int scrub_after(kr_context *ctx, kr__reference *ref, size_t c, kr__run *run)
{
    int rc = kr__tset_scrub(ctx, &ref->inputs[c]);
    for (size_t i = 0; i < run->num_scratch && rc == KR_OK; i++)
        rc = kr__dbuf_scrub(ctx, &run->scratch[i]);
    if (rc == KR_OK && run->bp)
        rc = kr__program_restore_globals(ctx, run->bp->program, kr__engine_of(ctx)->stream);
    return rc;
}

/* h's hashes of the freshly generated inputs in, before anything reads them. */
static int hash_inputs(kr_context *ctx, const kr__tset *in, const kr__input_hashes *h)
{
    int rc = KR_OK;
    for (size_t t = 0; h && t < in->p->num_tensors && rc == KR_OK; t++)
        if (in->buf[t].base && in->p->tensors[t].role == KR_ROLE_IN)
            rc = kr__check_hash(ctx, &in->buf[t], h->key, &h->ids[t]);
    return rc;
}

/* An event pair for timing a launch (both or neither: without them the
 * launch is not timed, which is no failure of the reference). */
static void launch_events(CUevent ev[2])
{
    const kr__cuda_api *cu = kr__cuda();
    if (cu->cuEventCreate(&ev[0], CU_EVENT_DEFAULT) == CUDA_SUCCESS &&
        cu->cuEventCreate(&ev[1], CU_EVENT_DEFAULT) == CUDA_SUCCESS)
        return;
    if (ev[0])
        cu->cuEventDestroy(ev[0]);
    ev[0] = ev[1] = NULL;
}

/* One run of the reference (or its fast kernel) for (c, seed) into want,
 * its inputs and scratch scrubbed behind it. wait 0: queued only, for a
 * caller that queues its comparison behind it and waits for both
 * (kr__reference_fetch_checks): one round trip a comparison less; a
 * launch refused still fails here, a fault or hang at that wait is the
 * library's (the candidate's calls were waited for before). An event-timed
 * run (time_launch) always waits. */
static int run_source(kr_context *ctx, kr__reference *ref, size_t c, uint64_t seed,
                      const kr__tset *want, int fast, const kr__input_hashes *h, int wait)
{
    kr__run *run = fast ? &ref->fast_runs[c] : &ref->runs[c];
    size_t failed;
    int rc = kr__tset_fill_inputs(ctx, &ref->inputs[c], seed);
    if (rc == KR_OK)
        rc = hash_inputs(ctx, &ref->inputs[c], h);
    if (rc == KR_OK)
        rc = kr__tset_fill_outputs(ctx, want, seed, 0);
    if (rc == KR_OK)
        rc = kr__run_reset(ctx, run);
    CUevent ev[2] = {NULL, NULL};
    if (rc == KR_OK && ref->time_launch)
        launch_events(ev);
    if (rc == KR_OK) {
        kr__engine *e = kr__engine_of(ctx);
        kr__run_bind(run, &ref->inputs[c], want);
        int slot = kr__gpu_begin(e, KR__GPU_REFERENCE);
        if (ev[0])
            kr__cuda()->cuEventRecord(ev[0], e->stream);
        rc = kr__run_launch(ctx, run, &failed);
        if (ev[1])
            kr__cuda()->cuEventRecord(ev[1], e->stream);
        kr__gpu_end(e, slot);
    }
    if (rc == KR_OK && (wait || ev[0]))
        rc = kr__engine_wait(ctx, KR__REFERENCE_TIMEOUT_S, "the reference");
    float ms = 0;
    if (rc == KR_OK && ev[0] && kr__cuda()->cuEventElapsedTime(&ms, ev[0], ev[1]) == CUDA_SUCCESS)
        ref->last_launch_s = ms * 1e-3;
    for (int i = 0; i < 2; i++)
        if (ev[i] && !ctx->poisoned)
            kr__cuda()->cuEventDestroy(ev[i]);
    if (rc != KR_OK) {
        /* what it computed before it failed is not left behind either (a
         * failed fast kernel is dropped and the candidate runs next) */
        if (!ctx->poisoned)
            scrub_after(ctx, ref, c, run);
        return reference_failed(ctx, ref->p, c, fast, rc);
    }
    return scrub_after(ctx, ref, c, run);
}

/* Golden: the inputs are generated on the device (the same bits as on the
 * host, faster) and copied out for the callback. host[t] for every tensor. */
static int run_golden_host(kr_context *ctx, kr__reference *ref, size_t c, uint64_t seed,
                           void **host, const kr__input_hashes *h)
{
    const kr_problem *p = ref->p;
    const kr__cuda_api *cu = kr__cuda();
    kr__tset *in = &ref->inputs[c];
    uint64_t *bytes = calloc(p->num_tensors, sizeof *bytes);
    int rc = bytes ? kr__tset_fill_inputs(ctx, in, seed) : kr__fail(ctx, KR_ENOMEM, "out of memory");
    if (rc == KR_OK)
        rc = hash_inputs(ctx, in, h);
    if (rc == KR_OK)
        rc = kr__engine_wait(ctx, KR__REFERENCE_TIMEOUT_S, "generating golden inputs");
    for (size_t t = 0; t < p->num_tensors && rc == KR_OK; t++) {
        const kr__tensor *x = &p->tensors[t];
        bytes[t] = p->cases[c].bytes[t];
        if (!(host[t] = malloc(bytes[t] ? bytes[t] : 1)))
            rc = kr__fail(ctx, KR_ENOMEM, "out of host memory for golden outputs");
        else if (x->role == KR_ROLE_IN && cu->cuMemcpyDtoH(host[t], in->buf[t].ptr, bytes[t]) != CUDA_SUCCESS)
            rc = kr__fail(ctx, KR_ECUDA, "copying golden inputs");
        else if (x->role == KR_ROLE_INOUT)
            rc = kr_problem_generate_host(host[t], bytes[t], ctx, p, t, c, seed);
        else if (x->role == KR_ROLE_OUT)
            memset(host[t], 0, bytes[t]);
    }
    if (rc == KR_OK)
        rc = kr__tset_scrub(ctx, in);
    char err[512] = "";
    if (rc == KR_OK) {
        kr_golden_request req = {KR_GOLDEN_REQUEST_VERSION, (uint32_t)c, seed, p->num_tensors,
                                 host, bytes, p->cases[c].dims, err, sizeof err};
        if (p->golden(p->golden_user, &req) != 0)
            rc = kr__fail(ctx, KR_EPLUGIN, "the golden callback failed for case '%s': %s",
                          p->cases[c].name, err[0] ? err : "no message");
    }
    free(bytes);
    return rc;
}

static void free_host(const kr_problem *p, void **host)
{
    for (size_t t = 0; t < p->num_tensors; t++) {
        free(host[t]);
        host[t] = NULL;
    }
}

static int reference_run(kr_context *ctx, kr__reference *ref, size_t c, uint64_t seed,
                         const kr__tset *want, const kr__input_hashes *h, int wait);

/* Whether queued runs are waited for all the same: KR_REFERENCE_QUEUED=0,
 * to measure what queueing saves (read once). */
static int queued_runs_wait(void)
{
    static int wait = -1;
    if (wait < 0)
        wait = kr__knob_off("KR_REFERENCE_QUEUED");
    return wait;
}

int kr__reference_queue(kr_context *ctx, kr__reference *ref, size_t c, uint64_t seed,
                        const kr__tset *want, const kr__input_hashes *h)
{
    double t0 = kr__now();
    int rc = reference_run(ctx, ref, c, seed, want, h, queued_runs_wait());
    kr__prof_add(ctx, KR__PROF_REFERENCE, t0);
    return rc;
}

int kr__reference_fetch_checks(kr_context *ctx, const kr__reference *ref, size_t c)
{
    int rc = kr__checks_fetch_queued(ctx);
    if (rc == KR_OK)
        rc = kr__engine_wait(ctx, KR__REFERENCE_TIMEOUT_S + 30,
                             "the reference and the checks against it");
    if (rc == KR_OK)
        return rc;
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", kr_context_errmsg(ctx));
    return kr__fail(ctx, rc, "case '%s': %s", ref->p->cases[c].name, msg);
}

static int run_kernel(kr_context *ctx, kr__reference *ref, size_t c, uint64_t seed,
                      const kr__tset *want, int fast, int wait)
{
    double t0 = kr__now();
    int rc = case_state(ctx, ref, c, fast);
    if (rc == KR_OK)
        rc = run_source(ctx, ref, c, seed, want, fast, NULL, wait);
    kr__prof_add(ctx, KR__PROF_REFERENCE, t0);
    return rc;
}

int kr__reference_run_kernel(kr_context *ctx, kr__reference *ref, size_t c, uint64_t seed,
                             const kr__tset *want, int fast)
{
    return run_kernel(ctx, ref, c, seed, want, fast, 1);
}

int kr__reference_queue_kernel(kr_context *ctx, kr__reference *ref, size_t c, uint64_t seed,
                               const kr__tset *want, int fast)
{
    return run_kernel(ctx, ref, c, seed, want, fast, queued_runs_wait());
}

/* A trusted fast kernel that failed on case c while the context lives: not
 * used again, here or (unless it ran out of memory) in this context; the
 * reference serves. */
static void drop_fast(kr_context *ctx, kr__reference *ref, size_t c, int rc)
{
    char why[sizeof ref->fast_why];
    snprintf(why, sizeof why, "it failed in case '%s' after it had agreed: %s",
             ref->p->cases[c].name, kr_context_errmsg(ctx));
    kr__clear_error(ctx);
    if (rc != KR_ENOMEM) /* out of memory says nothing of the kernel: this evaluation only */
        kr__fast_memo_remember(kr__engine_of(ctx), ref->p->hash, 0, why);
    ref->use_fast = 0;
    snprintf(ref->fast_why, sizeof ref->fast_why, "%s", why);
}

/* want's outputs from the kernel that serves: the fast one while it is
 * trusted; one that fails on a later seed while the context lives is
 * dropped for the reference (fast_reference.c). */
static int run_serving(kr_context *ctx, kr__reference *ref, size_t c, uint64_t seed,
                       const kr__tset *want, const kr__input_hashes *h, int wait)
{
    if (ref->use_fast) {
        int rc = case_state(ctx, ref, c, 1);
        if (rc == KR_OK)
            rc = run_source(ctx, ref, c, seed, want, 1, h, wait);
        if (rc == KR_OK || ctx->poisoned)
            return rc;
        drop_fast(ctx, ref, c, rc);
    }
    int rc = case_state(ctx, ref, c, 0);
    return rc == KR_OK ? run_source(ctx, ref, c, seed, want, 0, h, wait) : rc;
}

/* Golden outputs are made on the host (the wait is inside), whatever wait
 * says. */
static int reference_run(kr_context *ctx, kr__reference *ref, size_t c, uint64_t seed,
                         const kr__tset *want, const kr__input_hashes *h, int wait)
{
    if (!ref->golden)
        return run_serving(ctx, ref, c, seed, want, h, wait);
    int rc = case_state(ctx, ref, c, 0);
    if (rc != KR_OK)
        return rc;
    const kr_problem *p = ref->p;
    void **host = calloc(p->num_tensors, sizeof *host);
    rc = host ? run_golden_host(ctx, ref, c, seed, host, h) : kr__fail(ctx, KR_ENOMEM, "out of memory");
    for (size_t t = 0; t < p->num_tensors && rc == KR_OK; t++) {
        if (!kr__is_output(&p->tensors[t]))
            continue;
        /* on the engine's stream: a synchronous copy goes on the legacy
         * stream, which the engine's non-blocking stream does not wait for,
         * and may return before it landed (pageable source) */
        CUresult r = kr__cuda()->cuMemcpyHtoDAsync(want->buf[t].ptr, host[t], want->buf[t].bytes,
                                                   kr__engine_of(ctx)->stream);
        if (r != CUDA_SUCCESS)
            rc = kr__cuda_fail(ctx, r, "uploading golden outputs");
    }
    if (host)
        free_host(p, host);
    free(host);
    return rc;
}

/* Copies want's outputs to malloc'd memory through the pinned staging
 * buffer, then scrubs both the device buffers and the staging. */
static int download(kr_context *ctx, const kr__tset *want, void **host)
{
    const kr_problem *p = want->p;
    size_t total = 0;
    for (size_t t = 0; t < p->num_tensors; t++)
        total += kr__is_output(&p->tensors[t]) ? want->buf[t].bytes : 0;
    void *stage = NULL;
    int rc = kr__engine_pinned(ctx, total ? total : 1, &stage);
    if (rc != KR_OK)
        return kr__fail(ctx, KR_ENOMEM, "the reference outputs need %.2f GB of pinned host memory",
                        (double)total / 1e9);
    size_t off = 0;
    for (size_t t = 0; t < p->num_tensors && rc == KR_OK; t++) {
        if (!kr__is_output(&p->tensors[t]))
            continue;
        CUresult r = kr__cuda()->cuMemcpyDtoHAsync((char *)stage + off, want->buf[t].ptr,
                                                   want->buf[t].bytes, kr__engine_of(ctx)->stream);
        if (r != CUDA_SUCCESS)
            rc = kr__cuda_fail(ctx, r, "copying reference outputs");
        off += want->buf[t].bytes;
    }
    if (rc == KR_OK)
        rc = kr__tset_scrub(ctx, want);
    if (rc == KR_OK)
        rc = kr__engine_wait(ctx, KR__REFERENCE_TIMEOUT_S, "copying reference outputs");
    off = 0;
    for (size_t t = 0; t < p->num_tensors && rc == KR_OK; t++) {
        if (!kr__is_output(&p->tensors[t]))
            continue;
        if (!(host[t] = malloc(want->buf[t].bytes ? want->buf[t].bytes : 1)))
            rc = kr__fail(ctx, KR_ENOMEM, "out of host memory for reference outputs");
        else
            memcpy(host[t], (char *)stage + off, want->buf[t].bytes);
        off += want->buf[t].bytes;
    }
    memset(stage, 0, total);
    return rc;
}

int kr__reference_outputs_host(kr_context *ctx, kr__reference *ref, size_t c, uint64_t seed,
                               void **host)
{
    const kr_problem *p = ref->p;
    memset(host, 0, p->num_tensors * sizeof *host);
    int rc = ref->golden ? case_state(ctx, ref, c, 0) : KR_OK; /* run_serving prepares its own */
    if (rc == KR_OK && ref->golden) {
        rc = run_golden_host(ctx, ref, c, seed, host, NULL);
        for (size_t t = 0; t < p->num_tensors; t++)
            if (!kr__is_output(&p->tensors[t])) {
                free(host[t]);
                host[t] = NULL;
            }
    } else if (rc == KR_OK) {
        kr__tset want;
        rc = kr__tset_alloc(ctx, &want, p, c, KR__SET_OUTPUTS, "reference output");
        if (rc == KR_OK)
            rc = run_serving(ctx, ref, c, seed, &want, NULL, 1);
        if (rc == KR_OK)
            rc = download(ctx, &want, host);
        kr__tset_free(ctx, &want);
    }
    if (rc != KR_OK)
        free_host(p, host);
    return rc;
}
