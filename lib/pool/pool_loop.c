/* The pool's thread: hands queued jobs to idle workers, reads their
 * results, answers golden requests with the caller's callback, kills
 * workers past a job's deadline, and replaces dead workers (a GPU worker by
 * its warm spare, which is then started again). Every job ends with exactly
 * one report: its worker's, or the pool's own verdict when the worker could
 * not give one. */
#include "pool/pool_impl.h"
#include "common/clock.h"
#include "pool/job.h"
#include "problem/problem_impl.h"
#include "report/report_impl.h"

#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/sockios.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define RECV_TIMEOUT_S 30   /* a frame that has begun arrives in this time */
#define MAX_START_FAILURES 5

void kr__pool_wake(kr_pool *pool)
{
    char c = 1;
    if (write(pool->wake[1], &c, 1) < 0 && errno != EAGAIN) { /* full: it is awake anyway */
    }
}

static kr_report *copy_report(const kr_report *r)
{
    char *text = NULL, why[128];
    kr_report *copy = NULL;
    if (kr_report_json(&text, r) == KR_OK)
        kr__report_from_json(&copy, text, strlen(text), why, sizeof why);
    kr_free(text);
    return copy;
}

/* A report the pool writes itself (a worker died, a deadline passed, the
 * job was refused): the verdict and why, as message and feedback. */
kr_report *kr__pool_report(int verdict, const char *fmt, ...)
{
    kr_report *r = NULL;
    if (kr_report_new(&r) != KR_OK)
        return NULL;
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    kr_report_set_verdict(r, verdict);
    kr_report_set_text(r, "message", msg);
    if (verdict != KR_VERDICT_ERROR && verdict != KR_VERDICT_NOT_RUN) {
        kr_report_set_text(r, "feedback", msg);
        kr_report_set(r, "correct", 0);
    }
    return r;
}

void kr__pool_finish(kr_pool *pool, kr__pjob *j, kr_report *r)
{
    if (!r && j->same_as) /* a duplicate: the original's report, copied */
        r = j->same_as->report ? copy_report(j->same_as->report) : NULL;
    if (!r)
        r = kr__pool_report(KR_VERDICT_ERROR, "out of memory for the report");
    j->report = r;
    j->state = KR__JOB_DONE;
    pool->finished++;
    for (size_t i = 0; i < pool->num_jobs; i++) {
        kr__pjob *d = pool->jobs[i];
        if (d && d->same_as == j && d->state != KR__JOB_DONE && d->state != KR__JOB_COLLECTED)
            kr__pool_finish(pool, d, NULL);
    }
    pthread_cond_broadcast(&pool->done);
}

/* ---- sending jobs ---- */

static kr__pjob *next_job(kr_pool *pool, int state)
{
    for (size_t i = 0; i < pool->num_jobs; i++) {
        kr__pjob *j = pool->jobs[i];
        if (j && !j->same_as && j->state == state)
            return j;
    }
    return NULL;
}

/* A GPU worker takes the first queued job, unless a job of the problem it
 * ran last waits among the next AFFINITY_WINDOW: there its buffers (the
 * engine's spares, sized for that problem), reference, fast reference
 * check and baseline samples are still warm, where a batch interleaving
 * eight problems had it allocate and free gigabytes per candidate (issue
 * 34). The first job is passed over at most AFFINITY_MAX_PASSES times, so
 * a stream of one problem cannot starve another. Reports still come in
 * submission order. $KR_POOL_AFFINITY=0 (read at kr_pool_new) turns it
 * off, to measure it. */
#define AFFINITY_WINDOW 64
#define AFFINITY_MAX_PASSES 16

