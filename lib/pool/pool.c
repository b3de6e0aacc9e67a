/* The pool's public calls that start and stop it: the options, starting
 * the workers, kr_pool_new, kr_pool_free. The job table (submit, wait,
 * next, batch, status) is in pool_jobs.c, the pool's own thread (dispatch,
 * results, deadlines, respawns) in pool_loop.c. */
#include "pool/pool_impl.h"
#include "common/options.h"
#include "common/strbuf.h"
#include "driver/context_impl.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define HELLO_TIMEOUT_S 120

static const kr_pool_options pool_defaults = KR_POOL_OPTIONS_INIT;
static const size_t pool_sizes[] = {0, KR__UPTO(kr_pool_options, cuda_home)};
static const kr__versioned pool_version = {"kr_pool_options", pool_sizes, KR_POOL_OPTIONS_VERSION,
                                           sizeof(kr_pool_options)};

int kr_pool_options_init(kr_pool_options *opts, uint32_t version)
{
    return kr__options_init(&pool_version, opts, &pool_defaults, version);
}

static void set_why(char **why, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void set_why(char **why, const char *fmt, ...)
{
    if (!why)
        return;
    kr__buf b = KR__BUF_INIT;
    va_list ap;
    va_start(ap, fmt);
    kr__buf_vprintf(&b, fmt, ap);
    va_end(ap);
    *why = kr__buf_take(&b);
}

/* ---- starting ---- */

/* The GPUs to use: the option's list, or every device the driver shows
 * through this process's CUDA_VISIBLE_DEVICES; "none" (or no list and
 * KREWARD_DEVICE=none, as for a context): a pool that only compiles (its
 * jobs that need a GPU end not_run, as asked). */
/* Why a pool that only compiles has no GPU, for the not_run reports its
 * jobs end with: what this machine lacks (the driver, a device) where it
 * lacks one, else what the user set (gpus="none", KREWARD_DEVICE=none). */
static void no_gpu_why(kr_pool *pool, int asked_none)
{
    const kr__cuda_api *cu = kr__cuda();
    int count = 0;
    const char *why = !cu->loaded ? cu->why
                      : cu->cuDeviceGetCount(&count) != CUDA_SUCCESS || count == 0
                          ? "the driver reports no CUDA device"
                      : asked_none ? "the pool was asked for no GPU (gpus=\"none\")"
                                   : "KREWARD_DEVICE=none is set";
    snprintf(pool->no_gpu_why, sizeof pool->no_gpu_why, "%s", why);
}

static int choose_gpus(kr_pool *pool, char *why, size_t why_size)
{
    const char *list = pool->o.gpus, *env = getenv("KREWARD_DEVICE");
    int asked_none = list && strcmp(list, "none") == 0;
    int env_none = !list && env && strcmp(env, "none") == 0;
    if (asked_none || env_none) {
        no_gpu_why(pool, asked_none);
        return KR_OK;
    }
    if (list) {
        char *copy = kr__strdup(list);
        for (char *save = NULL, *t = copy ? strtok_r(copy, ",", &save) : NULL; t;
             t = strtok_r(NULL, ",", &save)) {
            char *end;
            long d = strtol(t, &end, 10);
            if (end == t || *end || d < 0 || d > 255 || pool->num_gpus == 64) {
                snprintf(why, why_size, "gpus '%s': '%s' is not a device ordinal (a list such "
                         "as \"0,1\", or \"none\")", list, t);
                free(copy);
                return KR_EINVAL;
            }
            pool->devices[pool->num_gpus++] = (int)d;
        }
        free(copy);
        if (!pool->num_gpus)
            snprintf(why, why_size, "gpus '%s' names no device", list);
        return pool->num_gpus ? KR_OK : KR_EINVAL;
    }
    const kr__cuda_api *cu = kr__cuda();
    int count = 0;
    if (!cu->loaded) {
        snprintf(why, why_size, "no GPU worker can start: %s", cu->why);
        return KR_ENODEVICE;
    }
    if (cu->cuDeviceGetCount(&count) != CUDA_SUCCESS || count == 0) {
        const char *vis = getenv("CUDA_VISIBLE_DEVICES");
        snprintf(why, why_size, "no GPU worker can start: the driver reports no CUDA device%s%s%s",
                 vis ? " (CUDA_VISIBLE_DEVICES='" : "", vis ? vis : "", vis ? "')" : "");
        return KR_ENODEVICE;
    }
    for (int d = 0; d < count && d < 64; d++)
        pool->devices[pool->num_gpus++] = d;
    return KR_OK;
}

static kr__worker *add_worker(kr_pool *pool, int kind, int device, int spare)
{
    kr__worker *w = &pool->workers[pool->num_workers++];
    memset(w, 0, sizeof *w);
    w->kind = kind;
    w->device = device;
    w->sock = -1;
    w->state = KR__W_DEAD;
    w->spare = spare;
    return w;
}

/* Spawns every worker of a kind, then waits for each one's HELLO. */
static int start_workers(kr_pool *pool, int kind, kr__buf *errors)
{
    int ready = 0;
    char why[512];
    for (size_t i = 0; i < pool->num_workers; i++) {
        kr__worker *w = &pool->workers[i];
        if (w->kind == kind && kr__worker_spawn(pool, w, why, sizeof why) != KR_OK)
            kr__buf_printf(errors, "%s; ", why);
    }
    for (size_t i = 0; i < pool->num_workers; i++) {
        kr__worker *w = &pool->workers[i];
        if (w->kind != kind || w->state != KR__W_STARTING)
            continue;
        if (kr__worker_hello(pool, w, HELLO_TIMEOUT_S, why, sizeof why) == KR_OK) {
            w->state = w->spare ? KR__W_SPARE : KR__W_IDLE;
            ready++;
            if (kind == KR__GPU_WORKER && !pool->arch[0])
                snprintf(pool->arch, sizeof pool->arch, "%s", w->arch);
        } else {
            kr__buf_printf(errors, "%s worker for device %d: %s; ",
                           kind == KR__GPU_WORKER ? "GPU" : "compile", w->device, why);
            kr__worker_kill(w);
        }
    }
    return ready;
}

static int private_cache_dir(kr_pool *pool, char *why, size_t why_size)
{
    const char *tmp = getenv("TMPDIR");
    char path[4096];
    snprintf(path, sizeof path, "%s/kreward-pool-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(path)) {
        snprintf(why, why_size, "cannot make a cache directory: %s", strerror(errno));
        return KR_EIO;
    }
    pool->cache_dir = kr__strdup(path);
    pool->own_cache_dir = 1;
    return pool->cache_dir ? KR_OK : KR_ENOMEM;
}

static int setup(kr_pool *pool, char *why, size_t why_size)
{
    kr_pool_options *o = &pool->o;
    o->job_timeout_s = o->job_timeout_s > 0 ? o->job_timeout_s : 300;
    o->compile_timeout_s = o->compile_timeout_s > 0 ? o->compile_timeout_s : 60;
    o->compile_memory_bytes = o->compile_memory_bytes ? o->compile_memory_bytes : 8ull << 30;
    o->max_attempts = o->max_attempts ? o->max_attempts : 3;
    if (!(pool->worker_path = kr__worker_find(o->worker_path, why, why_size)))
        return KR_ENOTFOUND;
    pool->cuda_home = kr__resolve_cuda_home(o->cuda_home);
    int rc = o->cache_dir ? ((pool->cache_dir = kr__strdup(o->cache_dir)) ? KR_OK : KR_ENOMEM)
                          : private_cache_dir(pool, why, why_size);
    if (rc == KR_OK)
        rc = choose_gpus(pool, why, why_size);
    if (rc != KR_OK)
        return rc;
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    size_t compile = o->compile_workers ? o->compile_workers : (size_t)(cpus > 1 ? cpus / 2 : 1);
    compile = compile > 8 && !o->compile_workers ? 8 : compile;
    size_t spares = (o->flags & KR_POOL_NO_SPARE) ? 0 : (size_t)pool->num_gpus;
    pool->workers = calloc((size_t)pool->num_gpus * 2 + compile + 1, sizeof *pool->workers);
    if (!pool->workers || pipe2(pool->wake, O_CLOEXEC | O_NONBLOCK) != 0)
        return KR_ENOMEM;
    for (int g = 0; g < pool->num_gpus; g++)
        add_worker(pool, KR__GPU_WORKER, pool->devices[g], 0);
    for (size_t g = 0; g < spares; g++)
        add_worker(pool, KR__GPU_WORKER, pool->devices[g], 1);
    for (size_t c = 0; c < compile; c++)
        add_worker(pool, KR__COMPILE_WORKER, -1, 0);
    return KR_OK;
}

/* Every worker, GPU ones first (run on the pool's thread, see pool_impl.h). */
static int start_all(kr_pool *pool, char *why, size_t why_size)
{
    kr__buf errors = KR__BUF_INIT;
    int rc = KR_OK;
    if (pool->num_gpus && !start_workers(pool, KR__GPU_WORKER, &errors)) {
        snprintf(why, why_size, "no GPU worker could start: %s",
                 errors.data ? errors.data : "no reason given");
        rc = KR_ENODEVICE;
    }
    if (rc == KR_OK)
        start_workers(pool, KR__COMPILE_WORKER, &errors); /* without them, GPU workers compile */
    kr__buf_free(&errors);
    return rc;
}

int kr_pool_new(kr_pool **out, const kr_pool_options *opts, char **why)
{
    if (!out)
        return KR_EINVAL;
    *out = NULL;
    if (why)
        *why = NULL;
    kr_pool *pool = calloc(1, sizeof *pool);
    if (!pool)
        return KR_ENOMEM;
    pool->wake[0] = pool->wake[1] = -1;
    pthread_mutex_init(&pool->lock, NULL);
    pthread_cond_init(&pool->done, NULL);
    pool->first_ticket = pool->next_ticket = pool->next_collect = 1;
    /* read once, here: the pool's thread must not read the environment the
     * caller may be changing */
    pool->no_affinity = kr__knob_off("KR_POOL_AFFINITY");
    pool->no_ahead = kr__knob_off("KR_POOL_AHEAD");
    char reason[1024] = "";
    int rc = kr__options_read(&pool_version, &pool->o, &pool_defaults, opts, reason, sizeof reason);
    if (rc == KR_OK)
        rc = setup(pool, reason, sizeof reason);
    pool->start = start_all;
    if (rc == KR_OK && pthread_create(&pool->thread, NULL, kr__pool_thread, pool) != 0)
        rc = KR_ENOMEM;
    pool->thread_started = rc == KR_OK;
    if (rc == KR_OK) { /* the pool's thread starts the workers: wait for it */
        pthread_mutex_lock(&pool->lock);
        while (!pool->start_done)
            pthread_cond_wait(&pool->done, &pool->lock);
        rc = pool->start_rc;
        pthread_mutex_unlock(&pool->lock);
        if (rc != KR_OK)
            snprintf(reason, sizeof reason, "%s", pool->start_why);
    }
    if (rc != KR_OK) {
        set_why(why, "%s", reason[0] ? reason : kr_strerror(rc));
        kr_pool_free(pool);
        return rc;
    }
    *out = pool;
    return KR_OK;
}

void kr__pool_job_free(kr__pjob *j)
{
    if (!j)
        return;
    free(j->source);
    free(j->name);
    free(j->binary);
    free(j->plan_json);
    kr_report_free(j->report);
    free(j);
}

/* For nftw: removes the pool's own cache directory, depth first, following
 * no link (no shell: the path comes from $TMPDIR). */
static int remove_entry(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
    (void)st, (void)type, (void)ftw;
    remove(path);
    return 0;
}

void kr_pool_free(kr_pool *pool)
{
    if (!pool)
        return;
    if (pool->thread_started) {
        pthread_mutex_lock(&pool->lock);
        pool->stopping = 1;
        pthread_mutex_unlock(&pool->lock);
        kr__pool_wake(pool);
        pthread_join(pool->thread, NULL);
    }
    for (size_t i = 0; i < pool->num_workers; i++) {
        kr__worker *w = &pool->workers[i];
        if (w->sock >= 0)
            kr__frame_send(w->sock, KR__MSG_BYE, NULL, NULL, 0, NULL, 0);
        kr__worker_kill(w);
        json_decref(w->sandbox);
    }
    for (size_t i = 0; i < pool->num_jobs; i++)
        kr__pool_job_free(pool->jobs[i]);
    if (pool->own_cache_dir && pool->cache_dir) /* a leftover temp directory is no error */
        nftw(pool->cache_dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
    if (pool->wake[0] >= 0)
        close(pool->wake[0]);
    if (pool->wake[1] >= 0)
        close(pool->wake[1]);
    pthread_mutex_destroy(&pool->lock);
    pthread_cond_destroy(&pool->done);
    free(pool->jobs);
    free(pool->sound);
    free(pool->workers);
    free(pool->worker_path);
    free(pool->cache_dir);
    free(pool->cuda_home);
    free(pool);
}
