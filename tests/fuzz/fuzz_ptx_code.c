/* libFuzzer: the PTX code reader (a candidate's inline asm lands in the PTX
 * it reads; a PTX binary is the caller's) never crashes, leaks or reads out
 * of bounds, and what it reads compares with itself as a copy. */
#include "compile/ptx_code.h"

#include <stdint.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    kr__ptx_code c;
    char why[128];
    (void)kr__ptx_statement_count((const char *)data, size);
    if (kr__ptx_code_read((const char *)data, size, &c, why, sizeof why) != 0)
        return 0;
    for (size_t i = 0; i < c.num_kernels; i++) {
        if (!kr__ptx_near_copy(&c.kernels[i], &c.kernels[i]) ||
            kr__ptx_similarity(&c.kernels[i], &c.kernels[i]) != 1)
            abort();
        if (i)
            (void)kr__ptx_near_copy(&c.kernels[i], &c.kernels[0]);
        if (kr__ptx_code_kernel(&c, c.kernels[i].name) == NULL)
            abort();
    }
    kr__ptx_code_free(&c);
    return 0;
}