static kr__pjob *next_job_for(kr_pool *pool, int state, const kr__worker *w)
{
    kr__pjob *first = next_job(pool, state);
    if (!first || pool->no_affinity || w->kind != KR__GPU_WORKER || !w->last_problem[0] ||
        first->passed_over >= AFFINITY_MAX_PASSES)
        return first;
    const char *hash = kr_problem_hash(first->job.problem);
    if (hash && strcmp(hash, w->last_problem) == 0)
        return first;
    size_t seen = 0;
    for (size_t i = 0; i < pool->num_jobs && seen < AFFINITY_WINDOW; i++) {
        kr__pjob *j = pool->jobs[i];
        if (!j || j->same_as || j->state != state)
            continue;
        seen++;
        hash = kr_problem_hash(j->job.problem);
        if (j != first && hash && strcmp(hash, w->last_problem) == 0) {
            first->passed_over++;
            return j;
        }
    }
    return first;
}

/* The soundness of a problem as far as the pool knows: -1 unknown. Golden
 * problems are not remembered: their hash does not cover the callback, so
 * two of them with one spec may differ. */
static int sound_known(const kr_pool *pool, const kr_problem *p)
{
    const char *hash = kr_problem_hash(p);
    if (!hash || kr_problem_reference_kind(p) == KR_REFERENCE_GOLDEN)
        return -1;
    for (size_t i = 0; i < pool->num_sound; i++)
        if (strcmp(pool->sound[i].hash, hash) == 0)
            return pool->sound[i].weak;
    return -1;
}

/* A GPU worker's result says the problem's soundness when its check
 * completed ("problem_weak"); nothing is learnt otherwise (a report without
 * the weak flag may only mean the check could not run). */
static void sound_learn(kr_pool *pool, const kr__pjob *j, const json_t *result)
{
    const json_t *weak = json_object_get(result, "problem_weak");
    const kr_problem *p = j->job.problem;
    if (!json_is_integer(weak) || kr_problem_reference_kind(p) == KR_REFERENCE_GOLDEN ||
        sound_known(pool, p) >= 0)
        return;
    struct kr__sound_note *grown = realloc(pool->sound, (pool->num_sound + 1) * sizeof *grown);
    if (!grown)
        return;
    pool->sound = grown;
    snprintf(grown[pool->num_sound].hash, sizeof grown->hash, "%s", kr_problem_hash(p));
    grown[pool->num_sound++].weak = json_integer_value(weak) != 0;
}

static int send_job(kr_pool *pool, kr__worker *w, kr__pjob *j, size_t max_len)
{
    const char *stage = w->kind == KR__COMPILE_WORKER ? "compile" : "gpu";
    json_t *body = kr__job_encode(&j->job, j->plan_json, j->ticket, stage, j->binary != NULL);
    int weak = w->kind == KR__GPU_WORKER ? sound_known(pool, j->job.problem) : -1;
    if (body && weak >= 0)
        json_object_set_new(body, "problem_weak", json_integer(weak));
    int fd = -1, rc = body ? KR_OK : KR_ENOMEM;
    char why[256];
    if (rc == KR_OK && j->binary)
        rc = kr__blob_create("kreward-binary", j->binary, j->job.binary_len, &fd, why, sizeof why);
    if (rc == KR_OK)
        rc = kr__frame_send_capped(w->sock, KR__MSG_JOB, body, fd >= 0 ? &fd : NULL, fd >= 0,
                                   max_len, why, sizeof why);
    if (fd >= 0)
        close(fd);
    json_decref(body);
    return rc;
}

/* Workers of a kind that can still serve: alive, or dead and about to be
 * started again (the pool stops trying after MAX_START_FAILURES). */
int kr__pool_workers_alive(const kr_pool *pool, int kind)
{
    for (size_t i = 0; i < pool->num_workers; i++)
        if (pool->workers[i].kind == kind && !pool->workers[i].given_up)
            return 1;
    return 0;
}

/* Jobs waiting in `queued` for workers that can no longer be started get a
 * loud error, never a silent score. */
static void fail_queued(kr_pool *pool, int queued, const char *kind)
{
    kr__pjob *j;
    while ((j = next_job(pool, queued)))
        kr__pool_finish(pool, j, kr__pool_report(KR_VERDICT_ERROR, "no %s worker can be started "
                                                 "any more (%s)", kind, pool->last_start_error));
}

