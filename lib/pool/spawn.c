/* Starting and stopping worker processes: posix_spawn (never fork of a
 * caller that may hold CUDA state) with a socket pair, a minimal
 * environment, and only the pool's end of the pair shared. */
#include "pool/pool_impl.h"
#include "common/clock.h"
#include "common/strbuf.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define WORKER_FD 3

static int executable(const char *path)
{
    return path && access(path, X_OK) == 0;
}

/* The option, $KREWARD_WORKER, next to the library (installed, build tree,
 * Python package), then PATH. */
char *kr__worker_find(const char *option, char *why, size_t why_size)
{
    if (option || ((option = getenv("KREWARD_WORKER")) && *option)) {
        if (executable(option))
            return kr__strdup(option);
        snprintf(why, why_size, "the worker %s '%s' is not an executable file",
                 option == getenv("KREWARD_WORKER") ? "named by $KREWARD_WORKER" : "path", option);
        return NULL;
    }
    Dl_info info;
    if (dladdr((void *)kr__worker_find, &info) && info.dli_fname) {
        char lib[4096], *dir;
        snprintf(lib, sizeof lib, "%s", info.dli_fname);
        dir = dirname(lib);
        const char *rel[] = {"kreward-worker", "../tools/kreward-worker",
                             "../libexec/kreward/kreward-worker", "../bin/kreward-worker"};
        for (size_t i = 0; i < sizeof rel / sizeof rel[0]; i++) {
            char path[4200];
            snprintf(path, sizeof path, "%s/%s", dir, rel[i]);
            if (executable(path))
                return kr__strdup(path);
        }
    }
    const char *path = getenv("PATH");
    char *copy = kr__strdup(path ? path : "/usr/local/bin:/usr/bin:/bin");
    for (char *save = NULL, *d = copy ? strtok_r(copy, ":", &save) : NULL; d;
         d = strtok_r(NULL, ":", &save)) {
        char candidate[4200];
        snprintf(candidate, sizeof candidate, "%s/kreward-worker", d);
        if (executable(candidate)) {
            free(copy);
            return kr__strdup(candidate);
        }
    }
    free(copy);
    snprintf(why, why_size, "kreward-worker not found (set KREWARD_WORKER, pass worker_path, or "
             "install it next to libkreward or on PATH)");
    return NULL;
}

/* The entry of the caller's CUDA_VISIBLE_DEVICES the worker should see as
 * its only device (the caller's ordinals are positions in that list). */
static void visible_device(int ordinal, char *out, size_t size)
{
    const char *env = getenv("CUDA_VISIBLE_DEVICES");
    if (!env) {
        snprintf(out, size, "%d", ordinal);
        return;
    }
    char *copy = kr__strdup(env);
    int i = 0;
    snprintf(out, size, "%d", ordinal);
    for (char *save = NULL, *t = copy ? strtok_r(copy, ",", &save) : NULL; t;
         t = strtok_r(NULL, ",", &save), i++)
        if (i == ordinal) {
            snprintf(out, size, "%s", t);
            break;
        }
    free(copy);
}

/* Appends NAME=VALUE to env (storage holds the strings); -1 when storage
 * is full (the worker is not started with part of its environment). */
static int env_add(char **env, size_t *n, char *storage, size_t size, size_t *used,
                   const char *name, const char *value)
{
    int k = snprintf(storage + *used, size - *used, "%s=%s", name, value);
    if (k < 0 || (size_t)k >= size - *used)
        return -1;
    env[(*n)++] = storage + *used;
    *used += (size_t)k + 1;
    return 0;
}

/* A minimal environment: what CUDA and the loader need, nothing of the
 * caller's secrets (API keys live in trainers' environments). The
 * variables the pool sets come first; NULL with errno E2BIG when the
 * caller's part does not fit, ENOMEM without memory. */
static char **environment(const kr__worker *w, char *storage, size_t size)
{
    /* the explicit NVRTC/CUPTI files and the disk cache cap too: a worker
     * must load what its caller would (lib/common/dynlib.h) */
    static const char *const passed[] = {"LD_LIBRARY_PATH", "CUDA_DEVICE_ORDER", "KREWARD_CUPTI",
                                         "KREWARD_NVRTC_LIBRARY", "KREWARD_CUPTI_LIBRARY",
                                         "KREWARD_CUDA_MAJOR", "KREWARD_CACHE_MAX_BYTES",
                                         "TMPDIR", "LANG", "KR_PROFILE", "KR_WAIT_SPIN_US",
                                         "KR_FAST_REFERENCE", "KR_GEN_SPECIALISED", "KR_BENCH_AHEAD",
                                         "KR_BENCH_PAIR", "KR_REFERENCE_QUEUED"};
    size_t num_passed = sizeof passed / sizeof passed[0];
    char **env = calloc(num_passed + 3, sizeof *env); /* + ours + NULL */
    size_t n = 0, used = 0;
    if (!env) {
        errno = ENOMEM;
        return NULL;
    }
    char dev[64] = ""; /* compile workers see no GPU */
    if (w->kind == KR__GPU_WORKER)
        visible_device(w->device, dev, sizeof dev);
    int full = env_add(env, &n, storage, size, &used, "CUDA_VISIBLE_DEVICES", dev) ||
               env_add(env, &n, storage, size, &used, "CUDA_CACHE_DISABLE", "1");
    for (size_t i = 0; i < num_passed && !full; i++)
        if (getenv(passed[i]))
            full = env_add(env, &n, storage, size, &used, passed[i], getenv(passed[i]));
    if (full) {
        free(env);
        errno = E2BIG;
        return NULL;
    }
    return env;
}

