/* Building seccomp filters with libseccomp, for the two filters of the
 * sandbox: the workers' own (sandbox_seccomp.c) and the isolation filter a
 * ModelNew worker puts around its candidate (sandbox_isolate.c). */
#ifndef KR_SECCOMP_RULES_H
#define KR_SECCOMP_RULES_H

#include <seccomp.h>
#include <stddef.h>
#include <stdint.h>

typedef struct kr__sc_build {
    char *why;
    size_t why_size;
    char unknown[128]; /* names this libseccomp does not know */
} kr__sc_build;

/* One argument comparison, every field named: libseccomp's SCMP_An macros
 * leave datum_b to a partial initializer, which older headers turn into a
 * -Wmissing-field-initializers error. */
struct scmp_arg_cmp kr__sc_arg(unsigned arg, enum scmp_compare op, scmp_datum_t a,
                               scmp_datum_t b);
/* Refuses a system call by name with err where the n comparisons all hold
 * (none: always). A name this libseccomp does not know is recorded in
 * b->unknown, one this architecture lacks is skipped; -1 with b->why when
 * libseccomp refuses the rule. */
int kr__sc_rule(scmp_filter_ctx ctx, kr__sc_build *b, const char *name, int err, unsigned n,
                const struct scmp_arg_cmp *cmp);
/* A filter that allows what no rule refuses, for the native system call
 * table only (a 32-bit or x32 call kills the process), synchronised over
 * every thread, with no_new_privs; NULL with why. */
scmp_filter_ctx kr__sc_new(char *why, size_t why_size);

/* One comparison of an argument with the calling process's pid, for the
 * isolation filter (sandbox_isolate.c): op with a and b as
 * struct scmp_arg_cmp's datum_a and datum_b. */
typedef struct kr__pid_rule {
    enum scmp_compare op;
    uint64_t a, b;
} kr__pid_rule;
#define KR__MAX_PID_RULES 130
/* The rules, any of which holds exactly when a value is neither 0 nor self;
 * their count (at most KR__MAX_PID_RULES; the first cap are written). */
size_t kr__pid_rules(uint64_t self, kr__pid_rule *out, size_t cap);

#endif
