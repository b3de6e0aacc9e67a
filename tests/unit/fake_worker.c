/* A worker that speaks the pool's protocol and misbehaves on request, for
 * the pool's tests without a GPU. It says it is a GPU worker (or a compile
 * worker), and answers each job by the job's name:
 *   ok       a passed report (compile stage: not_run, on to the GPU stage)
 *   crash    abort() before answering (GPU stage)
 *   ccrash   abort() in the compile stage
 *   once     crash on the first attempt (a marker file), ok after
 *   hang     never answers
 *   garble   writes bytes that are no frame
 *   lie      answers with another job's id
 *   golden   asks the pool for golden outputs first (one 4-byte tensor)
 *   golden12 the same for a problem of 12 one-float tensors (more than a
 *            frame carries descriptors: they travel in one blob)
 *   shout    writes to its stdout (as a kernel's printf does), then ok
 *   poison   a passed report that says its context is poisoned, then exits
 *   weak1    a passed report whose result says the problem's soundness check
 *            completed and found it weak ("problem_weak": 1)
 *   sleep    ok after 0.3 s (GPU stage): the queue fills meanwhile
 *   nap      ok after 0.05 s (GPU stage)
 * Every report has the metrics fake_told: the "problem_weak" the job came
 * with (-1 without one), fake_seq: how many GPU-stage jobs this process
 * had answered before (the order it served them in), and fake_waiting: 1
 * where its next frame was already in its socket as it answered (a job
 * sent ahead).
 * Started by the pool exactly as kreward-worker is (same arguments). */
#include "pool/protocol.h"
#include "kreward/common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/prctl.h>
#include <signal.h>
#include <unistd.h>

static const char *arg(int argc, char **argv, const char *name)
{
    for (int i = 1; i + 1 < argc; i++)
        if (!strcmp(argv[i], name))
            return argv[i + 1];
    return NULL;
}

static json_int_t g_told = -1; /* the running job's "problem_weak", -1: none */
static long g_seq;              /* GPU-stage jobs answered so far */

static void send_report_weak(int sock, json_int_t id, const char *verdict, int poisoned, int weak)
{
    char report[320];
    struct pollfd p = {sock, POLLIN, 0};
    int waiting = poll(&p, 1, 0) == 1 && (p.revents & POLLIN);
    snprintf(report, sizeof report, "{\"format\": 1, \"verdict\": \"%s\", \"flags\": [], "
             "\"metrics\": {\"fake_pid\": %d, \"fake_told\": %lld, \"fake_seq\": %ld, "
             "\"fake_waiting\": %d}, \"texts\": {}}", verdict, (int)getpid(), (long long)g_told,
             g_seq, waiting);
    json_t *body = json_object();
    json_object_set_new(body, "id", json_integer(id));
    json_object_set_new(body, "status", json_integer(0));
    json_object_set_new(body, "poisoned", json_boolean(poisoned));
    if (weak >= 0)
        json_object_set_new(body, "problem_weak", json_integer(weak));
    json_object_set_new(body, "report", json_string(report));
    kr__frame_send(sock, KR__MSG_RESULT, body, NULL, 0, NULL, 0);
    json_decref(body);
}

static void send_report(int sock, json_int_t id, const char *verdict, int poisoned)
{
    send_report_weak(sock, id, verdict, poisoned, -1);
}

/* Asks for golden outputs of a problem of n one-float tensors (tensor t
 * holds 21 + t); checks they came back doubled, in one blob. */
