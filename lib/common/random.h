/* Random numbers from the OS, for what a candidate must not predict: the
 * seeds of fresh inputs, hash and mask keys, which timed calls are checked. */
#ifndef KR_COMMON_RANDOM_H
#define KR_COMMON_RANDOM_H

#include <stdint.h>

/* 64 random bits from getrandom(2), never 0 (0 means "unset" to callers). */
uint64_t kr__random64(void);

#endif
