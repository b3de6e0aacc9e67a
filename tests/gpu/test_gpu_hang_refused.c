/* gpu: a plan whose first launch hangs and whose second is refused (static
 * shared memory over 48 KiB: docs/tuning.md) is judged a hang of its own
 * run within the run's deadline, not a launch error with the hang left to
 * the next wait (a reference's, which would call it the reference's
 * failure: `error`, no number) or to a free that blocks. A process of its
 * own: the hang leaves the context unusable. */
#include "gpu_test.h"

#include <unistd.h>

static const char *CANDIDATE =
    "// kreward: launch k grid=(1) block=(32) args=(x, y, N)\n"
    "// kreward: launch big grid=(1) block=(32) args=(x, y, N)\n"
    "extern \"C\" __global__ void k(const float* x, volatile float* y, int n) {\n"
    "  while (y[0] != 12345.0f) { }\n}\n"
    "extern \"C\" __global__ void big(const float* x, float* y, int n) {\n"
    "  __shared__ float s[16384];\n"
    "  s[threadIdx.x] = x[threadIdx.x % n]; __syncthreads();\n"
    "  if (threadIdx.x < n) y[threadIdx.x] = 2 * s[threadIdx.x];\n}\n";

static void hang_before_a_refused_launch_is_a_hang(void **state)
{
    (void)state;
    kr_context *ctx = gpu_context_or_skip();
    gpu_candidate c;
    gpu_candidate_load(&c, ctx, Y_IS_2X, CANDIDATE);
    kr_report_free(gpu_verify_hang(ctx, &c, 4.0));
    gpu_candidate_free(&c);
    kr_context_free(ctx);
    _exit(0); /* the driver tears the hung context down with the process */
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(hang_before_a_refused_launch_is_a_hang)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