int kr__worker_spawn(kr_pool *pool, kr__worker *w, char *why, size_t why_size)
{
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
        snprintf(why, why_size, "socketpair: %s", strerror(errno));
        return KR_EIO;
    }
    char parent[32], memory[32];
    snprintf(parent, sizeof parent, "%ld", (long)getpid());
    snprintf(memory, sizeof memory, "%llu", (unsigned long long)pool->o.compile_memory_bytes);
    const char *argv[24];
    size_t a = 0;
    argv[a++] = pool->worker_path;
    argv[a++] = "--kind";
    argv[a++] = w->kind == KR__GPU_WORKER ? "gpu" : "compile";
    argv[a++] = "--fd";
    argv[a++] = "3";
    argv[a++] = "--parent";
    argv[a++] = parent;
    argv[a++] = "--cuda-home";
    argv[a++] = pool->cuda_home;
    argv[a++] = "--cache-dir";
    argv[a++] = pool->cache_dir;
    argv[a++] = "--compile-memory";
    argv[a++] = memory;
    if (w->kind == KR__COMPILE_WORKER && pool->arch[0]) {
        argv[a++] = "--arch";
        argv[a++] = pool->arch;
    }
    if (pool->o.flags & KR_POOL_NO_SANDBOX)
        argv[a++] = "--no-sandbox";
    argv[a] = NULL;
    char storage[8192];
    char **env = environment(w, storage, sizeof storage);
    int env_err = env ? 0 : errno;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, sv[1], WORKER_FD); /* dup2 clears CLOEXEC */
    posix_spawn_file_actions_addclosefrom_np(&fa, WORKER_FD + 1);
    /* the candidate's device printf lands on the worker's stdout: never on
     * the caller's (a kernel must not write the trainer's log or forge the
     * CLI's JSON); stdin is nobody's. stderr stays: only the worker writes it */
    posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    sigset_t none, all;
    sigemptyset(&none);
    sigfillset(&all);
    posix_spawnattr_setsigmask(&attr, &none);     /* the caller's blocked signals stay its own */
    posix_spawnattr_setsigdefault(&attr, &all);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
    int err = env ? posix_spawn(&w->pid, pool->worker_path, &fa, &attr, (char *const *)argv, env)
                  : env_err;
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&attr);
    free(env);
    close(sv[1]);
    if (err != 0) {
        close(sv[0]);
        w->pid = 0;
        snprintf(why, why_size, "cannot start %s: %s%s", pool->worker_path, strerror(err),
                 err == E2BIG ? " (the worker's environment is over 8 KiB: LD_LIBRARY_PATH or "
                                "the KREWARD_* paths too long)" : "");
        return KR_EIO;
    }
    w->sock = sv[0];
    w->state = KR__W_STARTING;
    w->started = kr__now();
    return KR_OK;
}

static void take_hello(kr__worker *w, json_t *body)
{
    snprintf(w->arch, sizeof w->arch, "%s",
             json_string_value(json_object_get(body, "arch")) ? json_string_value(json_object_get(body, "arch")) : "");
    snprintf(w->device_name, sizeof w->device_name, "%s",
             json_string_value(json_object_get(body, "device")) ? json_string_value(json_object_get(body, "device")) : "");
    json_decref(w->sandbox);
    w->sandbox = json_incref(json_object_get(body, "sandbox"));
}

int kr__worker_hello(kr_pool *pool, kr__worker *w, double timeout_s, char *why, size_t why_size)
{
    (void)pool;
    kr__frame f;
    int rc = kr__frame_recv(w->sock, &f, timeout_s, why, why_size);
    if (rc != KR_OK)
        return rc;
    if (f.type != KR__MSG_HELLO || !json_is_true(json_object_get(f.body, "ready"))) {
        const char *m = json_string_value(json_object_get(f.body, "why"));
        snprintf(why, why_size, "%s", m ? m : "the worker did not say it is ready");
        kr__frame_clear(&f);
        return KR_EUNAVAILABLE;
    }
    take_hello(w, f.body);
    kr__frame_clear(&f);
    return KR_OK;
}

void kr__worker_kill(kr__worker *w)
{
    if (w->pid > 0) {
        kill(w->pid, SIGKILL);
        while (waitpid(w->pid, NULL, 0) < 0 && errno == EINTR)
            ;
    }
    if (w->sock >= 0)
        close(w->sock);
    w->pid = 0;
    w->sock = -1;
    w->state = KR__W_DEAD;
    w->job = NULL;
    /* a job sent ahead never started here: back to the queue, no attempt
     * counted (whatever ended the worker was its running job's doing) */
    if (w->ahead) {
        w->ahead->state = KR__JOB_GPU_QUEUED;
        w->ahead = NULL;
    }
    w->write_closed = 0; /* for the worker started in its place */
    w->last_problem[0] = '\0'; /* its successor holds nothing of the problem warm */
}
