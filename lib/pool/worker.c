/* The worker process (`kreward-worker`): one context of its own, a sandbox,
 * and a loop that runs the pool's jobs and sends back their reports.
 *
 *   kreward-worker --kind gpu|compile --fd N --parent PID [--arch ARCH]
 *                  [--cuda-home DIR] [--cache-dir DIR] [--compile-memory BYTES]
 *                  [--no-sandbox]
 *
 * A GPU worker sees one GPU (the pool sets CUDA_VISIBLE_DEVICES) and runs
 * the whole evaluation; a compile worker has no device and runs a job's
 * compile stage (compile, plan, admissibility: verdicts that need no GPU),
 * leaving the binary in the shared compile cache for the GPU worker. A
 * candidate that faults or hangs poisons this process's CUDA context: the
 * worker reports the verdict and exits, and the pool starts another. */
#include "pool/worker.h"
#include "compile/program_impl.h"
#include "driver/context_impl.h"
#include "driver/nvrtc_api.h"
#include "run/engine.h"
#include "verify/verify.h"
#include "pool/job.h"
#include "pool/protocol.h"
#include "sandbox/sandbox.h"
#include "problem/problem_impl.h"
#include "report/report_impl.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

/* The in-memory compile cache of a worker: the pool's disk cache holds
 * every blob anyway (that is how they reach the GPU workers), so memory
 * only saves a file read for the hottest ones (the problems' references),
 * and a disk hit costs 6.9 us against a memory hit's 3.3 us (bench_compile).
 * The library's default (256 MB per context) let every worker grow by a
 * blob per distinct candidate, ~10 KB, to 256 MB each: the soak's workers
 * grew 41 MB in 6,000 evaluations on the H200. 16 MB still let a pool of 8
 * compile workers grow 69 MB over a 10,000-evaluation soak (479fce0) before
 * their caches were full; 2 MB holds the references of a suite and is
 * full after ~200 candidates a worker (bench/bench_worker_memory.py). */
#define WORKER_MEMORY_CACHE_BYTES ((uint64_t)2 << 20)

typedef struct {
    int sock;
    int gpu;                     /* 1: a GPU worker */
    kr_context *ctx;
    kr__sandbox_status sandbox;
    const kr__job_spec *job;     /* the job running (for golden requests) */
    int problem_weak;            /* the last job's problem soundness if checked, else -1 */
    double load_s;               /* the job's problem (and a binary's program and plan) read */
    char why[512];
} worker;

/* ---- golden outputs, from the pool (the caller computes them) ---- */

static int golden_rpc(void *user, const kr_golden_request *req)
{
    worker *w = user;
    json_t *body = json_object();
    json_object_set_new(body, "id", json_integer((json_int_t)w->job->id));
    json_object_set_new(body, "case", json_integer(req->case_index));
    json_object_set_new(body, "seed", json_integer((json_int_t)req->seed));
    json_object_set_new(body, "tensors", json_integer((json_int_t)req->num_tensors));
    /* the inputs the device generated travel along (the caller needs not
     * generate them again on its CPU): every tensor in one blob, so a
     * problem of any number of tensors fits a frame */
    int fd = -1;
    int rc = kr__blob_create_parts("kreward-golden-inputs", (const void *const *)req->host,
                                   req->bytes, req->num_tensors, &fd, w->why, sizeof w->why);
    if (rc == KR_OK)
        rc = kr__frame_send(w->sock, KR__MSG_GOLDEN, body, &fd, 1, w->why, sizeof w->why);
    json_decref(body);
    if (fd >= 0)
        close(fd);
    kr__frame reply;
    memset(&reply, 0, sizeof reply);
    if (rc == KR_OK)
        rc = kr__frame_recv(w->sock, &reply, -1, w->why, sizeof w->why);
    if (rc == KR_OK && (reply.type != KR__MSG_GOLDEN_REPLY ||
                        json_integer_value(json_object_get(reply.body, "status")) != 0)) {
        const char *m = json_string_value(json_object_get(reply.body, "message"));
        snprintf(req->errbuf, req->errbuf_size, "%s", m ? m : "the pool sent no golden outputs");
        rc = KR_EPLUGIN;
    }
    /* the outputs come back the same way: one blob, the problem's order */
    if (rc == KR_OK && reply.num_fds != 1) {
        snprintf(w->why, sizeof w->why, "a golden reply with %zu blobs, 1 expected",
                 reply.num_fds);
        rc = KR_EPARSE;
    }
    const void *data = NULL, **parts = NULL;
    size_t len = 0;
    if (rc == KR_OK && !(parts = calloc(req->num_tensors ? req->num_tensors : 1, sizeof *parts)))
        rc = KR_ENOMEM;
    if (rc == KR_OK)
        rc = kr__blob_map_parts(reply.fds[0], req->bytes, req->num_tensors, &data, &len, parts,
                                w->why, sizeof w->why);
    for (size_t t = 0; rc == KR_OK && t < req->num_tensors; t++)
        memcpy(req->host[t], parts[t], (size_t)req->bytes[t]);
    if (data)
        kr__blob_unmap(data, len);
    free(parts);
    if (rc != KR_OK && !req->errbuf[0])
        snprintf(req->errbuf, req->errbuf_size, "golden outputs from the pool: %s", w->why);
    kr__frame_clear(&reply);
    return rc == KR_OK ? 0 : 1;
}