/* A busy GPU worker is sent its next job while it runs the one it has: it
 * reads it the moment its result is out, where it used to wait for the
 * pool's thread to take the result in, pick and encode the next job, and
 * for its problem, program and plan to arrive (the GPU idle meanwhile).
 * A job sent ahead cannot be taken back: behind a slow or hung job it
 * waits while other GPU workers may run out of work. So one goes only
 * while, after it, the queue still holds two jobs for every other busy GPU
 * worker without one ahead (one GPU: always; at a batch's tail the last
 * jobs go to whichever worker is free first). Only a frame under
 * AHEAD_MAX_FRAME goes, into a socket the worker has emptied (the pool's
 * thread must never wait on a busy worker), and never behind a job with
 * golden outputs, whose requests the worker answers on the same socket.
 * The job waits in the socket, not started: a worker that dies hands it
 * back to the queue with no attempt counted (spawn.c, kr__worker_kill). */
#define AHEAD_MAX_FRAME (64 * 1024)
#define AHEAD_RETRY_S 0.0005

/* The jobs waiting for a GPU worker (duplicates ride on their first). */
static size_t gpu_queued(const kr_pool *pool)
{
    size_t queued = 0;
    for (size_t i = 0; i < pool->num_jobs; i++) {
        const kr__pjob *j = pool->jobs[i];
        queued += j && !j->same_as && j->state == KR__JOB_GPU_QUEUED;
    }
    return queued;
}

/* Whether sending one of `queued` jobs ahead to w leaves two for every
 * other busy GPU worker that has none ahead. */
static int ahead_spares_the_others(const kr_pool *pool, const kr__worker *w, size_t queued)
{
    size_t wanting = 0;
    for (size_t i = 0; i < pool->num_workers; i++) {
        const kr__worker *o = &pool->workers[i];
        wanting += o != w && o->kind == KR__GPU_WORKER && o->state == KR__W_BUSY && !o->ahead;
    }
    return queued > 2 * wanting;
}

/* Whether the worker has read everything sent to it (unknown where the
 * kernel does not say: the frame cap alone then keeps a send from waiting,
 * two such frames being far under a socket's default buffer). */
static int socket_drained(int sock)
{
    int pending = 0;
    return ioctl(sock, SIOCOUTQ, &pending) != 0 || pending == 0;
}

/* 1 when a job went ahead to w. */
static int send_ahead(kr_pool *pool, kr__worker *w, size_t queued)
{
    if (pool->no_ahead || w->kind != KR__GPU_WORKER || w->state != KR__W_BUSY || !w->job ||
        w->ahead || w->write_closed ||
        kr_problem_reference_kind(w->job->job.problem) == KR_REFERENCE_GOLDEN ||
        !ahead_spares_the_others(pool, w, queued))
        return 0;
    if (!socket_drained(w->sock)) {
        pool->ahead_retry = 1; /* it reads its job in a moment: the thread looks again then */
        return 0;
    }
    kr__pjob *j = next_job_for(pool, KR__JOB_GPU_QUEUED, w);
    if (!j || j->not_ahead)
        return 0;
    int rc = send_job(pool, w, j, AHEAD_MAX_FRAME);
    if (rc == KR_ETOOBIG) {
        j->not_ahead = 1; /* it goes when a worker is idle; not encoded again for this */
        return 0;
    }
    if (rc == KR_EIO) {
        /* the worker may have answered and exited (a poisoned context):
         * its result is still to be read, and its running job is not to be
         * charged for this. Nothing more is sent to it (a frame may have
         * gone in part): it reads the end of its input once it answers,
         * and ends */
        shutdown(w->sock, SHUT_WR);
        w->write_closed = 1;
        return 0;
    }
    if (rc != KR_OK)
        return 0; /* the pool's own trouble (memory, descriptors): not the worker's; later */
    j->state = KR__JOB_RUNNING;
    if (kr_problem_hash(j->job.problem))
        snprintf(w->last_problem, sizeof w->last_problem, "%s", kr_problem_hash(j->job.problem));
    w->ahead = j;
    return 1;
}

