/* Public structs are ABI: their size and field offsets are pinned here. A
 * change must append fields and bump the struct's version, never move one. */
#include <kreward/kreward.h>

#include <stddef.h>
#include <stdio.h>

static int failures;

#define PIN(expr, expected)                                                              \
    do {                                                                                 \
        size_t got_ = (expr);                                                            \
        if (got_ != (size_t)(expected)) {                                                \
            printf("%s is %zu, pinned at %zu\n", #expr, got_, (size_t)(expected));       \
            failures++;                                                                  \
        }                                                                                \
    } while (0)

int main(void)
{
#if defined(__x86_64__) || defined(__aarch64__)
    PIN(sizeof(kr_context_options), 48);
    PIN(offsetof(kr_context_options, cache_memory_bytes), 24);
    PIN(offsetof(kr_context_options, flags), 40);
    PIN(sizeof(kr_compile_options), 128);
    PIN(offsetof(kr_compile_options, fast_math), 96);
    PIN(offsetof(kr_compile_options, time_limit_s), 112);
    PIN(offsetof(kr_compile_options, flags), 120);
#else
    printf("struct sizes are pinned for LP64 targets only\n");
    return 77;
#endif
    if (failures == 0)
        printf("public struct layouts match the pinned ABI\n");
    return failures ? 1 : 0;
}