/* ---- one job ---- */

static void describe(worker *w, kr_report *r)
{
    json_t *sec = kr__report_section(r, "worker");
    json_object_set_new(sec, "pid", json_integer(getpid()));
    json_object_set_new(sec, "kind", json_string(w->gpu ? "gpu" : "compile"));
    json_object_set_new(sec, "landlock", json_boolean(w->sandbox.landlock));
    json_object_set_new(sec, "seccomp", json_boolean(w->sandbox.seccomp));
    if (!w->sandbox.landlock && w->sandbox.landlock_why[0])
        json_object_set_new(sec, "landlock_why", json_string(w->sandbox.landlock_why));
}

static int run_job(worker *w, const kr__job_spec *job, int binary_fd, kr_report *r)
{
    kr_problem *problem = NULL;
    kr_plan *plan = NULL;
    kr_program *program = NULL;
    w->problem_weak = -1;
    double t0 = kr__now();
    w->load_s = 0;
    int rc = kr_problem_parse(&problem, w->ctx, job->problem, strlen(job->problem),
                              job->name ? job->name : "problem.json", NULL);
    if (rc != KR_OK) {
        kr_report_set_verdict(r, KR_VERDICT_ERROR);
        kr_report_set_text(r, "message", kr_context_errmsg(w->ctx));
        return rc;
    }
    if (problem->reference_kind == KR_REFERENCE_GOLDEN)
        kr_problem_set_golden(problem, golden_rpc, w, NULL);
    /* an earlier worker of the pool checked the problem's soundness */
    if (job->problem_weak >= 0 && kr_context_has_device(w->ctx))
        kr__problem_weak_note(w->ctx, problem, job->problem_weak);
    kr_evaluate_options o = KR_EVALUATE_OPTIONS_INIT;
    o.flags = job->flags;
    o.compile = &job->compile;
    o.verify = &job->verify;
    o.bench = &job->bench;
    o.name = job->name;
    w->job = job;
    w->load_s = kr__now() - t0; /* the problem; a binary job adds its program and plan below */
    if (job->source) {
        rc = kr_evaluate(r, w->ctx, problem, job->source, job->source_len, &o);
    } else {
        const void *data = NULL;
        size_t len = 0;
        rc = kr__blob_map(binary_fd, SIZE_MAX, &data, &len, w->why, sizeof w->why);
        if (rc == KR_OK)
            rc = kr_program_from_binary(&program, w->ctx, data, len, job->name);
        if (data)
            kr__blob_unmap(data, len);
        if (rc == KR_OK && job->plan)
            rc = kr_plan_parse_json(&plan, w->ctx, job->plan, strlen(job->plan), "plan.json");
        w->load_s = kr__now() - t0;
        if (rc == KR_OK)
            rc = kr_evaluate_program(r, w->ctx, problem, program, plan, &o);
        else if (kr_report_verdict(r) == KR_VERDICT_NONE) {
            kr_report_set_verdict(r, rc == KR_EPLAN || rc == KR_EPARSE ? KR_VERDICT_INVALID_PLAN
                                                                       : KR_VERDICT_COMPILE_ERROR);
            kr_report_set_text(r, "message", kr_context_errmsg(w->ctx));
            kr_report_set_text(r, "feedback", kr_context_errmsg(w->ctx));
            rc = KR_OK;
        }
    }
    w->job = NULL;
    /* the soundness check's outcome goes back only when it completed (a
     * failed check leaves nothing cached): the pool must not learn "sound"
     * from a report that merely lacks the weak flag */
    int weak = 0;
    w->problem_weak = kr_context_has_device(w->ctx) &&
                      kr__problem_weak_cached(w->ctx, problem, &weak) ? weak : -1;
    kr_program_free(program);
    kr_plan_free(plan);
    kr_problem_free(problem);
    return rc;
}

