/* The pool's job table (pool_impl.h): kr_job_init, submitting (the job
 * copied, identical jobs sharing one evaluation), waiting, collecting in
 * order, batches, and the pool's status. */
#include "pool/pool_impl.h"
#include "common/clock.h"
#include "common/hash.h"
#include "common/options.h"
#include "common/stats.h"
#include "common/strbuf.h"
#include "compile/compile_impl.h"
#include "bench/bench.h"
#include "verify/verify.h"
#include "pool/job.h"
#include "reward/reward_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const kr_job job_defaults = KR_JOB_INIT;
static const size_t job_sizes[] = {0, KR__UPTO(kr_job, reward)};
static const kr__versioned job_version = {"kr_job", job_sizes, KR_JOB_VERSION, sizeof(kr_job)};

int kr_job_init(kr_job *job, uint32_t version)
{
    return kr__options_init(&job_version, job, &job_defaults, version);
}

/* ---- jobs ---- */

static int copy_job(kr__pjob *j, const kr_job *job, char *why, size_t why_size)
{
    int rc = kr__options_read(&job_version, &j->job, &job_defaults, job, why, why_size);
    if (rc == KR_OK && !j->job.problem)
        rc = KR_EINVAL, snprintf(why, why_size, "a job needs a problem");
    if (rc == KR_OK && !j->job.source && !(j->job.binary && j->job.binary_len && j->job.plan))
        rc = KR_EINVAL, snprintf(why, why_size, "a job needs a source, or a binary and its plan");
    if (rc == KR_OK)
        rc = kr__compile_options_read(NULL, &j->compile, j->job.compile);
    if (rc == KR_OK)
        rc = kr__verify_options_read(&j->verify, j->job.verify, why, why_size);
    if (rc == KR_OK)
        rc = kr__bench_options_read(&j->bench, j->job.bench, why, why_size);
    if (rc != KR_OK)
        return rc;
    /* the pool keeps its own copies: the caller may free its strings */
    if (j->job.source) {
        size_t len = j->job.len ? j->job.len : strlen(j->job.source);
        if (!(j->source = malloc(len + 1)))
            return KR_ENOMEM;
        memcpy(j->source, j->job.source, len);
        j->source[len] = '\0';
        j->job.source = j->source;
        j->job.len = len;
    }
    if (j->job.binary) {
        if (!(j->binary = malloc(j->job.binary_len)))
            return KR_ENOMEM;
        memcpy(j->binary, j->job.binary, j->job.binary_len);
        j->job.binary = j->binary;
    }
    if (j->job.plan && kr_plan_json(&j->plan_json, j->job.plan) != KR_OK)
        return KR_ENOMEM;
    j->name = j->job.name ? kr__strdup(j->job.name) : NULL;
    j->job.name = j->name;
    j->job.compile = &j->compile;
    j->job.verify = &j->verify;
    j->job.bench = &j->bench;
    return KR_OK;
}

/* Two jobs are the same evaluation when problem, candidate, plan and
 * options agree: the second shares the first's report. */
static void job_key(kr__pjob *j)
{
    json_t *o = kr__job_encode(&j->job, j->plan_json, 0, "", 0);
    char *text = o ? json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    kr__hasher h;
    kr__hash128 k = {0, 0};
    if (text && kr__hasher_init(&h) == 0) {
        kr__hasher_str(&h, text);
        kr__hasher_field(&h, j->binary, j->binary ? j->job.binary_len : 0);
        kr__hasher_str(&h, j->plan_json);
        k = kr__hasher_final(&h);
    }
    j->key[0] = k.hi;
    j->key[1] = k.lo;
    free(text);
    json_decref(o);
}

static kr__pjob *find_same(kr_pool *pool, const kr__pjob *j)
{
    for (size_t i = 0; i < pool->num_jobs; i++) {
        kr__pjob *o = pool->jobs[i];
        if (o && o != j && !o->same_as && o->state != KR__JOB_COLLECTED &&
            o->key[0] == j->key[0] && o->key[1] == j->key[1] && o->job.reward == j->job.reward &&
            o->job.problem == j->job.problem)
            return o;
    }
    return NULL;
}

