/* Element types: names, sizes, ranges and default tolerances. */
#ifndef KR_DTYPE_H
#define KR_DTYPE_H

#include "kreward/common.h"

/* 0 when unknown. */
int kr__dtype_from_name(const char *name);
const char *kr__dtype_name(int dtype);
int kr__dtype_size(int dtype);
int kr__dtype_is_float(int dtype);
/* Largest finite magnitude (floats) or the integer range. */
double kr__dtype_max(int dtype);
void kr__dtype_int_range(int dtype, int64_t *lo, int64_t *hi);
/* Default allclose tolerances (docs/problem-format.md has the table). */
void kr__dtype_default_tolerance(int dtype, double *rtol, double *atol);
/* Decodes element i of a host buffer to double (floats) for comparison. */
double kr__dtype_load(int dtype, const void *base, uint64_t i);
/* A comma-separated list of every dtype name, for messages. */
const char *kr__dtype_names(void);

#endif