static int send_result(worker *w, uint64_t id, int status, kr_report *r)
{
    describe(w, r);
    char *text = NULL;
    if (kr_report_json(&text, r) != KR_OK)
        return KR_ENOMEM;
    json_t *body = json_object();
    json_object_set_new(body, "id", json_integer((json_int_t)id));
    json_object_set_new(body, "status", json_integer(status));
    json_object_set_new(body, "poisoned", json_boolean(w->ctx->poisoned));
    if (w->problem_weak >= 0)
        json_object_set_new(body, "problem_weak", json_integer(w->problem_weak));
    /* a report with large details rides in a blob */
    int fd = -1, rc = KR_OK;
    size_t len = strlen(text);
    if (len > ((size_t)1 << 20)) {
        rc = kr__blob_create("kreward-report", text, len, &fd, w->why, sizeof w->why);
        json_object_set_new(body, "report_blob", json_integer(0));
    } else {
        json_object_set_new(body, "report", json_stringn(text, len));
    }
    if (rc == KR_OK)
        rc = kr__frame_send(w->sock, KR__MSG_RESULT, body, fd >= 0 ? &fd : NULL, fd >= 0,
                            w->why, sizeof w->why);
    if (fd >= 0)
        close(fd);
    json_decref(body);
    kr_free(text);
    return rc;
}

/* Profile mode: the worker's time around an evaluation, into its report:
 * waiting for this job since the last result went (the pool's turnaround:
 * the GPU idles meanwhile), reading its problem, program and plan, and
 * sending the previous result. */
static void profile_worker(const worker *w, kr_report *r, double idle_s, double send_s)
{
    if (!kr__profile_mode() || !w->gpu)
        return;
    if (idle_s >= 0)
        kr_report_set(r, "profile_worker_idle_ms", 1e3 * idle_s);
    if (send_s >= 0)
        kr_report_set(r, "profile_worker_send_ms", 1e3 * send_s);
    kr_report_set(r, "profile_worker_load_ms", 1e3 * w->load_s);
}

static int serve(worker *w)
{
    double sent = -1, send_s = -1; /* when the last result had gone, and its sending */
    for (;;) {
        kr__frame f;
        int rc = kr__frame_recv(w->sock, &f, -1, w->why, sizeof w->why);
        double received = kr__now();
        if (rc != KR_OK)
            return rc == KR_EIO ? 0 : 3; /* the pool went away: nothing to report to */
        if (f.type == KR__MSG_BYE) {
            kr__frame_clear(&f);
            return 0;
        }
        kr__job_spec job;
        kr_report *r = NULL;
        if (f.type != KR__MSG_JOB || kr__job_decode(f.body, &job, w->why, sizeof w->why) != KR_OK ||
            kr_report_new(&r) != KR_OK) {
            kr__frame_clear(&f);
            return 4; /* the pool speaks nonsense: stop rather than guess */
        }
        int status = run_job(w, &job, f.num_fds ? f.fds[0] : -1, r);
        kr__frame_clear(&f);
        profile_worker(w, r, sent >= 0 ? received - sent : -1, send_s);
        double t_send = kr__now();
        rc = send_result(w, job.id, status, r);
        sent = kr__now();
        send_s = sent - t_send;
        kr_report_free(r);
        kr__job_spec_free(&job);
        if (rc != KR_OK)
            return 5;
        if (w->ctx->poisoned)
            return 0; /* this process's CUDA context is gone: the pool starts another */
    }
}