static int append(kr_pool *pool, kr__pjob *j)
{
    if (pool->num_jobs == pool->cap_jobs) {
        size_t cap = pool->cap_jobs ? pool->cap_jobs * 2 : 64;
        kr__pjob **grown = realloc(pool->jobs, cap * sizeof *grown);
        if (!grown)
            return KR_ENOMEM;
        pool->jobs = grown;
        pool->cap_jobs = cap;
    }
    pool->jobs[pool->num_jobs++] = j;
    return KR_OK;
}

int kr_pool_submit(uint64_t *ticket, kr_pool *pool, const kr_job *job)
{
    if (!ticket || !pool || !job)
        return KR_EINVAL;
    kr__pjob *j = calloc(1, sizeof *j);
    char why[256] = "";
    int rc = j ? copy_job(j, job, why, sizeof why) : KR_ENOMEM;
    if (rc != KR_OK) {
        kr__pool_job_free(j);
        return rc;
    }
    job_key(j);
    pthread_mutex_lock(&pool->lock);
    j->ticket = pool->next_ticket;
    j->same_as = find_same(pool, j);
    if (j->same_as)
        pool->dedup_hits++;
    j->state = j->same_as ? j->same_as->state
             : j->source && kr__pool_workers_alive(pool, KR__COMPILE_WORKER) ? KR__JOB_COMPILE_QUEUED
             : pool->num_gpus ? KR__JOB_GPU_QUEUED : KR__JOB_COMPILE_QUEUED;
    rc = append(pool, j);
    if (rc == KR_OK) {
        *ticket = pool->next_ticket++;
        if (j->same_as && j->same_as->state == KR__JOB_DONE)
            kr__pool_finish(pool, j, NULL); /* copies the original's report */
    }
    pthread_mutex_unlock(&pool->lock);
    if (rc != KR_OK) {
        kr__pool_job_free(j);
        return rc;
    }
    kr__pool_wake(pool);
    return KR_OK;
}

static kr__pjob *find_ticket(kr_pool *pool, uint64_t ticket)
{
    for (size_t i = 0; i < pool->num_jobs; i++)
        if (pool->jobs[i] && pool->jobs[i]->ticket == ticket)
            return pool->jobs[i];
    return NULL;
}

/* Waits for a ticket's job to be done (lock held) and returns it in *out;
 * KR_ETIMEOUT at the deadline, KR_ENOTFOUND when there is no such job or
 * another thread collected it meanwhile. The job is looked up again after
 * every wake-up: a collector frees it, so no pointer is kept across a wait. */