static void dispatch(kr_pool *pool)
{
    int gpu_alive = kr__pool_workers_alive(pool, KR__GPU_WORKER);
    if (pool->num_gpus && !gpu_alive)
        fail_queued(pool, KR__JOB_GPU_QUEUED, "GPU");
    /* compile jobs are stranded only when neither kind is left */
    if (!gpu_alive && !kr__pool_workers_alive(pool, KR__COMPILE_WORKER))
        fail_queued(pool, KR__JOB_COMPILE_QUEUED, "compile");
    for (size_t i = 0; i < pool->num_workers; i++) {
        kr__worker *w = &pool->workers[i];
        if (w->state != KR__W_IDLE)
            continue;
        int queued = w->kind == KR__COMPILE_WORKER ? KR__JOB_COMPILE_QUEUED : KR__JOB_GPU_QUEUED;
        kr__pjob *j = next_job_for(pool, queued, w);
        /* GPU workers compile too, but only when no compile worker is left:
         * compile workers hold the limits a template bomb dies at */
        if (!j && w->kind == KR__GPU_WORKER && !kr__pool_workers_alive(pool, KR__COMPILE_WORKER))
            j = next_job(pool, KR__JOB_COMPILE_QUEUED);
        if (!j)
            continue;
        if (send_job(pool, w, j, SIZE_MAX) != KR_OK) {
            kr__worker_kill(w); /* the job stays queued; the worker is replaced */
            continue;
        }
        j->state = w->kind == KR__COMPILE_WORKER ? KR__JOB_COMPILING : KR__JOB_RUNNING;
        if (w->kind == KR__GPU_WORKER && kr_problem_hash(j->job.problem))
            snprintf(w->last_problem, sizeof w->last_problem, "%s", kr_problem_hash(j->job.problem));
        w->job = j;
        w->state = KR__W_BUSY;
        w->deadline = kr__now() + (w->kind == KR__COMPILE_WORKER ? pool->o.compile_timeout_s
                                                                 : pool->o.job_timeout_s);
    }
    /* after every idle worker had its pick */
    pool->ahead_retry = 0;
    size_t queued = pool->no_ahead ? 0 : gpu_queued(pool);
    for (size_t i = 0; i < pool->num_workers && queued; i++)
        queued -= (size_t)send_ahead(pool, &pool->workers[i], queued);
}

/* ---- what workers say ---- */

static void on_death(kr_pool *pool, kr__worker *w, const char *what);

static void take_result(kr_pool *pool, kr__worker *w, kr__frame *f)
{
    kr__pjob *j = w->job;
    if (!j || (uint64_t)json_integer_value(json_object_get(f->body, "id")) != j->ticket) {
        /* a result for a job it does not have: the worker is not to be
         * believed; its job counts an attempt as if the worker had died, so
         * a candidate that makes every worker lie ends with a verdict */
        on_death(pool, w, "answered for a job it was not given");
        return;
    }
    w->job = NULL;
    w->state = KR__W_IDLE;
    const char *text = json_string_value(json_object_get(f->body, "report"));
    size_t len = text ? strlen(text) : 0;
    const void *blob = NULL;
    if (!text && f->num_fds &&
        kr__blob_map(f->fds[0], SIZE_MAX, &blob, &len, (char[128]){0}, 128) == KR_OK)
        text = blob;
    kr_report *r = NULL;
    char why[256] = "no report";
    if (text)
        kr__report_from_json(&r, text, len, why, sizeof why);
    if (blob)
        kr__blob_unmap(blob, len);
    if (!r) {
        kr__worker_kill(w);
        kr__pool_finish(pool, j, kr__pool_report(KR_VERDICT_ERROR, "the worker's report did not "
                                                 "parse: %s", why));
        return;
    }
    /* the compile stage found nothing wrong: the GPU stage takes it */
    if (w->kind == KR__COMPILE_WORKER && kr_report_verdict(r) == KR_VERDICT_NOT_RUN &&
        pool->num_gpus) {
        kr_report_free(r);
        j->state = KR__JOB_GPU_QUEUED;
        return;
    }
    if (w->kind == KR__GPU_WORKER)
        sound_learn(pool, j, f->body);
    /* a pool that only compiles: its compile worker's context has no device
     * by design; the report says why the pool has none */
    if (w->kind == KR__COMPILE_WORKER && kr_report_verdict(r) == KR_VERDICT_NOT_RUN &&
        !pool->num_gpus && pool->no_gpu_why[0]) {
        char msg[512];
        snprintf(msg, sizeof msg, "compiled and checked; verification and timing need an "
                 "NVIDIA GPU (%s)", pool->no_gpu_why);
        kr_report_set_text(r, "message", msg);
        if (kr_report_text(r, "feedback"))
            kr_report_set_text(r, "feedback", msg);
    }
    kr__pool_finish(pool, j, r);
    if (json_is_true(json_object_get(f->body, "poisoned")))
        kr__worker_kill(w); /* it exits anyway: its CUDA context is gone */
}

