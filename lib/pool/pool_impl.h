/* The pool's private layout, shared by its files: pool.c (the public calls
 * that start and stop it), pool_jobs.c (the job table), pool_loop.c (the
 * pool's thread: dispatch, deadlines, results, golden requests, respawns)
 * and spawn.c (starting and stopping worker processes). */
#ifndef KR_POOL_IMPL_H
#define KR_POOL_IMPL_H

#define KR__RESPAWN_WAITS 1024

#include "kreward/pool.h"
#include "pool/protocol.h"

#include <pthread.h>
#include <sys/types.h>

enum kr__job_state {
    KR__JOB_COMPILE_QUEUED = 1, /* waiting for a compile worker */
    KR__JOB_COMPILING,
    KR__JOB_GPU_QUEUED,         /* waiting for a GPU worker */
    KR__JOB_RUNNING,
    KR__JOB_DONE,               /* report ready */
    KR__JOB_COLLECTED,
};

typedef struct kr__pjob {
    uint64_t ticket;
    int state;
    kr_job job;                 /* the caller's job, with every pointer copied below */
    kr_compile_options compile; /* full structs, read by the caller's versions */
    kr_verify_options verify;
    kr_bench_options bench;
    char *source, *name;
    void *binary;
    char *plan_json;            /* binary jobs: the plan (the caller's may be freed) */
    uint64_t key[2];            /* what makes two jobs the same (XXH3-128) */
    struct kr__pjob *same_as;   /* an identical earlier job: its report is copied */
    int attempts;               /* times a worker died under it */
    int passed_over;            /* times a GPU worker took a later job of its last problem */
    int not_ahead;              /* its frame is over what may be sent ahead (pool_loop.c) */
    kr_report *report;
} kr__pjob;

enum kr__worker_kind { KR__GPU_WORKER = 1, KR__COMPILE_WORKER = 2 };
enum kr__worker_state { KR__W_STARTING = 1, KR__W_IDLE, KR__W_BUSY, KR__W_SPARE, KR__W_DEAD };

typedef struct kr__worker {
    int kind;
    int device;                 /* the device ordinal as the caller sees it (GPU workers) */
    int spare;                  /* kept warm to replace a GPU worker that dies */
    int failures;               /* starts that failed in a row */
    int given_up;               /* it cannot start: not tried again */
    int state;
    pid_t pid;
    int sock;                   /* -1 when none */
    kr__pjob *job;              /* running */
    kr__pjob *ahead;            /* a GPU worker's next job, already in its socket (pool_loop.c) */
    int write_closed;           /* sending it a job ahead failed: it gets nothing more */
    double started, deadline;   /* wall clock */
    char last_problem[33];      /* the hash of the problem of its last job ("" after a start) */
    char arch[32];
    char device_name[128];
    json_t *sandbox;            /* as the worker reported it */
} kr__worker;

struct kr_pool {
    kr_pool_options o;
    char *worker_path, *cache_dir, *cuda_home, *gpu_list;
    int own_cache_dir;          /* a private cache directory, removed at free */
    int num_gpus;
    int devices[64];
    char no_gpu_why[320];       /* num_gpus 0: why, for the not_run reports */
    char arch[32];              /* the GPU workers' compile target (compile workers use it) */
    int no_affinity;            /* $KR_POOL_AFFINITY=0: GPU workers take jobs in order */
    int no_ahead;               /* $KR_POOL_AHEAD=0: no job sent to a busy GPU worker */
    int ahead_retry;            /* a job waits to go ahead into a socket not yet read: poll soon */
    kr__worker *workers;
    size_t num_workers;
    pthread_t thread;
    int thread_started;
    /* The workers are started by the pool's own thread (PR_SET_PDEATHSIG
     * follows the thread that spawned a child: a pool made in a short-lived
     * caller thread would lose them); kr_pool_new waits for the outcome. */
    int (*start)(kr_pool *pool, char *why, size_t why_size);
    int start_done, start_rc;
    char start_why[1024];
    pthread_mutex_t lock;
    pthread_cond_t done;        /* a job finished */
    int wake[2];                /* a pipe: submissions and shutdown wake the pool's thread */
    int stopping;
    kr__pjob **jobs;            /* by ticket - first_ticket */
    size_t num_jobs, cap_jobs;
    uint64_t first_ticket, next_ticket, next_collect;
    /* problems' soundness (kr__problem_weak) as the GPU workers found it,
     * by problem hash: a new worker is told rather than checking again (a
     * second or more per problem, paid after every respawn otherwise);
     * touched only by the pool's thread */
    struct kr__sound_note {
        char hash[33];
        int weak;
    } *sound;
    size_t num_sound;
    /* what happened, for kr_pool_status_json */
    uint64_t finished, respawns, retries, timeouts, dedup_hits;
    double respawn_wait_total, respawn_wait_max;
    /* the last KR__RESPAWN_WAITS replacements' start times, for the status's
     * p50 and p99 (a soak restarts workers thousands of times) */
    double respawn_waits[KR__RESPAWN_WAITS];
    size_t respawn_waits_head;
    char last_start_error[512];
};

/* pool.c */
/* Frees a job and its copies of the caller's data (NULL: nothing). */
void kr__pool_job_free(kr__pjob *j);

/* spawn.c */
int kr__worker_spawn(kr_pool *pool, kr__worker *w, char *why, size_t why_size);
/* Waits for the worker's HELLO (at most timeout_s): KR_OK when it is ready. */
int kr__worker_hello(kr_pool *pool, kr__worker *w, double timeout_s, char *why, size_t why_size);
/* SIGKILL, reap, close: the worker is gone (no-op when it is). */
void kr__worker_kill(kr__worker *w);
/* Finds the kreward-worker executable; malloc'd path or NULL with why. */
char *kr__worker_find(const char *option, char *why, size_t why_size);

/* pool_loop.c */
void *kr__pool_thread(void *pool);
/* Wakes the pool's thread (after a submission or to stop). */
void kr__pool_wake(kr_pool *pool);
/* A job's report is final: store it, score it, wake waiters (lock held). */
void kr__pool_finish(kr_pool *pool, kr__pjob *j, kr_report *r);
/* Whether workers of a kind (KR__GPU_WORKER, KR__COMPILE_WORKER) can still
 * serve: the one test for dispatch, submission and failing stranded jobs. */
int kr__pool_workers_alive(const kr_pool *pool, int kind);
/* A report with this verdict and message (for jobs the pool judges). */
kr_report *kr__pool_report(int verdict, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
