/* kr_sandbox_isolate: the isolation filter a ModelNew worker puts around
 * its candidate (docs/kernelbench.md, "No candidate process can reach
 * another process"), sandboxed or not. The candidate's Python runs in the
 * worker; with this filter nothing it starts can signal, re-prioritise,
 * re-pin, trace or read another process: not its supervisor (which would
 * end the supervision of its children), not the baseline's worker (whose
 * time it would slow), not the caller. Its own process stays its own to
 * manage (pid 0 or its own pid), as torch and CUDA need. */
#include "kreward/sys/sandbox.h"
#include "sandbox/sandbox_impl.h"
#include "sandbox/seccomp_rules.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Calls whose first argument is the process (or thread group) acted on:
 * refused for any but 0 (itself; for kill its process group, which is the
 * worker's own session) and its own pid. */
static const char *const pid_first[] = {
    "kill", "tkill", "tgkill", "rt_sigqueueinfo", "rt_tgsigqueueinfo", "sched_setparam",
    "sched_setscheduler", "sched_setaffinity", "sched_setattr", "migrate_pages", "move_pages",
};

/* Refused whatever the arguments: a pidfd names any process; tracing and
 * reading another's memory. */
static const char *const refused[] = {
    "pidfd_send_signal", "process_madvise", "process_mrelease", "ptrace", "process_vm_readv",
    "process_vm_writev", "pidfd_getfd",
};

#define PRIO_PROCESS_WHICH 0      /* setpriority's PRIO_PROCESS */
#define IOPRIO_WHO_PROCESS_WHICH 1 /* ioprio_set's IOPRIO_WHO_PROCESS */

/* libseccomp takes one comparison per argument in a rule (2.5: two on one
 * argument are EINVAL), and a rule's comparisons must all hold. "Not 0 and
 * not self" is two comparisons on one argument, so it is said as rules
 * of one comparison each, any of which refuses (kr__pid_rules): the value
 * is above self; or it has a bit below self's highest that self has not;
 * or, a part of self's bits but neither none nor all of them, it has one
 * of self's bits and not the next one (going round self's bits in order,
 * such a subset leaves itself somewhere). tests/unit/test_isolate.c checks
 * the rules against the set they stand for. */
size_t kr__pid_rules(uint64_t self, kr__pid_rule *out, size_t cap)
{
    size_t n = 0;
    int top = 63;
    while (top > 0 && !(self >> top & 1))
        top--;
    if (n < cap)
        out[n] = (kr__pid_rule){SCMP_CMP_GT, self, 0};
    n++;
    int bits[64], k = 0;
    for (int i = 0; i <= top; i++) {
        uint64_t bit = 1ull << i;
        if (self & bit) {
            bits[k++] = i;
        } else if (i < top) {
            if (n < cap)
                out[n] = (kr__pid_rule){SCMP_CMP_MASKED_EQ, bit, bit};
            n++;
        }
    }
    for (int t = 0; k >= 2 && t < k; t++) {
        uint64_t in = 1ull << bits[t], next = 1ull << bits[(t + 1) % k];
        if (n < cap)
            out[n] = (kr__pid_rule){SCMP_CMP_MASKED_EQ, in | next, in};
        n++;
    }
    return n;
}

/* Refuses name where argument arg is neither 0 nor self (and extra, if
 * given, holds too). */
static int refuse_others(scmp_filter_ctx ctx, kr__sc_build *b, const char *name, unsigned arg,
                         uint64_t self, const struct scmp_arg_cmp *extra)
{
    kr__pid_rule rules[KR__MAX_PID_RULES];
    size_t n = kr__pid_rules(self, rules, KR__MAX_PID_RULES);
    for (size_t i = 0; i < n; i++) {
        struct scmp_arg_cmp cmp[2] = {kr__sc_arg(arg, rules[i].op, rules[i].a, rules[i].b)};
        unsigned count = 1;
        if (extra)
            cmp[count++] = *extra;
        if (kr__sc_rule(ctx, b, name, EPERM, count, cmp) != 0)
            return -1;
    }
    return 0;
}

static int isolation_rules(scmp_filter_ctx ctx, kr__sc_build *b, uint64_t self)
{
    for (size_t i = 0; i < sizeof pid_first / sizeof pid_first[0]; i++)
        if (refuse_others(ctx, b, pid_first[i], 0, self, NULL) != 0)
            return -1;
    /* (which, who): only one process, itself */
    struct scmp_arg_cmp not_prio_process = kr__sc_arg(0, SCMP_CMP_NE, PRIO_PROCESS_WHICH, 0);
    struct scmp_arg_cmp not_io_process = kr__sc_arg(0, SCMP_CMP_NE, IOPRIO_WHO_PROCESS_WHICH, 0);
    if (kr__sc_rule(ctx, b, "setpriority", EPERM, 1, &not_prio_process) != 0 ||
        refuse_others(ctx, b, "setpriority", 1, self, NULL) != 0 ||
        kr__sc_rule(ctx, b, "ioprio_set", EPERM, 1, &not_io_process) != 0 ||
        refuse_others(ctx, b, "ioprio_set", 1, self, NULL) != 0)
        return -1;
    /* prlimit64 reading a limit (new_limit NULL) is harmless; setting one:
     * itself only */
    struct scmp_arg_cmp sets = kr__sc_arg(2, SCMP_CMP_NE, 0, 0);
    if (refuse_others(ctx, b, "prlimit64", 0, self, &sets) != 0)
        return -1;
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++)
        if (kr__sc_rule(ctx, b, refused[i], EPERM, 0, NULL) != 0)
            return -1;
    return 0;
}

static int give(char **out, json_t *o)
{
    int rc = KR_OK;
    if (out) {
        *out = json_dumps(o, JSON_COMPACT);
        rc = *out ? KR_OK : KR_ENOMEM;
    }
    json_decref(o);
    return rc;
}

int kr_sandbox_isolate(char **status_json, char **why)
{
    if (status_json)
        *status_json = NULL;
    if (why)
        *why = NULL;
    char reason[256] = "";
    if (!kr__sandbox_seccomp_available(reason, sizeof reason))
        return give(status_json, json_pack("{sbss}", "applied", 0, "why", reason));
    scmp_filter_ctx ctx = kr__sc_new(reason, sizeof reason);
    if (!ctx)
        goto failed;
    kr__sc_build b;
    memset(&b, 0, sizeof b);
    b.why = reason;
    b.why_size = sizeof reason;
    int rc = isolation_rules(ctx, &b, (uint64_t)getpid());
    if (rc == 0 && (rc = seccomp_load(ctx)) != 0)
        snprintf(reason, sizeof reason, "seccomp_load: %s", strerror(-rc));
    seccomp_release(ctx);
    if (rc != 0)
        goto failed;
    json_t *o = json_pack("{sb}", "applied", 1);
    if (b.unknown[0])
        json_object_set_new(o, "unknown", json_string(b.unknown));
    return give(status_json, o);
failed:
    if (why)
        *why = strdup(reason[0] ? reason : "the isolation filter could not be applied");
    return KR_EUNSUPPORTED;
}
