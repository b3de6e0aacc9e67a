/* Shared by include_check.c (the candidate's own text) and
 * include_policy.c (resolving every header). */
#ifndef KR_INCLUDE_IMPL_H
#define KR_INCLUDE_IMPL_H

#include "compile/include_policy.h"
#include "common/strbuf.h"

#define KR__MAX_INCLUDE_NAME 512 /* the longest include name accepted */

/* Where a file came from; >= 0: the caller's include directory of that index. */
enum { FROM_CANDIDATE = -3, FROM_SHIM = -2, FROM_TOOLKIT = -1 };

/* Outcomes of resolving a name (>= 0: a file's index). */
enum {
    R_MISSING = -1,  /* found nowhere */
    R_NONE = -2,     /* not resolved (left as written) */
    R_ABSOLUTE = -3, /* violations: */
    R_DOTDOT = -4,
    R_CHARS = -5,
    R_ESCAPE = -6,
    R_OUTSIDE = -7,
    R_NOTREG = -8,
    R_TOOBIG = -9,
    R_NUL = -10,
    R_LIMIT = -11,
    R_UNREADABLE = -12,
    R_OOM = -13,
};

/* What a violation (R_ABSOLUTE ... R_UNREADABLE) is, for messages. */
const char *kr__include_violation(long r);
/* The policy on a name itself (0 or a violation); '..' is refused only
 * for the candidate (from == FROM_CANDIDATE). */
long kr__include_name_check(const char *name, int from);
/* __has_include and the toolkit's wrapper: the probes a candidate may use. */
int kr__include_probe_allowed(const char *word);
/* Fails with KR_ECOMPILE: the first line of log as the message, log (with
 * a closing line, cut at max bytes) as the detail. */
int kr__include_refuse(kr_context *ctx, const char *name, kr__buf *log, int errors, uint64_t max);

#endif
