/* Monotonic wall-clock time in seconds. */
#ifndef KR_CLOCK_H
#define KR_CLOCK_H

#include <time.h>

static inline double kr__now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

#endif
