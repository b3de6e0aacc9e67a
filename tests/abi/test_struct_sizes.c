/* Public structs are ABI: every one's size and field offsets are pinned
 * here. A change must append fields and bump the struct's version, never
 * move one; the pin then changes only in its size and new offsets. */
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
    PIN(offsetof(kr_context_options, cache_dir), 32);
    PIN(offsetof(kr_context_options, flags), 40);

    PIN(sizeof(kr_compile_options), 136); /* version 2; version 1 ended at flags (124) */
    PIN(offsetof(kr_compile_options, fast_math), 96);
    PIN(offsetof(kr_compile_options, time_limit_s), 112);
    PIN(offsetof(kr_compile_options, flags), 120);
    PIN(offsetof(kr_compile_options, max_log_bytes), 128);

    PIN(sizeof(kr_verify_options), 32);
    PIN(offsetof(kr_verify_options, seed), 8);
    PIN(offsetof(kr_verify_options, timeout_s), 16);
    PIN(offsetof(kr_verify_options, flags), 24);
    PIN(offsetof(kr_verify_options, max_mismatches), 28);

    PIN(sizeof(kr_bench_options), 88); /* version 2; version 1 ended at case_index (72) */
    PIN(offsetof(kr_bench_options, min_time_s), 16);
    PIN(offsetof(kr_bench_options, buffer_sets), 40);
    PIN(offsetof(kr_bench_options, check_fraction), 48);
    PIN(offsetof(kr_bench_options, seed), 56);
    PIN(offsetof(kr_bench_options, case_index), 64);
    PIN(offsetof(kr_bench_options, max_slowdown), 72);
    PIN(offsetof(kr_bench_options, max_call_s), 80);

    PIN(sizeof(kr_baseline), 48);
    PIN(offsetof(kr_baseline, program), 8);
    PIN(offsetof(kr_baseline, fn), 24);
    PIN(offsetof(kr_baseline, name), 40);

    PIN(sizeof(kr_evaluate_options), 56);
    PIN(offsetof(kr_evaluate_options, compile), 8);
    PIN(offsetof(kr_evaluate_options, reward), 40);
    PIN(offsetof(kr_evaluate_options, name), 48);

    PIN(sizeof(kr_golden_request), 64);
    PIN(offsetof(kr_golden_request, seed), 8);
    PIN(offsetof(kr_golden_request, host), 24);
    PIN(offsetof(kr_golden_request, dims), 40);
    PIN(offsetof(kr_golden_request, errbuf_size), 56);

    PIN(sizeof(kr_term_def), 48);
    PIN(offsetof(kr_term_def, name), 8);
    PIN(offsetof(kr_term_def, init), 24);
    PIN(offsetof(kr_term_def, evaluate), 32);
    PIN(offsetof(kr_term_def, destroy), 40);

    PIN(sizeof(kr_plugin_info), 32);
    PIN(offsetof(kr_plugin_info, terms), 8);
    PIN(offsetof(kr_plugin_info, term_size), 16);
    PIN(offsetof(kr_plugin_info, name), 24);

    PIN(sizeof(kr_pool_options), 80);
    PIN(offsetof(kr_pool_options, gpus), 8);
    PIN(offsetof(kr_pool_options, compile_workers), 16);
    PIN(offsetof(kr_pool_options, job_timeout_s), 24);
    PIN(offsetof(kr_pool_options, compile_memory_bytes), 40);
    PIN(offsetof(kr_pool_options, max_attempts), 48);
    PIN(offsetof(kr_pool_options, cuda_home), 72);

    PIN(sizeof(kr_job), 96);
    PIN(offsetof(kr_job, problem), 8);
    PIN(offsetof(kr_job, len), 24);
    PIN(offsetof(kr_job, plan), 48);
    PIN(offsetof(kr_job, reward), 88);
#else
    printf("struct sizes are pinned for LP64 targets only\n");
    return 77;
#endif
    if (failures == 0)
        printf("public struct layouts match the pinned ABI\n");
    return failures ? 1 : 0;
}
