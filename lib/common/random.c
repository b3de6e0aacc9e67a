/* OS random numbers (random.h). */
#include "common/random.h"

#include <sys/random.h>

uint64_t kr__random64(void)
{
    uint64_t v = 0;
    /* a short read (a signal) or a zero draw: again */
    while (v == 0)
        if (getrandom(&v, sizeof v, 0) != (ssize_t)sizeof v)
            v = 0;
    return v;
}