/* ---- start ---- */

typedef struct {
    const char *kind, *arch, *cuda_home, *cache_dir;
    int fd;
    long parent;
    unsigned long long compile_memory;
    int no_sandbox;
} worker_args;

static int parse_args(int argc, char **argv, worker_args *a)
{
    memset(a, 0, sizeof *a);
    a->fd = -1;
    for (int i = 1; i < argc; i++) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(argv[i], "--no-sandbox")) {
            a->no_sandbox = 1;
            continue;
        }
        if (!v)
            return -1;
        if (!strcmp(argv[i], "--kind"))
            a->kind = v;
        else if (!strcmp(argv[i], "--fd"))
            a->fd = atoi(v);
        else if (!strcmp(argv[i], "--parent"))
            a->parent = atol(v);
        else if (!strcmp(argv[i], "--arch"))
            a->arch = v;
        else if (!strcmp(argv[i], "--cuda-home"))
            a->cuda_home = v;
        else if (!strcmp(argv[i], "--cache-dir"))
            a->cache_dir = v;
        else if (!strcmp(argv[i], "--compile-memory"))
            a->compile_memory = strtoull(v, NULL, 10);
        else
            return -1;
        i++;
    }
    return a->kind && a->fd >= 0 && a->parent > 0 ? 0 : -1;
}

/* The worker's address space now (/proc/self/statm's first field). */
static uint64_t mapped_bytes(void)
{
    unsigned long long pages = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f) {
        if (fscanf(f, "%llu", &pages) != 1)
            pages = 0;
        fclose(f);
    }
    return (uint64_t)pages * (uint64_t)sysconf(_SC_PAGESIZE);
}

static int sandbox(worker *w, const worker_args *a)
{
    const char *reads[] = {w->ctx->cuda_home, "/usr/lib", "/usr/lib64", "/lib", "/lib64",
                           "/usr/local/cuda", "/etc/ld.so.cache", "/usr/share/nvidia",
                           "/etc/nvidia", "/usr/local/nvidia"};
    const char *writes[] = {a->cache_dir};
    /* the compile budget comes on top of what the worker already maps (its
     * libraries, NVRTC; under ASan terabytes of shadow reservation) */
    uint64_t budget = a->compile_memory ? a->compile_memory : 8ull << 30;
    /* a GPU worker leaves out /dev/shm and the task files' read right:
     * cuInit and torch start without them (sandbox_cuda_probe.py on the
     * H200 at 2772c70, every variant "ok"), and neither the cubins nor
     * NVRTC need the same user's shared memory or the socket tables */
    kr__sandbox_spec spec = {reads, sizeof reads / sizeof reads[0], writes, a->cache_dir ? 1u : 0u,
                             w->gpu ? 0 : mapped_bytes() + budget, 0, 0, w->gpu, 0,
                             w->gpu ? KR__GPU_WITHOUT_SHM | KR__GPU_WITHOUT_TASK_READ : 0u};
    if (a->no_sandbox) {
        kr__sandbox_probe(&w->sandbox);
        w->sandbox.landlock = w->sandbox.seccomp = 0;
        snprintf(w->sandbox.landlock_why, sizeof w->sandbox.landlock_why, "--no-sandbox");
        return 0;
    }
    return kr__sandbox_apply(&spec, &w->sandbox, w->why, sizeof w->why);
}

