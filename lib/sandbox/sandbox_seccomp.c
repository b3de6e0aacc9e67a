/* The sandbox's seccomp layer (sandbox.c applies it last), through
 * libseccomp: every system call refused and its errno (docs/sandbox.md
 * groups them). */
#include "sandbox/sandbox_impl.h"
#include "sandbox/seccomp_rules.h"

#include <errno.h>
#include <sched.h>
#include <seccomp.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>

typedef struct {
    const char *name;
    int err;
} denied_call;

/* Refused outright, whatever the arguments (docs/sandbox.md groups them). */
/* Running another program: refused unless the spec allows it (a compile
 * phase running nvcc, ninja, ptxas; what they run inherits the filter). */
static const denied_call exec_calls[] = {
    {"execve", EPERM}, {"execveat", EPERM},
};

static const denied_call denied_calls[] = {
    /* other processes' memory */
    {"ptrace", EPERM}, {"process_vm_readv", EPERM}, {"process_vm_writev", EPERM},
    {"pidfd_getfd", EPERM},
    /* the shape of the file system, namespaces */
    {"mount", EPERM}, {"umount2", EPERM}, {"pivot_root", EPERM}, {"chroot", EPERM},
    {"mount_setattr", EPERM}, {"move_mount", EPERM}, {"open_tree", EPERM}, {"fsopen", EPERM},
    {"fsconfig", EPERM}, {"fsmount", EPERM}, {"fspick", EPERM}, {"unshare", EPERM},
    {"setns", EPERM},
    /* the kernel's attack surface */
    {"kexec_load", EPERM}, {"kexec_file_load", EPERM}, {"init_module", EPERM},
    {"finit_module", EPERM}, {"delete_module", EPERM}, {"bpf", EPERM}, {"userfaultfd", EPERM},
    {"keyctl", EPERM}, {"add_key", EPERM}, {"request_key", EPERM}, {"io_uring_setup", EPERM},
    {"io_uring_enter", EPERM}, {"io_uring_register", EPERM}, {"modify_ldt", EPERM},
    /* EACCES, as perf_event_paranoid answers unprivileged callers */
    {"perf_event_open", EACCES},
    /* administration: matters where the worker runs with capabilities (root) */
    {"reboot", EPERM}, {"swapon", EPERM}, {"swapoff", EPERM}, {"syslog", EPERM},
    {"acct", EPERM}, {"settimeofday", EPERM}, {"clock_settime", EPERM}, {"adjtimex", EPERM},
    {"clock_adjtime", EPERM}, {"sethostname", EPERM}, {"setdomainname", EPERM},
    {"iopl", EPERM}, {"ioperm", EPERM}, {"quotactl", EPERM}, {"quotactl_fd", EPERM},
    {"lookup_dcookie", EPERM}, {"open_by_handle_at", EPERM}, {"name_to_handle_at", EPERM},
    {"fanotify_init", EPERM}, {"vhangup", EPERM}, {"mknod", EPERM}, {"mknodat", EPERM},
    /* identity: a worker stays who it is (a change of credentials sets
     * dumpable to fs.suid_dumpable, which may be 2) */
    {"setuid", EPERM}, {"setgid", EPERM}, {"setreuid", EPERM}, {"setregid", EPERM},
    {"setresuid", EPERM}, {"setresgid", EPERM}, {"setfsuid", EPERM}, {"setfsgid", EPERM},
    {"setgroups", EPERM},
    /* the limits stay as set (root could raise them) */
    {"setrlimit", EPERM},
    /* no connection to a named socket of the host (no network sockets at all) */
    {"connect", EPERM},
};

#define LOW32 0xffffffffull

