/* A lexer for the preprocessor's view of CUDA C++ source: finds every
 * directive and include-like operator NVRTC will act on, through line
 * splices, comments, digraphs, raw strings and the language mode's rules,
 * so that include_policy.c can check and rewrite them. It does not expand
 * macros or evaluate conditions: it reports every branch. */
#ifndef KR_PP_SCAN_H
#define KR_PP_SCAN_H

#include <stddef.h>

/* What NVRTC's front end does differently per --std (measured on NVRTC 13). */
typedef struct {
    int raw_strings;      /* R"x(...)x": C++11 and later */
    int digit_separators; /* 1'000: C++14 and later */
    int trigraphs;        /* ??= is #: C++14 and earlier (refused where on) */
    int lenient;          /* trusted text (the toolkit's): nothing is refused,
                           * the scan goes on past what it cannot read */
} kr__pp_mode;

/* The mode of a --std value ("c++17"); -1 when NVRTC does not know it. */
int kr__pp_mode_of_std(const char *std, kr__pp_mode *mode);

enum kr__pp_kind {
    KR__PP_INCLUDE = 1, /* #include, #include_next, #import, #embed, ... */
    KR__PP_HAS_INCLUDE, /* __has_include(...) and the toolkit's wrapper */
    KR__PP_PRAGMA,      /* #pragma ... or _Pragma("...") */
    KR__PP_LINE,        /* #line N "file" or # N "file" */
    KR__PP_DEFINE,      /* #define NAME ... */
    KR__PP_UNDEF,       /* #undef NAME */
};

typedef struct {
    int kind;
    unsigned line;        /* 1-based physical line where it starts */
    char *word;           /* include: directive name ("include", "include_next");
                           * has-include: the operator; define/undef: macro name;
                           * pragma: its first words ("GCC dependency"), "" when
                           * the operand of _Pragma is not a plain string;
                           * line: the file name or NULL */
    char *name;           /* the header name, splices removed; NULL when the
                           * operand is not a literal <...> or "..." (computed) */
    int delim;            /* '<' or '"' for a literal name */
    size_t span_start;    /* the operand in the text: the literal with its */
    size_t span_end;      /* delimiters, or the computed tokens (physical) */
    unsigned span_splices;/* line splices inside the literal */
    int in_parens;        /* inside parentheses the text has not closed (a macro's
                           * arguments); only for includes */
    int function_like;    /* define */
    size_t body_start;    /* define: the replacement text (physical) */
    size_t body_end;
} kr__pp_item;

typedef struct {
    kr__pp_item *items;
    size_t count, cap;
    /* set when the text cannot be scanned safely (the scan stops): a
     * trigraph where NVRTC translates them, a malformed raw string, ... */
    int refused;
    unsigned refused_line;
    char refused_why[200];
    int oom;
} kr__pp_scan;

/* Scans text (len bytes, no NUL inside). Returns 0, or -1 when out of
 * memory. A text that cannot be scanned safely has scan->refused set. */
int kr__pp_scan_text(kr__pp_scan *scan, const char *text, size_t len, kr__pp_mode mode);
void kr__pp_scan_free(kr__pp_scan *scan);

/* text[start, end) as the preprocessor reads it: spliced, comments as one
 * space, white space collapsed (malloc'd; NULL when out of memory). For a
 * #define's replacement (body_start, body_end) or a computed operand. */
char *kr__pp_text(const char *text, size_t start, size_t end);

/* A second look at a candidate that does not depend on the lexer's view
 * of comments, strings and modes: the first line where a line starting
 * with #, %: or ??= reads as an include-like directive naming an absolute
 * path (the only names NVRTC can open from disk with no -I), or where an
 * include probe (__has_include and look-alikes) names one, anywhere, even in
 * a comment; 0 when none. */
unsigned kr__pp_absolute_anywhere(const char *text, size_t len);

#endif
