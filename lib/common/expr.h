/* Integer expressions over named values (a problem's dims):
 *   + - * / % unary-, parentheses, min(a,b), max(a,b), cdiv(a,b), integers.
 * Evaluated in int64 with overflow detection. `/` and `%` truncate toward
 * zero as in C; cdiv is the mathematical ceiling of a/b for any signs.
 * Division or modulo by zero is an error, as is any overflow. */
#ifndef KR_EXPR_H
#define KR_EXPR_H

#include <stddef.h>
#include <stdint.h>

typedef struct kr__expr kr__expr;

/* Parses text; names are resolved against names[0..count). On failure
 * returns NULL and writes "column N: why" into why. */
kr__expr *kr__expr_parse(const char *text, const char *const *names, size_t count, char *why,
                         size_t why_size);
void kr__expr_free(kr__expr *e);

/* Evaluates with values[i] for names[i]. 0 on success, -1 with why. */
int kr__expr_eval(const kr__expr *e, const int64_t *values, int64_t *out, char *why,
                  size_t why_size);

/* The expression as written (normalised spacing). */
const char *kr__expr_text(const kr__expr *e);
/* 1 when the expression reads name index i. */
int kr__expr_uses(const kr__expr *e, size_t name_index);

#endif
