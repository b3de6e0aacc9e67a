/* The sandbox a kreward-worker puts itself in (sandbox/sandbox.h): no new
 * privileges, no core dumps, resource limits, Landlock through its raw
 * system calls (no library), and a seccomp filter through libseccomp. Each
 * layer is applied where the kernel offers it, and what was not applied is
 * said in the status. docs/sandbox.md lists every grant and every refusal
 * and says why. This file holds the order and the limits; the layers are
 * sandbox_landlock.c and sandbox_seccomp.c. */
#include "sandbox/sandbox_impl.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>

/* ---- resource limits ---- */

static int set_limit(int resource, const char *name, rlim_t soft, rlim_t hard, char *why,
                     size_t why_size)
{
    struct rlimit cur;
    if (getrlimit(resource, &cur) != 0) {
        snprintf(why, why_size, "getrlimit(%s): %s", name, strerror(errno));
        return -1;
    }
    /* lowering only: raising a limit is not the sandbox's business */
    struct rlimit lim = {soft, hard};
    if (lim.rlim_max > cur.rlim_max)
        lim.rlim_max = cur.rlim_max;
    if (lim.rlim_cur > lim.rlim_max)
        lim.rlim_cur = lim.rlim_max;
    /* already there (a sandbox applied before): nothing to set, and the
     * earlier filter would refuse setrlimit */
    if (lim.rlim_cur >= cur.rlim_cur && lim.rlim_max >= cur.rlim_max)
        return 0;
    if (setrlimit(resource, &lim) != 0) {
        int err = errno;
        if (err == EPERM && prctl(PR_GET_SECCOMP, 0, 0, 0, 0) == 2)
            snprintf(why, why_size, "setrlimit(%s): refused by the filter of a sandbox applied "
                                    "before (limits are set when first entering)", name);
        else
            snprintf(why, why_size, "setrlimit(%s): %s", name, strerror(err));
        return -1;
    }
    return 0;
}

static int apply_limits(const kr__sandbox_spec *spec, char *why, size_t why_size)
{
    if (set_limit(RLIMIT_CORE, "RLIMIT_CORE", 0, 0, why, why_size) != 0)
        return -1;
    if (spec->address_space_bytes &&
        set_limit(RLIMIT_AS, "RLIMIT_AS", (rlim_t)spec->address_space_bytes,
                  (rlim_t)spec->address_space_bytes, why, why_size) != 0)
        return -1;
    if (spec->cpu_seconds) {
        /* counted from now (RLIMIT_CPU counts the CPU time already used):
         * SIGXCPU at the limit, which a worker may catch to report, and
         * SIGKILL a second later */
        struct rusage ru;
        rlim_t used = 0;
        if (getrusage(RUSAGE_SELF, &ru) == 0)
            used = (rlim_t)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec + 1);
        rlim_t soft = used + (rlim_t)spec->cpu_seconds;
        if (set_limit(RLIMIT_CPU, "RLIMIT_CPU", soft, soft + 1, why, why_size) != 0)
            return -1;
    }
    /* a process that may write files (a ModelNew worker's build folder, its
     * log) cannot grow one past this and fill the caller's disk with it:
     * SIGXFSZ ends it (EFBIG where it ignores the signal) */
    if (spec->file_bytes &&
        set_limit(RLIMIT_FSIZE, "RLIMIT_FSIZE", (rlim_t)spec->file_bytes, (rlim_t)spec->file_bytes,
                  why, why_size) != 0)
        return -1;
    if (spec->open_files &&
        set_limit(RLIMIT_NOFILE, "RLIMIT_NOFILE", (rlim_t)spec->open_files,
                  (rlim_t)spec->open_files, why, why_size) != 0)
        return -1;
    return 0;
}

/* ---- the whole ---- */

int kr__sandbox_apply(const kr__sandbox_spec *spec, kr__sandbox_status *status, char *why,
                      size_t why_size)
{
    return kr__sandbox_apply_flags(spec, 0, status, why, why_size);
}

int kr__sandbox_apply_flags(const kr__sandbox_spec *spec, unsigned flags,
                            kr__sandbox_status *status, char *why, size_t why_size)
{
    kr__sandbox_status local;
    kr__sandbox_status *st = status ? status : &local;
    memset(st, 0, sizeof *st);
    if (why_size)
        why[0] = '\0';
    if (!spec) {
        snprintf(why, why_size, "no sandbox spec");
        return -1;
    }
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) {
        snprintf(why, why_size, "PR_SET_NO_NEW_PRIVS: %s", strerror(errno));
        return -1;
    }
    st->no_new_privs = 1;
    /* no core file, no ptrace by same-user processes, /proc/<pid> owned by
     * root: the candidate's memory stays in this process */
    if (prctl(PR_GET_DUMPABLE, 0, 0, 0, 0) != 0 && prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0) {
        snprintf(why, why_size, "PR_SET_DUMPABLE: %s", strerror(errno));
        return -1;
    }
    if (apply_limits(spec, why, why_size) != 0)
        return -1;
    st->rlimits = 1;
    /* the filter last: it refuses setrlimit and PR_SET_DUMPABLE, used above */
    if (kr__sandbox_apply_landlock(spec, flags, st, why, why_size) != 0)
        return -1;
    if (kr__sandbox_apply_seccomp(flags, st, why, why_size) != 0)
        return -1;
    return 0;
}

void kr__sandbox_probe(kr__sandbox_status *status)
{
    if (!status)
        return;
    memset(status, 0, sizeof *status);
    status->no_new_privs = prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) == 1;
    status->landlock_abi =
        kr__sandbox_landlock_abi(status->landlock_why, sizeof status->landlock_why);
    kr__sandbox_seccomp_available(status->seccomp_why, sizeof status->seccomp_why);
}