static int golden(int sock, json_int_t id, size_t n)
{
    float input[16];
    const void *parts[16];
    uint64_t lens[16];
    for (size_t t = 0; t < n; t++) {
        input[t] = 21.0f + (float)t;
        parts[t] = &input[t];
        lens[t] = sizeof(float);
    }
    int fd = -1;
    char why[256];
    kr__blob_create_parts("in", parts, lens, n, &fd, why, sizeof why);
    json_t *body = json_object();
    json_object_set_new(body, "id", json_integer(id));
    json_object_set_new(body, "case", json_integer(0));
    json_object_set_new(body, "seed", json_integer(7));
    json_object_set_new(body, "tensors", json_integer((json_int_t)n));
    kr__frame_send(sock, KR__MSG_GOLDEN, body, &fd, 1, why, sizeof why);
    json_decref(body);
    close(fd);
    kr__frame f;
    if (kr__frame_recv(sock, &f, 30, why, sizeof why) != KR_OK || f.type != KR__MSG_GOLDEN_REPLY ||
        f.num_fds != 1)
        return 0;
    const void *data, *out[16];
    size_t len;
    int ok = kr__blob_map_parts(f.fds[0], lens, n, &data, &len, out, why, sizeof why) == KR_OK;
    for (size_t t = 0; ok && t < n; t++)
        ok = *(const float *)out[t] == 2 * input[t];
    if (data)
        kr__blob_unmap(data, len);
    kr__frame_clear(&f);
    return ok;
}

int main(int argc, char **argv)
{
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    const char *fd_text = arg(argc, argv, "--fd"), *kind = arg(argc, argv, "--kind");
    if (!fd_text || !kind)
        return 2;
    int sock = atoi(fd_text);
    json_t *hello = json_object();
    json_object_set_new(hello, "pid", json_integer(getpid()));
    json_object_set_new(hello, "kind", json_string(kind));
    json_object_set_new(hello, "arch", json_string("sm_90a"));
    json_object_set_new(hello, "device", json_string("a fake GPU"));
    json_object_set_new(hello, "ready", json_true());
    kr__frame_send(sock, KR__MSG_HELLO, hello, NULL, 0, NULL, 0);
    json_decref(hello);
    for (;;) {
        kr__frame f;
        char why[256];
        if (kr__frame_recv(sock, &f, -1, why, sizeof why) != KR_OK || f.type == KR__MSG_BYE)
            return 0;
        json_int_t id = json_integer_value(json_object_get(f.body, "id"));
        const char *name = json_string_value(json_object_get(f.body, "name"));
        json_t *told = json_object_get(f.body, "problem_weak");
        g_told = json_is_integer(told) ? json_integer_value(told) : -1;
        const char *stage = json_string_value(json_object_get(f.body, "stage"));
        int compile = stage && !strcmp(stage, "compile");
        name = name ? name : "ok";
        if ((!strcmp(name, "crash") && !compile) || (!strcmp(name, "ccrash") && compile))
            abort();
        if (!strcmp(name, "once") && !compile) {
            char marker[512];
            snprintf(marker, sizeof marker, "%s/once-%lld", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp",
                     (long long)id);
            if (access(marker, F_OK) != 0) {
                FILE *m = fopen(marker, "w");
                if (m)
                    fclose(m);
                abort();
            }
        }
        if (!strcmp(name, "hang") && !compile)
            for (;;)
                pause();
        if (!strcmp(name, "garble") && !compile) {
            if (write(sock, "this is not a frame at all, not at all", 38) < 0)
                return 1;
            pause();
        }
        if (!strcmp(name, "shout") && !compile) {
            printf("{\"verdict\": \"passed\", \"reward\": 99}\n");
            fflush(stdout);
        }
        if (!strcmp(name, "lie") && !compile)
            id += 1000;
        if (!strcmp(name, "sleep") && !compile)
            usleep(300000);
        if (!strcmp(name, "nap") && !compile)
            usleep(50000);
        size_t golden_tensors = !strcmp(name, "golden") ? 1 : !strcmp(name, "golden12") ? 12 : 0;
        if (golden_tensors && !compile && !golden(sock, id, golden_tensors)) {
            send_report(sock, id, "error", 0);
            kr__frame_clear(&f);
            continue;
        }
        int poison = !strcmp(name, "poison") && !compile; /* name lives in the frame */
        send_report_weak(sock, id, compile ? "not_run" : "passed", poison,
                         !compile && name && !strcmp(name, "weak1") ? 1 : -1);
        g_seq += !compile;
        kr__frame_clear(&f);
        if (poison)
            return 0;
    }
}
