/* Which generator kernel serves a distribution: the specialised ones
 * KR_GEN_SPECIALISED names (common/kr_gen.h), by index and name, or the
 * generic kr_generate. The launcher (builtin_launch.c) and the engine's
 * loader (engine.c) both read this one table. */
#ifndef KR_GEN_KERNELS_H
#define KR_GEN_KERNELS_H

#include "common/kr_gen.h"

#include <stddef.h>

/* How many generator kernels KR_GEN_SPECIALISED names. */
#define KR__GEN_COUNT_ONE(K, B, D) +1
#define KR__GEN_SPECIAL (0 KR_GEN_SPECIALISED(KR__GEN_COUNT_ONE))

/* The specialised generator kernel for d (its index in KR_GEN_SPECIALISED
 * and its name), or -1 and "kr_generate": the generic one. */
int kr__gen_kernel_for(const kr_gen_dist *d, const char **name);
/* The name of specialised kernel i (i < KR__GEN_SPECIAL). */
const char *kr__gen_kernel_name(size_t i);

#endif