static int sc_rules(scmp_filter_ctx ctx, kr__sc_build *b, unsigned flags)
{
    size_t num_exec = (flags & KR__SANDBOX_ALLOW_EXEC) ? 0 : sizeof exec_calls / sizeof exec_calls[0];
    for (size_t i = 0; i < num_exec; i++)
        if (kr__sc_rule(ctx, b, exec_calls[i].name, exec_calls[i].err, 0, NULL) != 0)
            return -1;
    for (size_t i = 0; i < sizeof denied_calls / sizeof denied_calls[0]; i++)
        if (kr__sc_rule(ctx, b, denied_calls[i].name, denied_calls[i].err, 0, NULL) != 0)
            return -1;
    /* sockets: AF_UNIX only (the worker's own socket pair is inherited).
     * The family is compared on all 64 bits: any high bit refuses. */
    struct scmp_arg_cmp not_unix = kr__sc_arg(0, SCMP_CMP_NE, AF_UNIX, 0);
    if (kr__sc_rule(ctx, b, "socket", EPERM, 1, &not_unix) != 0 ||
        kr__sc_rule(ctx, b, "socketpair", EPERM, 1, &not_unix) != 0)
        return -1;
    /* clone with a namespace flag (clone3 hides its flags in memory:
     * ENOSYS makes the C library fall back to clone) */
    static const uint64_t ns_flags[] = {CLONE_NEWNS, CLONE_NEWCGROUP, CLONE_NEWUTS, CLONE_NEWIPC,
                                        CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET};
    for (size_t i = 0; i < sizeof ns_flags / sizeof ns_flags[0]; i++) {
        struct scmp_arg_cmp ns = kr__sc_arg(0, SCMP_CMP_MASKED_EQ, ns_flags[i], ns_flags[i]);
        if (kr__sc_rule(ctx, b, "clone", EPERM, 1, &ns) != 0)
            return -1;
    }
    if (kr__sc_rule(ctx, b, "clone3", ENOSYS, 0, NULL) != 0)
        return -1;
    /* the kernel reads these int arguments from the low 32 bits */
    struct scmp_arg_cmp sti = kr__sc_arg(1, SCMP_CMP_MASKED_EQ, LOW32, TIOCSTI);
    struct scmp_arg_cmp linux_tty = kr__sc_arg(1, SCMP_CMP_MASKED_EQ, LOW32, TIOCLINUX);
    struct scmp_arg_cmp dumpable = kr__sc_arg(0, SCMP_CMP_MASKED_EQ, LOW32, PR_SET_DUMPABLE);
    struct scmp_arg_cmp new_limit = kr__sc_arg(2, SCMP_CMP_NE, 0, 0);
    if (kr__sc_rule(ctx, b, "ioctl", EPERM, 1, &sti) != 0 ||
        kr__sc_rule(ctx, b, "ioctl", EPERM, 1, &linux_tty) != 0 ||
        kr__sc_rule(ctx, b, "prctl", EPERM, 1, &dumpable) != 0 ||
        kr__sc_rule(ctx, b, "prlimit64", EPERM, 1, &new_limit) != 0)
        return -1;
    return 0;
}

/* Whether this kernel and libseccomp can load the filter (thread sync,
 * kill-process); why not otherwise. */
int kr__sandbox_seccomp_available(char *why, size_t why_size)
{
    if (prctl(PR_GET_SECCOMP, 0, 0, 0, 0) < 0 && errno == EINVAL) {
        snprintf(why, why_size, "this kernel has no seccomp (CONFIG_SECCOMP)");
        return 0;
    }
    unsigned api = seccomp_api_get();
    if (api < 3) {
        snprintf(why, why_size, "seccomp filters with thread sync and kill-process need Linux "
                                ">= 4.14 (libseccomp API level %u)", api);
        return 0;
    }
    return 1;
}

int kr__sandbox_apply_seccomp(unsigned flags, kr__sandbox_status *st, char *why,
                              size_t why_size)
{
    if (!kr__sandbox_seccomp_available(st->seccomp_why, sizeof st->seccomp_why))
        return 0;
    scmp_filter_ctx ctx = kr__sc_new(why, why_size);
    if (!ctx)
        return -1;
    kr__sc_build b;
    memset(&b, 0, sizeof b);
    b.why = why;
    b.why_size = why_size;
    int rc = -1;
    if (sc_rules(ctx, &b, flags) != 0)
        goto out;
    int err = seccomp_load(ctx);
    if (err != 0) {
        snprintf(why, why_size, "seccomp_load: %s", strerror(-err));
        goto out;
    }
    st->seccomp = 1;
    st->seccomp_why[0] = '\0';
    if (b.unknown[0])
        snprintf(st->seccomp_why, sizeof st->seccomp_why,
                 "applied; this libseccomp does not know %s (not refused)", b.unknown);
    rc = 0;
out:
    seccomp_release(ctx);
    return rc;
}