/* A result taken in, the job sent ahead is the one running (the worker
 * read it as soon as the result was out): its deadline counts from now. A
 * worker killed over the result gave it back to the queue already. */
static void on_result(kr_pool *pool, kr__worker *w, kr__frame *f)
{
    take_result(pool, w, f);
    if (w->state != KR__W_IDLE || !w->ahead)
        return;
    w->job = w->ahead;
    w->ahead = NULL;
    w->state = KR__W_BUSY;
    w->deadline = kr__now() + pool->o.job_timeout_s;
}

/* The caller's golden callback on the inputs the worker generated; the
 * outputs go back as one blob per tensor. Runs without the lock: the
 * callback is the caller's code. */
static void on_golden(kr_pool *pool, kr__worker *w, kr__frame *f)
{
    kr__pjob *j = w->job;
    const kr_problem *p = j ? j->job.problem : NULL;
    size_t c = (size_t)json_integer_value(json_object_get(f->body, "case"));
    uint64_t seed = (uint64_t)json_integer_value(json_object_get(f->body, "seed"));
    char err[512] = "", why[256] = "";
    /* every tensor in one blob, in the problem's order, each of the size the
     * problem says for the case: anything else is not believed */
    int ok = p && p->golden && c < p->num_cases && f->num_fds == 1;
    void **host = ok ? calloc(p->num_tensors + 1, sizeof *host) : NULL;
    const void **parts = ok ? calloc(p->num_tensors + 1, sizeof *parts) : NULL;
    uint64_t *bytes = ok ? calloc(p->num_tensors + 1, sizeof *bytes) : NULL;
    ok = ok && host && parts && bytes;
    const void *data = NULL;
    size_t len = 0;
    if (ok) {
        memcpy(bytes, p->cases[c].bytes, p->num_tensors * sizeof *bytes);
        ok = kr__blob_map_parts(f->fds[0], bytes, p->num_tensors, &data, &len, parts, why,
                                sizeof why) == KR_OK;
    }
    for (size_t t = 0; ok && t < p->num_tensors; t++) {
        ok = (host[t] = malloc(bytes[t] ? (size_t)bytes[t] : 1)) != NULL;
        if (ok)
            memcpy(host[t], parts[t], (size_t)bytes[t]);
    }
    if (data)
        kr__blob_unmap(data, len);
    pthread_mutex_unlock(&pool->lock);
    if (ok) {
        kr_golden_request req = {KR_GOLDEN_REQUEST_VERSION, (uint32_t)c, seed, p->num_tensors,
                                 host, bytes, p->cases[c].dims, err, sizeof err};
        ok = p->golden(p->golden_user, &req) == 0;
    } else {
        snprintf(err, sizeof err, "%s%s%s", p && !p->golden ? "the problem has no golden callback"
                 : "a malformed golden request", why[0] ? ": " : "", why);
    }
    json_t *body = json_object();
    json_object_set_new(body, "id", json_integer(j ? (json_int_t)j->ticket : 0));
    json_object_set_new(body, "status", json_integer(ok ? 0 : 1));
    if (!ok)
        json_object_set_new(body, "message", json_string(err[0] ? err : "the golden callback failed"));
    int fd = -1;
    if (ok && kr__blob_create_parts("kreward-golden", (const void *const *)host, bytes,
                                    p->num_tensors, &fd, why, sizeof why) != KR_OK) {
        json_object_set_new(body, "status", json_integer(1));
        json_object_set_new(body, "message", json_string(why));
    }
    kr__frame_send(w->sock, KR__MSG_GOLDEN_REPLY, body, fd >= 0 ? &fd : NULL, fd >= 0, why,
                   sizeof why);
    if (fd >= 0)
        close(fd);
    json_decref(body);
    for (size_t t = 0; host && p && t < p->num_tensors; t++)
        free(host[t]);
    free(host);
    free(parts);
    free(bytes);
    pthread_mutex_lock(&pool->lock);
}

