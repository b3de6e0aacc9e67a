/* libFuzzer: any text as plan annotations or plan JSON gives a plan or an
 * error, and checking a parsed plan against a real problem and program
 * never crashes. */
#include <kreward/kreward.h>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static kr_context *ctx;
static kr_problem *problem;
static kr_program *program;

static const char *PROBLEM =
    "{\"name\": \"p\", \"dims\": [\"M\", \"N\"], \"cases\": [{\"M\": 7, \"N\": 33}, {\"M\": 3, \"N\": 100000}],"
    " \"tensors\": [{\"name\": \"x\", \"dtype\": \"f32\", \"shape\": [\"M\", \"N\"], \"role\": \"in\"},"
    " {\"name\": \"y\", \"dtype\": \"f32\", \"shape\": [\"M\", \"N\"], \"role\": \"out\"}],"
    " \"scalars\": [{\"name\": \"eps\", \"dtype\": \"f32\", \"value\": 0.5}],"
    " \"reference\": {\"golden\": true}}";

static const char *KERNELS =
    "extern \"C\" __global__ void rows(const float* x, float* y, int m, int n, float eps) {}\n"
    "extern \"C\" __global__ void __launch_bounds__(256) narrow(float* t, long long n) {}\n";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!ctx) {
        kr_context_options o = KR_CONTEXT_OPTIONS_INIT;
        o.flags = KR_CONTEXT_NO_DEVICE;
        if (kr_context_new(&ctx, &o) != KR_OK ||
            kr_problem_parse(&problem, ctx, PROBLEM, strlen(PROBLEM), "p.json", NULL) != KR_OK ||
            kr_compile(&program, ctx, KERNELS, 0, NULL) != KR_OK)
            abort();
    }
    /* length 0 means "NUL-terminated" in the API: hand it a terminated copy */
    char *text = malloc(size + 1);
    memcpy(text, data, size);
    text[size] = '\0';
    kr_plan *plan = NULL;
    if (kr_plan_from_source(&plan, ctx, text, size, "fuzz.cu") == KR_OK ||
        kr_plan_parse_json(&plan, ctx, text, size, "fuzz.json") == KR_OK) {
        kr_plan_check(ctx, plan, problem, program);
        char *json = NULL;
        kr_plan_json(&json, plan);
        kr_free(json);
        kr_plan_free(plan);
    }
    free(text);
    return 0;
}
