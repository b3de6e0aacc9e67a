/* Building seccomp filters with libseccomp: what the workers' filter
 * (sandbox_seccomp.c) and the isolation filter (sandbox_isolate.c) share. */
#include "sandbox/seccomp_rules.h"

#include <stdio.h>
#include <string.h>

struct scmp_arg_cmp kr__sc_arg(unsigned arg, enum scmp_compare op, scmp_datum_t a,
                               scmp_datum_t b)
{
    struct scmp_arg_cmp c = {.arg = arg, .op = op, .datum_a = a, .datum_b = b};
    return c;
}

int kr__sc_rule(scmp_filter_ctx ctx, kr__sc_build *b, const char *name, int err, unsigned n,
                const struct scmp_arg_cmp *cmp)
{
    int nr = seccomp_syscall_resolve_name(name);
    if (nr == __NR_SCMP_ERROR) {
        size_t used = strlen(b->unknown);
        snprintf(b->unknown + used, sizeof b->unknown - used, "%s%s", used ? ", " : "", name);
        return 0;
    }
    if (nr < 0)
        return 0; /* not a system call of this architecture: nothing to refuse */
    int rc = seccomp_rule_add_array(ctx, (uint32_t)SCMP_ACT_ERRNO((unsigned)err), nr, n, cmp);
    if (rc != 0) {
        snprintf(b->why, b->why_size, "seccomp rule for %s: %s", name, strerror(-rc));
        return -1;
    }
    return 0;
}

scmp_filter_ctx kr__sc_new(char *why, size_t why_size)
{
    scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
    if (!ctx) {
        snprintf(why, why_size, "seccomp_init failed");
        return NULL;
    }
    /* only the native system call table: a 32-bit (ia32) call, or an x32
     * one, would pass a filter written for the 64-bit numbers */
    if (seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS) != 0 ||
        seccomp_attr_set(ctx, SCMP_FLTATR_CTL_TSYNC, 1) != 0 ||
        seccomp_attr_set(ctx, SCMP_FLTATR_CTL_NNP, 1) != 0) {
        snprintf(why, why_size, "seccomp: cannot set the filter's attributes");
        seccomp_release(ctx);
        return NULL;
    }
    return ctx;
}