static int wait_done(kr__pjob **out, kr_pool *pool, uint64_t ticket, double timeout_s)
{
    double deadline = kr__now() + timeout_s;
    kr__pjob *j;
    while ((j = find_ticket(pool, ticket)) && j->state != KR__JOB_DONE &&
           j->state != KR__JOB_COLLECTED) {
        if (timeout_s < 0) {
            pthread_cond_wait(&pool->done, &pool->lock);
            continue;
        }
        double left = deadline - kr__now();
        if (left <= 0)
            return KR_ETIMEOUT;
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        double t = (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9 + (left < 0.2 ? left : 0.2);
        ts.tv_sec = (time_t)t;
        ts.tv_nsec = (long)((t - (double)ts.tv_sec) * 1e9);
        pthread_cond_timedwait(&pool->done, &pool->lock, &ts);
    }
    *out = j;
    return j && j->state == KR__JOB_DONE ? KR_OK : KR_ENOTFOUND;
}

/* Hands a done job's report out (lock held), scored with the job's reward
 * here, in the collecting thread, which owns the reward. */
static kr_report *collect(kr_pool *pool, kr__pjob *j)
{
    kr_report *r = j->report;
    j->report = NULL;
    j->state = KR__JOB_COLLECTED;
    if (pool->next_collect == j->ticket)
        pool->next_collect++;
    kr_reward *reward = j->job.reward;
    int dup = j->same_as != NULL;
    for (size_t i = 0; i < pool->num_jobs; i++) /* free the slot; others may still point at it */
        if (pool->jobs[i] == j && !dup) {
            int referenced = 0;
            for (size_t k = 0; k < pool->num_jobs; k++)
                referenced |= pool->jobs[k] && pool->jobs[k]->same_as == j &&
                              pool->jobs[k]->state != KR__JOB_COLLECTED;
            if (!referenced) {
                pool->jobs[i] = NULL;
                kr__pool_job_free(j);
            }
        }
    pthread_mutex_unlock(&pool->lock);
    /* as kr_evaluate: a job that never ran (not_run) or that the library
     * failed (error) gets no reward; a score would teach the policy from
     * what was not the candidate's doing */
    int verdict = r ? kr_report_verdict(r) : KR_VERDICT_ERROR;
    if (r && reward && verdict != KR_VERDICT_NOT_RUN && verdict != KR_VERDICT_ERROR &&
        kr_reward_score(NULL, reward, r) != KR_OK)
        kr_report_set_text(r, "message", kr_context_errmsg(reward->ctx));
    pthread_mutex_lock(&pool->lock);
    return r;
}

int kr_pool_wait(kr_report **out, kr_pool *pool, uint64_t ticket, double timeout_s)
{
    if (!out || !pool)
        return KR_EINVAL;
    *out = NULL;
    pthread_mutex_lock(&pool->lock);
    kr__pjob *j = NULL;
    int rc = wait_done(&j, pool, ticket, timeout_s);
    if (rc == KR_OK)
        *out = collect(pool, j);
    pthread_mutex_unlock(&pool->lock);
    return rc == KR_OK && !*out ? KR_ENOMEM : rc;
}

int kr_pool_next(kr_report **out, uint64_t *ticket, kr_pool *pool, double timeout_s)
{
    if (!out || !ticket || !pool)
        return KR_EINVAL;
    *out = NULL;
    pthread_mutex_lock(&pool->lock);
    kr__pjob *j = NULL;
    while (pool->next_collect < pool->next_ticket) {
        j = find_ticket(pool, pool->next_collect);
        if (j && j->state != KR__JOB_COLLECTED)
            break;
        pool->next_collect++;
        j = NULL;
    }
    int rc = j ? wait_done(&j, pool, j->ticket, timeout_s) : KR_ENOTFOUND;
    if (rc == KR_OK) {
        *ticket = j->ticket;
        *out = collect(pool, j);
    }
    pthread_mutex_unlock(&pool->lock);
    return rc;
}

int kr_evaluate_batch(kr_report **reports, kr_pool *pool, const kr_job *jobs, size_t n)
{
    if (!reports || !pool || (!jobs && n))
        return KR_EINVAL;
    uint64_t *tickets = calloc(n ? n : 1, sizeof *tickets);
    if (!tickets)
        return KR_ENOMEM;
    int rc = KR_OK;
    for (size_t i = 0; i < n; i++) {
        reports[i] = NULL;
        int s = kr_pool_submit(&tickets[i], pool, &jobs[i]);
        if (s != KR_OK) { /* a job the pool cannot take still gets its report */
            reports[i] = kr__pool_report(KR_VERDICT_ERROR, "the job was refused: %s",
                                         kr_strerror(s));
            tickets[i] = 0;
        }
    }
    for (size_t i = 0; i < n; i++)
        if (tickets[i] && kr_pool_wait(&reports[i], pool, tickets[i], -1) != KR_OK)
            rc = KR_ENOMEM;
    free(tickets);
    return rc;
}

static const char *state_name(int state)
{
    static const char *const names[] = {"", "starting", "idle", "busy", "spare", "dead"};
    return state > 0 && state <= KR__W_DEAD ? names[state] : "?";
}

/* p50 and p99 of the replacements' start times (the last KR__RESPAWN_WAITS
 * of them; 0 before any): what a soak's report asks for, beside the mean
 * and the maximum. */
static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void respawn_percentiles(const kr_pool *pool, json_t *o)
{
    size_t n = pool->respawn_waits_head < KR__RESPAWN_WAITS ? pool->respawn_waits_head
                                                            : KR__RESPAWN_WAITS;
    double sorted[KR__RESPAWN_WAITS];
    memcpy(sorted, pool->respawn_waits, n * sizeof *sorted);
    qsort(sorted, n, sizeof *sorted, by_value);
    json_object_set_new(o, "respawn_wait_p50_s", json_real(n ? kr__percentile(sorted, n, 0.5) : 0));
    json_object_set_new(o, "respawn_wait_p99_s", json_real(n ? kr__percentile(sorted, n, 0.99) : 0));
}

int kr_pool_status_json(char **json_out, kr_pool *pool)
{
    if (!json_out || !pool)
        return KR_EINVAL;
    json_t *o = json_object(), *workers = json_array();
    pthread_mutex_lock(&pool->lock);
    size_t queued = 0, running = 0, done = 0;
    for (size_t i = 0; i < pool->num_jobs; i++) {
        const kr__pjob *j = pool->jobs[i];
        if (!j)
            continue;
        queued += j->state == KR__JOB_COMPILE_QUEUED || j->state == KR__JOB_GPU_QUEUED;
        running += j->state == KR__JOB_COMPILING || j->state == KR__JOB_RUNNING;
        done += j->state == KR__JOB_DONE;
    }
    json_int_t first_pid = 0;
    for (size_t i = 0; i < pool->num_workers; i++) {
        const kr__worker *w = &pool->workers[i];
        json_t *wj = json_object();
        json_object_set_new(wj, "kind", json_string(w->kind == KR__GPU_WORKER ? "gpu" : "compile"));
        if (w->kind == KR__GPU_WORKER)
            json_object_set_new(wj, "device", json_integer(w->device));
        json_object_set_new(wj, "state", json_string(state_name(w->state)));
        json_object_set_new(wj, "spare", json_boolean(w->spare));
        json_object_set_new(wj, "pid", json_integer(w->pid));
        json_object_set_new(wj, "device_name", json_string(w->device_name));
        if (w->sandbox)
            json_object_set(wj, "sandbox", w->sandbox);
        json_array_append_new(workers, wj);
        if (!first_pid && w->pid > 0)
            first_pid = w->pid;
    }
    json_object_set_new(o, "workers", workers);
    json_object_set_new(o, "first_worker_pid", json_integer(first_pid));
    json_object_set_new(o, "gpus", json_integer(pool->num_gpus));
    json_object_set_new(o, "arch", json_string(pool->arch));
    json_object_set_new(o, "cache_dir", json_string(pool->cache_dir));
    json_object_set_new(o, "jobs_queued", json_integer((json_int_t)queued));
    json_object_set_new(o, "jobs_running", json_integer((json_int_t)running));
    json_object_set_new(o, "jobs_done_uncollected", json_integer((json_int_t)done));
    json_object_set_new(o, "jobs_finished", json_integer((json_int_t)pool->finished));
    json_object_set_new(o, "respawns", json_integer((json_int_t)pool->respawns));
    json_object_set_new(o, "retries", json_integer((json_int_t)pool->retries));
    json_object_set_new(o, "timeouts", json_integer((json_int_t)pool->timeouts));
    json_object_set_new(o, "dedup_hits", json_integer((json_int_t)pool->dedup_hits));
    json_object_set_new(o, "respawn_wait_max_s", json_real(pool->respawn_wait_max));
    json_object_set_new(o, "respawn_wait_mean_s",
                        json_real(pool->respawns ? pool->respawn_wait_total / (double)pool->respawns : 0));
    respawn_percentiles(pool, o);
    pthread_mutex_unlock(&pool->lock);
    *json_out = json_dumps(o, JSON_INDENT(2));
    json_decref(o);
    return *json_out ? KR_OK : KR_ENOMEM;
}
