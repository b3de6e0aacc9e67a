/* libFuzzer: any bytes given as a problem spec give a problem or an error
 * message, never a crash, leak or hang. */
#include <kreward/kreward.h>

#include <stdint.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static kr_context *ctx;
    if (!ctx) {
        kr_context_options o = KR_CONTEXT_OPTIONS_INIT;
        o.flags = KR_CONTEXT_NO_DEVICE;
        if (kr_context_new(&ctx, &o) != KR_OK)
            return 0;
    }
    /* a reference "source" names a file to read; keep the fuzzer off the
     * file system (a path such as /dev/stdin would block) */
    if (memmem(data, size, "source", 6))
        return 0;
    kr_problem *p = NULL;
    if (kr_problem_parse(&p, ctx, (const char *)data, size, "fuzz.json", NULL) == KR_OK) {
        char *json = NULL;
        kr_problem_json(&json, p);
        kr_free(json);
        unsigned char buf[4096];
        for (size_t t = 0; t < kr_problem_tensor_count(p); t++)
            if (kr_problem_tensor_role(p, t) != KR_ROLE_OUT &&
                kr_problem_tensor_bytes(p, t, 0) <= sizeof buf)
                kr_problem_generate_host(buf, sizeof buf, ctx, p, t, 0, 1);
        kr_problem_free(p);
    }
    return 0;
}
