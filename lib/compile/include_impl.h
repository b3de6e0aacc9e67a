/* Shared by include_check.c (the candidate's own text) and the files that
 * resolve every header: include_policy.c (kr__include_resolve, rewriting,
 * handing over), include_search.c (files, roots and the search) and
 * include_closure.c (every header reachable, computed includes). */
#ifndef KR_INCLUDE_IMPL_H
#define KR_INCLUDE_IMPL_H

#include "compile/include_policy.h"
#include "compile/name_map.h"
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

/* ---- files, roots and the resolver ---- */

typedef struct {
    int from;          /* FROM_* or a caller include directory */
    char *real;        /* real path ("" for the candidate and shims) */
    char *key;         /* the name NVRTC knows it by */
    const char *text;  /* NUL-terminated */
    size_t len;
    char *owned;       /* text, when read from disk */
    kr__pp_scan scan;
    int scanned;
    long *target;      /* per scan item: a file index or R_* */
    char *out;         /* rewritten text; NULL: the text as is */
} hfile;

typedef struct {
    char *name;
    long file;
} alias;

typedef struct {
    long file;
    size_t item;
} pending;

typedef struct {
    kr_context *ctx;
    const char *cand_name;
    kr__pp_mode mode;
    char *toolkit;       /* real path of <cuda_home>/include (NULL: none) */
    char *cccl;          /* real path of <cuda_home>/include/cccl (NULL: none) */
    char *const *dirs;   /* the caller's, real paths, NULL-terminated */
    hfile *files;
    size_t nfiles, capfiles;
    alias *aliases;
    size_t naliases;
    pending *computed;
    size_t ncomputed;
    kr__name_map by_real, by_key, memo, chain;
    size_t total;
    kr__buf log;
    int errors;
    int oom;
} resolver;

/* include_search.c */
/* A refusal in the policy log, in NVRTC's format (R->errors counts them). */
void kr__include_note(resolver *R, long file, unsigned line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Whether real lies beneath root. */
int kr__include_inside(const char *real, const char *root);
/* Adds a file to the table under a key of its own (owned: its text, freed
 * with it): its index, R_LIMIT or R_OOM. */
long kr__include_add_file(resolver *R, int from, const char *real, const char *key,
                          const char *text, size_t len, char *owned);
/* One literal name included by file from_file: a file index, R_MISSING or
 * a violation. */
long kr__include_resolve_name(resolver *R, long from_file, int delim, const char *name);

/* include_closure.c */
/* Reads every header the candidate can reach; -1 when out of memory. */
int kr__include_close_over(resolver *R);
/* Refuses a candidate's #define or #undef of a macro that a toolkit header
 * builds an include name from. */
void kr__include_check_chain(resolver *R);

#endif
