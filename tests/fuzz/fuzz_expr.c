/* libFuzzer: the expression parser and evaluator never crash, overflow
 * silently or read out of bounds. */
#include "common/expr.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char *const names[] = {"M", "N", "K", "batch"};
    static const int64_t values[] = {7, 4099, -3, INT64_MAX};
    char *text = malloc(size + 1);
    memcpy(text, data, size);
    text[size] = '\0';
    char why[256];
    kr__expr *e = kr__expr_parse(text, names, 4, why, sizeof why);
    if (e) {
        int64_t v;
        kr__expr_eval(e, values, &v, why, sizeof why);
        kr__expr_free(e);
    }
    free(text);
    return 0;
}