static int hello(worker *w)
{
    json_t *body = json_object();
    json_object_set_new(body, "pid", json_integer(getpid()));
    json_object_set_new(body, "kind", json_string(w->gpu ? "gpu" : "compile"));
    json_object_set_new(body, "device", json_string(w->ctx->has_device ? w->ctx->device_name : ""));
    json_object_set_new(body, "arch", json_string(w->ctx->arch));
    json_object_set_new(body, "ready", json_boolean(1));
    json_t *sb = json_object();
    json_object_set_new(sb, "no_new_privs", json_boolean(w->sandbox.no_new_privs));
    json_object_set_new(sb, "landlock", json_boolean(w->sandbox.landlock));
    json_object_set_new(sb, "landlock_abi", json_integer(w->sandbox.landlock_abi));
    json_object_set_new(sb, "seccomp", json_boolean(w->sandbox.seccomp));
    json_object_set_new(sb, "landlock_why", json_string(w->sandbox.landlock_why));
    json_object_set_new(sb, "seccomp_why", json_string(w->sandbox.seccomp_why));
    json_object_set_new(body, "sandbox", sb);
    if (!w->gpu || w->ctx->has_device) {
        /* nothing to add */
    } else {
        json_object_set_new(body, "why", json_string(w->ctx->device_why));
    }
    int rc = kr__frame_send(w->sock, KR__MSG_HELLO, body, NULL, 0, w->why, sizeof w->why);
    json_decref(body);
    return rc;
}

/* A HELLO that says why the worker cannot serve, then exit. */
static int refuse(worker *w, const char *why)
{
    json_t *body = json_object();
    json_object_set_new(body, "pid", json_integer(getpid()));
    json_object_set_new(body, "ready", json_boolean(0));
    json_object_set_new(body, "why", json_string(why));
    kr__frame_send(w->sock, KR__MSG_HELLO, body, NULL, 0, w->why, sizeof w->why);
    json_decref(body);
    return 2;
}

int kr__worker_main(int argc, char **argv)
{
    worker_args a;
    if (parse_args(argc, argv, &a) != 0) {
        fprintf(stderr, "kreward-worker: started by a kreward pool, not by hand (usage: see "
                        "lib/pool/worker.c)\n");
        return 2;
    }
    /* die with the pool; and if it is already gone, do not start at all */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != (pid_t)a.parent)
        return 3;
    signal(SIGPIPE, SIG_IGN);
    worker w;
    memset(&w, 0, sizeof w);
    w.problem_weak = -1;
    w.sock = a.fd;
    w.gpu = strcmp(a.kind, "gpu") == 0;
    kr_context_options co = KR_CONTEXT_OPTIONS_INIT;
    co.cuda_home = a.cuda_home;
    co.cache_dir = a.cache_dir;
    co.default_arch = a.arch;
    co.flags = w.gpu ? 0 : KR_CONTEXT_NO_DEVICE;
    co.cache_memory_bytes = WORKER_MEMORY_CACHE_BYTES;
    if (kr_context_new(&w.ctx, &co) != KR_OK)
        return refuse(&w, "cannot create a context");
    kr__engine *e;
    if (w.gpu && !w.ctx->has_device)
        return refuse(&w, w.ctx->device_why);
    /* everything CUDA opens at start (device files, the builtin module)
     * before the sandbox closes the file system */
    if (w.gpu && kr__engine_get(w.ctx, &e) != KR_OK)
        return refuse(&w, kr_context_errmsg(w.ctx));
    /* NVRTC too, wherever it is found (a wheel's site-packages, a file named
     * by $KREWARD_NVRTC_LIBRARY): the sandbox grants the folders of the
     * libraries loaded by then. A compile job reports it if it is missing */
    kr__nvrtc(w.ctx->cuda_home);
    if (sandbox(&w, &a) != 0)
        return refuse(&w, w.why);
    if (hello(&w) != KR_OK)
        return 3;
    int rc = serve(&w);
    kr_context_free(w.ctx);
    return rc;
}