/* The worker is gone without a result (a crash, a protocol error, a kill):
 * its job is tried again elsewhere, up to max_attempts; a compile stage
 * that killed its worker (memory or CPU limit) is the candidate's. */
static void on_death(kr_pool *pool, kr__worker *w, const char *what)
{
    int status = 0;
    pid_t pid = w->pid;
    if (pid > 0 && waitpid(pid, &status, WNOHANG) == pid)
        w->pid = 0;
    if (w->state == KR__W_STARTING) {
        w->failures++;
        snprintf(pool->last_start_error, sizeof pool->last_start_error, "a worker %s while "
                 "starting", what);
    }
    kr__pjob *j = w->job;
    kr__worker_kill(w);
    if (!j)
        return;
    char how[96] = "";
    if (WIFSIGNALED(status))
        snprintf(how, sizeof how, " (signal %d)", WTERMSIG(status));
    if (w->kind == KR__COMPILE_WORKER) {
        kr__pool_finish(pool, j, kr__pool_report(KR_VERDICT_COMPILE_ERROR, "the compile worker "
                                                 "%s%s while compiling this source (limits: "
                                                 "%.0f s, %.1f GB)", what, how,
                                                 pool->o.compile_timeout_s,
                                                 (double)pool->o.compile_memory_bytes / 1e9));
        return;
    }
    if (++j->attempts < (int)pool->o.max_attempts) {
        pool->retries++;
        j->state = KR__JOB_GPU_QUEUED;
        return;
    }
    kr__pool_finish(pool, j, kr__pool_report(KR_VERDICT_FAULT, "the worker died %d times while "
                                             "evaluating it (last: %s%s)", j->attempts, what, how));
}

static void on_readable(kr_pool *pool, kr__worker *w)
{
    kr__frame f;
    char why[256];
    int rc = kr__frame_recv(w->sock, &f, RECV_TIMEOUT_S, why, sizeof why);
    if (rc != KR_OK) {
        on_death(pool, w, rc == KR_EIO ? "ended" : "sent a malformed frame");
        return;
    }
    if (w->state == KR__W_STARTING && f.type == KR__MSG_HELLO) {
        if (json_is_true(json_object_get(f.body, "ready"))) {
            double waited = kr__now() - w->started;
            w->failures = 0;
            w->state = w->spare ? KR__W_SPARE : KR__W_IDLE;
            pool->respawn_wait_total += waited;
            pool->respawn_waits[pool->respawn_waits_head++ % KR__RESPAWN_WAITS] = waited;
            pool->respawn_wait_max = waited > pool->respawn_wait_max ? waited : pool->respawn_wait_max;
        } else {
            const char *m = json_string_value(json_object_get(f.body, "why"));
            snprintf(pool->last_start_error, sizeof pool->last_start_error, "%s",
                     m ? m : "the worker was not ready");
            w->failures++;
            kr__worker_kill(w);
        }
    } else if (w->state == KR__W_BUSY && f.type == KR__MSG_RESULT) {
        on_result(pool, w, &f);
    } else if (w->state == KR__W_BUSY && f.type == KR__MSG_GOLDEN) {
        on_golden(pool, w, &f);
    } else {
        on_death(pool, w, "said something out of turn");
    }
    kr__frame_clear(&f);
}

/* ---- deadlines and replacements ---- */

