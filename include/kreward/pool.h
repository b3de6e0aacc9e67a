/* libkreward: the pool: untrusted candidates evaluated in sandboxed worker
 * processes owned by the library, on every GPU of the host.
 *
 * A kernel fault poisons a CUDA process for good and a hung kernel cannot be
 * stopped from inside it, so candidates never run in the caller's process:
 * the pool starts `kreward-worker` processes (posix_spawn, never fork of a
 * caller that may hold CUDA state): one GPU worker per GPU it is given (and
 * a warm spare per GPU, so a respawn costs no waiting), and compile workers
 * on the CPUs (NVRTC needs no GPU; compiled binaries reach the GPU workers
 * through the shared content-addressed cache). Workers talk to the pool over
 * socket pairs (docs/pool.md), sandbox themselves (docs/sandbox.md), and die
 * with their parent.
 *
 * A job that faults, hangs or crashes its worker costs that worker, never a
 * report: every submitted job gets exactly one report (the faulting
 * candidate its fault/timeout verdict, jobs that merely shared a dying
 * worker a retry). Scoring happens here, in the caller's process, with the
 * caller's kr_reward (plugins and Python terms included).
 *
 * Threads: a pool may be used from several threads at once (submit, wait,
 * next). Golden callbacks of problems are called from the pool's own
 * thread. */
#ifndef KREWARD_POOL_H
#define KREWARD_POOL_H

#include "evaluate.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kr_pool kr_pool;

/* Run workers without the sandbox (for debugging the library itself). */
#define KR_POOL_NO_SANDBOX 0x1u
/* No warm spare per GPU (halves the GPU memory the pool holds). */
#define KR_POOL_NO_SPARE 0x2u

#define KR_POOL_OPTIONS_VERSION 1u
typedef struct kr_pool_options {
    uint32_t version;          /* KR_POOL_OPTIONS_VERSION */
    uint32_t flags;            /* KR_POOL_* */
    const char *gpus;          /* device ordinals, "0,1"; NULL: every GPU CUDA_VISIBLE_DEVICES shows */
    uint32_t compile_workers;  /* 0: one per two CPUs, at most 8; compile in the GPU workers when no CPU workers */
    double job_timeout_s;      /* a job's wall limit in a worker; 0: 300 s */
    double compile_timeout_s;  /* a compile's wall limit; 0: 60 s */
    uint64_t compile_memory_bytes; /* compile workers' address-space limit; 0: 8 GiB */
    uint32_t max_attempts;     /* a job whose worker died of something else is retried; 0: 3 */
    const char *worker_path;   /* kreward-worker; NULL: $KREWARD_WORKER, next to the library, PATH */
    const char *cache_dir;     /* compile cache shared with the workers; NULL: a private one */
    const char *cuda_home;     /* NULL: as for contexts */
} kr_pool_options;

#define KR_POOL_OPTIONS_INIT { KR_POOL_OPTIONS_VERSION, 0u, NULL, 0, 0.0, 0.0, 0, 0, NULL, NULL, NULL }
/* Fills the fields that existed in `version` with their defaults. */
KR_API int kr_pool_options_init(kr_pool_options *opts, uint32_t version);

/* Starts the workers and waits until each has said it is ready. Fails (with
 * the reason in *why when not NULL, a string to kr_free) when no GPU worker
 * can start: never a silent fallback. */
KR_API int kr_pool_new(kr_pool **out, const kr_pool_options *opts, char **why);
/* Stops the workers and frees the pool with every job still in it: reports
 * not collected by then are gone (collect what you need first; the Python
 * Pool's close() hands its pending jobs verdict error, "the pool was
 * freed"). No thread may be waiting on the pool. */
KR_API void kr_pool_free(kr_pool *pool);

/* One candidate: source (CUDA C++, with its plan as annotations) or a ready
 * binary (CUBIN/PTX, e.g. from Triton) with its plan. Everything is copied
 * at submission: the caller may free it at once. */
#define KR_JOB_VERSION 1u
typedef struct kr_job {
    uint32_t version;                    /* KR_JOB_VERSION */
    uint32_t flags;                      /* KR_EVALUATE_* */
    const kr_problem *problem;
    const char *source;                  /* CUDA C++ (len bytes; 0: NUL-terminated) */
    size_t len;
    const void *binary;                  /* or a CUBIN/PTX image ... */
    size_t binary_len;
    const kr_plan *plan;                 /* ... and its plan (source jobs: NULL, annotations) */
    const char *name;                    /* the candidate's file name, for messages */
    const kr_compile_options *compile;   /* NULL: defaults */
    const kr_verify_options *verify;     /* NULL: defaults */
    const kr_bench_options *bench;       /* NULL: the fast preset */
    kr_reward *reward;                   /* scored in this process when done; NULL: not scored */
} kr_job;

#define KR_JOB_INIT { KR_JOB_VERSION, 0u, NULL, NULL, 0, NULL, 0, NULL, NULL, NULL, NULL, NULL, NULL }
KR_API int kr_job_init(kr_job *job, uint32_t version);

/* Queues a job; *ticket identifies it (tickets rise in submission order). */
KR_API int kr_pool_submit(uint64_t *ticket, kr_pool *pool, const kr_job *job);
/* The report of one ticket (the caller frees it), waiting at most timeout_s
 * (< 0: until done). KR_ETIMEOUT when not done yet; KR_ENOTFOUND for an
 * unknown or already collected ticket. */
KR_API int kr_pool_wait(kr_report **out, kr_pool *pool, uint64_t ticket, double timeout_s);
/* The report of the oldest uncollected ticket, in submission order,
 * waiting at most timeout_s (< 0: until done); its ticket in *ticket.
 * KR_ENOTFOUND when nothing is pending. */
KR_API int kr_pool_next(kr_report **out, uint64_t *ticket, kr_pool *pool, double timeout_s);

/* The pool's state as JSON (workers, their devices, sandbox, jobs queued,
 * running and done, respawns, timings); caller frees. */
KR_API int kr_pool_status_json(char **json_out, kr_pool *pool);

/* What the workers' sandbox can use on this machine, as JSON, without a
 * pool: {"landlock": bool, "landlock_abi": n, "landlock_why": "...",
 * "seccomp": bool, "seccomp_why": "..."} (a why is empty when available).
 * Where Landlock or seccomp is missing, workers still run, with the rest of
 * the sandbox; `kreward info` prints this. Caller frees. */
KR_API int kr_pool_sandbox_json(char **json_out);

/* A GRPO-style group in one call: every job through the pool, reports[i]
 * for jobs[i] (each freed by the caller), identical candidates (same
 * problem, source or binary, plan and options) evaluated once. Returns KR_OK
 * when every job has its report. */
KR_API int kr_evaluate_batch(kr_report **reports, kr_pool *pool, const kr_job *jobs, size_t n);

#ifdef __cplusplus
}
#endif
#endif
