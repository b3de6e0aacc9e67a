/* The isolation filter (kr_sandbox_isolate, lib/sandbox/sandbox_isolate.c),
 * entered in forked children: everything a candidate's process could do to
 * another process is refused (each with the call that would do it), what
 * it does to itself still works, and a thread that ran before the filter
 * is under it too. Where the kernel has no seccomp the test says so and is
 * skipped, never passed. Children end with _exit. */
#include "helpers.h"

#include "kreward/sys/sandbox.h"
#include "sandbox/seccomp_rules.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#ifndef SYS_pidfd_send_signal
#define SYS_pidfd_send_signal 424
#endif
#ifndef SYS_ioprio_set
#define SYS_ioprio_set 251
#endif

/* the child's answer: one byte per check, 'y' (as expected) or 'n' */
#define CHECKS 24

static int refused(long rc)
{
    return rc == -1 && errno == EPERM;
}

typedef struct {
    pid_t target;
    int go[2]; /* the filter is in: a byte on go[1] */
} early_thread;

static void *early(void *arg)
{
    /* started before the filter: TSYNC puts it under it all the same */
    early_thread *e = arg;
    char c;
    if (read(e->go[0], &c, 1) != 1)
        return NULL;
    long rc = kill(e->target, 0);
    return (void *)(intptr_t)refused(rc);
}

static void child(int out, pid_t other, int *skip)
{
    char res[CHECKS];
    memset(res, '-', sizeof res);
    pthread_t t;
    early_thread e = {other, {-1, -1}};
    if (pipe(e.go) != 0 || pthread_create(&t, NULL, early, &e) != 0)
        _exit(3);
    char *status = NULL, *why = NULL;
    int rc = kr_sandbox_isolate(&status, &why);
    if (rc != KR_OK || !status || !strstr(status, "\"applied\":true")) {
        *skip = 1;
        char msg[300];
        snprintf(msg, sizeof msg, "S%s %s", status ? status : "", why ? why : "");
        (void)!write(out, msg, strlen(msg));
        _exit(0);
    }
    pid_t self = getpid();
    int i = 0;
    /* another process: refused */
    res[i++] = refused(kill(other, 0)) ? 'y' : 'n';
    res[i++] = refused(kill(getppid(), 0)) ? 'y' : 'n';
    res[i++] = refused(kill(-1, 0)) ? 'y' : 'n';
    res[i++] = refused(syscall(SYS_tgkill, other, other, 0)) ? 'y' : 'n';
    res[i++] = refused(setpriority(PRIO_PROCESS, (id_t)other, 10)) ? 'y' : 'n';
    res[i++] = refused(setpriority(PRIO_PGRP, 0, 10)) ? 'y' : 'n';
    res[i++] = refused(setpriority(PRIO_USER, 0, 10)) ? 'y' : 'n';
    cpu_set_t cpus;
    CPU_ZERO(&cpus);
    CPU_SET(0, &cpus);
    res[i++] = refused(sched_setaffinity(other, sizeof cpus, &cpus)) ? 'y' : 'n';
    struct sched_param sp = {0};
    res[i++] = refused(sched_setscheduler(other, SCHED_OTHER, &sp)) ? 'y' : 'n';
    res[i++] = refused(syscall(SYS_ioprio_set, 1, other, 0)) ? 'y' : 'n';
    res[i++] = refused(syscall(SYS_ioprio_set, 2, 0, 0)) ? 'y' : 'n'; /* a process group */
    struct rlimit lim = {64, 64};
    res[i++] = refused(prlimit(other, RLIMIT_NOFILE, &lim, NULL)) ? 'y' : 'n';
    long pidfd = syscall(SYS_pidfd_open, other, 0);
    res[i++] = (pidfd < 0 || refused(syscall(SYS_pidfd_send_signal, (int)pidfd, SIGKILL, NULL, 0)))
                   ? 'y' : 'n';
    res[i++] = refused(ptrace(PTRACE_ATTACH, other, NULL, NULL)) ? 'y' : 'n';
    char buf[8];
    struct iovec local = {buf, sizeof buf}, remote = {(void *)0x1000, sizeof buf};
    res[i++] = refused(process_vm_readv(other, &local, 1, &remote, 1, 0)) ? 'y' : 'n';
    /* a limit read (no new one) is harmless */
    struct rlimit old;
    res[i++] = prlimit(other, RLIMIT_NOFILE, NULL, &old) == 0 ? 'y' : 'n';
    /* itself: allowed */
    res[i++] = kill(self, 0) == 0 ? 'y' : 'n';
    res[i++] = kill(0, 0) == 0 ? 'y' : 'n';
    res[i++] = setpriority(PRIO_PROCESS, 0, 1) == 0 ? 'y' : 'n';
    res[i++] = setpriority(PRIO_PROCESS, (id_t)self, 2) == 0 ? 'y' : 'n';
    res[i++] = sched_getaffinity(0, sizeof cpus, &cpus) == 0 &&
                       sched_setaffinity(self, sizeof cpus, &cpus) == 0 ? 'y' : 'n';
    res[i++] = prlimit(0, RLIMIT_NOFILE, NULL, &old) == 0 &&
                       prlimit(self, RLIMIT_NOFILE, &old, NULL) == 0 ? 'y' : 'n';
    /* the thread that ran before the filter is under it */
    void *ret = NULL;
    res[i++] = write(e.go[1], "g", 1) == 1 && pthread_join(t, &ret) == 0 && ret ? 'y' : 'n';
    /* and a program it starts would be too (inherited): a fork is */
    pid_t kid = fork();
    if (kid == 0)
        _exit(refused(kill(other, 0)) ? 0 : 1);
    int kst = -1;
    res[i++] = kid > 0 && waitpid(kid, &kst, 0) == kid && WIFEXITED(kst) &&
                       WEXITSTATUS(kst) == 0 ? 'y' : 'n';
    (void)!write(out, res, sizeof res);
    _exit(0);
}