static void deadlines(kr_pool *pool)
{
    double now = kr__now();
    for (size_t i = 0; i < pool->num_workers; i++) {
        kr__worker *w = &pool->workers[i];
        if (w->state != KR__W_BUSY || now < w->deadline)
            continue;
        kr__pjob *j = w->job;
        kr__worker_kill(w);
        pool->timeouts++;
        if (w->kind == KR__COMPILE_WORKER)
            kr__pool_finish(pool, j, kr__pool_report(KR_VERDICT_COMPILE_ERROR, "the compile did "
                                                     "not finish within %.0f s",
                                                     pool->o.compile_timeout_s));
        else
            kr__pool_finish(pool, j, kr__pool_report(KR_VERDICT_TIMEOUT, "the evaluation did not "
                                                     "finish within %.0f s (the job's deadline): a "
                                                     "hang", pool->o.job_timeout_s));
    }
}

/* A dead GPU worker is replaced by its device's warm spare, and a new spare
 * is started; dead compile workers are started again. */
static void replace(kr_pool *pool)
{
    char why[256];
    for (size_t i = 0; i < pool->num_workers; i++) {
        kr__worker *w = &pool->workers[i];
        if (w->state != KR__W_DEAD || pool->stopping || w->given_up)
            continue;
        if (w->failures >= MAX_START_FAILURES) {
            w->given_up = 1; /* it cannot start: stop trying (dispatch fails what waits for it) */
            continue;
        }
        for (size_t k = 0; k < pool->num_workers && w->kind == KR__GPU_WORKER && !w->spare; k++) {
            kr__worker *s = &pool->workers[k];
            if (s->spare && s->device == w->device && s->state == KR__W_SPARE) {
                s->spare = 0;            /* the spare takes over at once */
                s->state = KR__W_IDLE;
                w->spare = 1;            /* and this slot becomes the new spare */
                break;
            }
        }
        pool->respawns++;
        if (kr__worker_spawn(pool, w, why, sizeof why) != KR_OK) {
            w->state = KR__W_DEAD;
            w->failures++;
            snprintf(pool->last_start_error, sizeof pool->last_start_error, "%s", why);
        }
    }
}

void *kr__pool_thread(void *arg)
{
    kr_pool *pool = arg;
    int started = pool->start(pool, pool->start_why, sizeof pool->start_why);
    pthread_mutex_lock(&pool->lock);
    pool->start_rc = started;
    pool->start_done = 1;
    pthread_cond_broadcast(&pool->done);
    pthread_mutex_unlock(&pool->lock);
    if (started != KR_OK)
        return NULL;
    struct pollfd *fds = calloc(pool->num_workers + 1, sizeof *fds);
    kr__worker **owner = calloc(pool->num_workers + 1, sizeof *owner);
    if (!fds || !owner)
        return NULL;
    pthread_mutex_lock(&pool->lock);
    while (!pool->stopping) {
        replace(pool);
        dispatch(pool);
        size_t n = 0;
        fds[n++] = (struct pollfd){pool->wake[0], POLLIN, 0};
        double next = kr__now() + 1.0;
        for (size_t i = 0; i < pool->num_workers; i++) {
            kr__worker *w = &pool->workers[i];
            if (w->sock < 0)
                continue;
            owner[n] = w;
            fds[n++] = (struct pollfd){w->sock, POLLIN, 0};
            if (w->state == KR__W_BUSY && w->deadline < next)
                next = w->deadline;
        }
        if (pool->ahead_retry && kr__now() + AHEAD_RETRY_S < next)
            next = kr__now() + AHEAD_RETRY_S;
        pthread_mutex_unlock(&pool->lock);
        double wait = next - kr__now();
        int ready = poll(fds, n, wait > 0 ? (int)(wait * 1000) + 1 : 0);
        char drain[64];
        if (ready > 0 && (fds[0].revents & POLLIN))
            while (read(pool->wake[0], drain, sizeof drain) > 0)
                ;
        pthread_mutex_lock(&pool->lock);
        for (size_t i = 1; ready > 0 && i < n; i++)
            if (fds[i].revents && owner[i]->sock == fds[i].fd)
                on_readable(pool, owner[i]);
        deadlines(pool);
    }
    pthread_mutex_unlock(&pool->lock);
    free(fds);
    free(owner);
    return NULL;
}
