/* The problem parser's state and the helpers its files share (spec.c):
 * problem_parse.c reads the top level, tensor_parse.c the tensors,
 * reference_parse.c the reference. */
#ifndef KR_SPEC_H
#define KR_SPEC_H

#include "driver/context_impl.h"
#include "problem/problem_impl.h"

#include <jansson.h>

/* Parser state: the text for locating errors, the context for reporting. */
typedef struct kr__spec {
    kr_context *ctx;
    const char *text;
    size_t len;
    const char *file;
    const char *base_dir;
    kr_problem *problem;
} kr__spec;

/* Reports "file:line:col: path: message" on the context; returns KR_EPARSE
 * (or code when given through kr__spec_fail_code). */
int kr__spec_fail(kr__spec *sp, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
int kr__spec_fail_code(kr__spec *sp, int code, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Fails on any key of obj not in allowed (NULL-terminated). */
int kr__spec_only_keys(kr__spec *sp, json_t *obj, const char *path, const char *const *allowed);
/* An expression given as a JSON string or integer, over the problem's dims. */
int kr__spec_expr(kr__spec *sp, json_t *v, const char *path, kr__expr **out);

/* tensor_parse.c: the tensors, and every case's tensor sizes (every shape
 * evaluates, sizes are non-negative and fit). */
int kr__spec_parse_tensors(kr__spec *sp, json_t *root);
int kr__spec_size_cases(kr__spec *sp);

/* reference_parse.c: "reference" (and its "fast" twin); the spec with both
 * sources inlined, which a worker parses again without the files (malloc). */
int kr__spec_parse_reference(kr__spec *sp, json_t *root);
char *kr__spec_self_contained(json_t *root, const kr_problem *p);

#endif