static void isolation_refuses_other_processes_only(void **state)
{
    (void)state;
    /* another process of the same user to aim at: a sleeping child */
    pid_t other = fork();
    assert_true(other >= 0);
    if (other == 0) {
        pause();
        _exit(0);
    }
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(fds[0]);
        int skip = 0;
        child(fds[1], other, &skip);
    }
    close(fds[1]);
    char got[400] = "";
    ssize_t n = read(fds[0], got, sizeof got - 1);
    close(fds[0]);
    int st;
    waitpid(pid, &st, 0);
    /* the other process is alive: nothing reached it */
    assert_int_equal(kill(other, 0), 0);
    kill(other, SIGKILL);
    waitpid(other, NULL, 0);
    assert_true(n > 0);
    got[n] = '\0';
    if (got[0] == 'S') {
        print_message("kr_sandbox_isolate did not apply here (%s): skipped\n", got + 1);
        skip();
    }
    assert_int_equal(n, CHECKS);
    for (int i = 0; i < CHECKS; i++)
        if (got[i] != 'y' && got[i] != '-')
            fail_msg("check %d of the isolation filter failed (got %.*s)", i, CHECKS, got);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

/* The single-comparison rules that stand for "neither 0 nor self"
 * (libseccomp takes one comparison per argument in a rule): any rule holds
 * exactly for the values the filter must refuse, over pids of every shape
 * and values around, below, inside and far above them. */
static int rules_refuse(const kr__pid_rule *r, size_t n, uint64_t v)
{
    for (size_t i = 0; i < n; i++) {
        if (r[i].op == SCMP_CMP_GT ? v > r[i].a : (v & r[i].a) == r[i].b)
            return 1;
    }
    return 0;
}

static void pid_rules_stand_for_not_zero_and_not_self(void **state)
{
    (void)state;
    uint64_t pids[200] = {1, 2, 3, 4, 5, 7, 8, 255, 256, 1000, 32767, 32768, 4194303, 4194304,
                          (1ull << 31) - 1};
    size_t np = 15;
    uint64_t x = 0x9E3779B97F4A7C15ull;
    while (np < sizeof pids / sizeof pids[0]) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        pids[np++] = 1 + x % (1ull << 22);
    }
    for (size_t i = 0; i < np; i++) {
        uint64_t p = pids[i];
        kr__pid_rule r[KR__MAX_PID_RULES];
        size_t n = kr__pid_rules(p, r, KR__MAX_PID_RULES);
        assert_true(n <= KR__MAX_PID_RULES);
        uint64_t probes[300] = {0, p, p - 1, p + 1, 1, ~0ull, p | (1ull << 40), p + (1ull << 32),
                                (uint64_t)-(int64_t)p, 1ull << 63, p << 1, p >> 1};
        size_t nv = 12;
        while (nv < sizeof probes / sizeof probes[0]) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            /* a part of self's bits, a value near it, one anywhere */
            uint64_t v = nv % 3 == 0 ? (p & x) : nv % 3 == 1 ? x % (2 * p + 2) : x;
            probes[nv++] = v;
        }
        for (size_t k = 0; k < nv; k++) {
            uint64_t v = probes[k];
            if (rules_refuse(r, n, v) != (v != 0 && v != p))
                fail_msg("pid %llu: value %llu is %s by the rules", (unsigned long long)p,
                         (unsigned long long)v, rules_refuse(r, n, v) ? "refused" : "allowed");
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(pid_rules_stand_for_not_zero_and_not_self),
        cmocka_unit_test(isolation_refuses_other_processes_only),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
