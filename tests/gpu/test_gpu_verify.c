/* gpu: kr_verify passes honest kernels and catches each known cheat with the
 * right verdict and flag (field-notes section 7). */
#include "gpu_test.h"

#include "run/dbuf.h"

static kr_context *g_ctx;
static kr_problem *g_vadd, *g_rowsum;

#define VADD_REF                                                                          \
    "// kreward: launch add grid=(cdiv(N,256)) block=(256) args=(a, b, c, N)\n"            \
    "extern \"C\" __global__ void add(const float* a, const float* b, float* c, long long n) {\n" \
    "  long long i = blockIdx.x * 256ll + threadIdx.x; if (i < n) c[i] = a[i] + b[i]; }\n"

static const char *VADD =
    "{\"name\": \"vadd\", \"dims\": [\"N\"],"
    " \"cases\": [{\"name\": \"pow2\", \"N\": 1048576, \"timing\": true}, {\"name\": \"odd\", \"N\": 100003}],"
    " \"tensors\": [{\"name\": \"a\", \"dtype\": \"f32\", \"shape\": [\"N\"], \"role\": \"in\"},"
    "  {\"name\": \"b\", \"dtype\": \"f32\", \"shape\": [\"N\"], \"role\": \"in\"},"
    "  {\"name\": \"c\", \"dtype\": \"f32\", \"shape\": [\"N\"], \"role\": \"out\","
    "   \"tolerance\": {\"rtol\": 1e-5, \"atol\": 1e-6}}],"
    " \"reference\": {\"cuda\": \"" "%s" "\"}}";

static const char *ROWSUM =
    "{\"name\": \"rowsum\", \"dims\": [\"R\", \"C\"],"
    " \"cases\": [{\"name\": \"small\", \"R\": 3, \"C\": 1000}, {\"name\": \"wide\", \"R\": 64, \"C\": 300001}],"
    " \"tensors\": [{\"name\": \"x\", \"dtype\": \"f32\", \"shape\": [\"R\", \"C\"], \"role\": \"in\"},"
    "  {\"name\": \"y\", \"dtype\": \"f32\", \"shape\": [\"R\"], \"role\": \"out\","
    "   \"tolerance\": {\"rtol\": 1e-3, \"atol\": 1e-2}}],"
    " \"reference\": {\"cuda\": \"// kreward: launch rs grid=(R) block=(1) args=(x, y, C)\\n"
    "extern \\\"C\\\" __global__ void rs(const float* x, float* y, long long c) {"
    " double s = 0; for (long long j = 0; j < c; j++) s += x[blockIdx.x * c + j]; y[blockIdx.x] = (float)s; }\"}}";

static kr_problem *make_problem(const char *text)
{
    kr_problem *p = NULL;
    if (kr_problem_parse(&p, g_ctx, text, strlen(text), "p.json", NULL) != KR_OK)
        fail_msg("%s", kr_context_errmsg(g_ctx));
    return p;
}

/* Escapes a C source into a JSON string body. */
static char *json_escape(const char *s)
{
    char *out = malloc(strlen(s) * 2 + 1), *o = out;
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            *o++ = '\\';
        if (*s == '\n') {
            *o++ = '\\';
            *o++ = 'n';
            continue;
        }
        *o++ = *s;
    }
    *o = '\0';
    return out;
}

static kr_report *judge(kr_problem *p, const char *src)
{
    kr_program *prog = NULL;
    kr_plan *plan = NULL;
    if (kr_compile(&prog, g_ctx, src, 0, NULL) != KR_OK)
        fail_msg("compile: %s\n%s", kr_context_errmsg(g_ctx), kr_context_errdetail(g_ctx));
    if (kr_plan_from_source(&plan, g_ctx, src, 0, "cand.cu") != KR_OK)
        fail_msg("plan: %s", kr_context_errmsg(g_ctx));
    kr_report *r = NULL;
    int rc = kr_verify((r = test_report()), g_ctx, p, prog, plan, NULL);
    if (rc != KR_OK)
        fail_msg("verify: %s (%s)", kr_status_name(rc), kr_context_errmsg(g_ctx));
    printf("  -> %s, flags 0x%llx: %s\n", kr_verdict_name(kr_report_verdict(r)),
           (unsigned long long)kr_report_flags(r), kr_report_text(r, "feedback"));
    kr_plan_free(plan);
    kr_program_free(prog);
    return r;
}

static void expect(kr_problem *p, const char *label, const char *src, int verdict, uint64_t flags)
{
    printf("%s\n", label);
    kr_report *r = judge(p, src);
    if (kr_report_verdict(r) != verdict || (kr_report_flags(r) & flags) != flags) {
        char *json = NULL;
        kr_report_json(&json, r);
        fail_msg("%s: expected %s with flags 0x%llx, got %s 0x%llx\n%s", label,
                 kr_verdict_name(verdict), (unsigned long long)flags,
                 kr_verdict_name(kr_report_verdict(r)), (unsigned long long)kr_report_flags(r), json);
    }
    kr_report_free(r);
}

#define K(body)                                                                              \
    "// kreward: launch k grid=(cdiv(N,256)) block=(256) args=(a, b, c, N)\n"                 \
    "#include <cuda_fp16.h>\n"                                                                \
    "extern \"C\" __global__ void k(float* a, float* b, float* c, long long n) {\n"           \
    "  long long i = blockIdx.x * 256ll + threadIdx.x;\n" body "\n}\n"

static void honest_kernels_pass(void **state)
{
    (void)state;
    expect(g_vadd, "honest", K("if (i < n) c[i] = a[i] + b[i];"), KR_VERDICT_PASSED, 0);
    /* bitwise different runs, one ulp apart: within tolerance */
    expect(g_vadd, "nondeterministic within tolerance",
           K("if (i < n) { float v = a[i] + b[i]; c[i] = (clock64() & 1) ? nextafterf(v, 1e30f) : v; }"),
           KR_VERDICT_PASSED, KR_FLAG_NONDETERMINISTIC);
    printf("atomics row sum\n");
    kr_report *r = judge(g_rowsum,
        "// kreward: scratch acc bytes=R*4 zero\n"
        "// kreward: launch part grid=(cdiv(C,1024), R) block=(256) args=(x, acc, C)\n"
        "// kreward: launch copy grid=(cdiv(R,256)) block=(256) args=(acc, y, R)\n"
        "extern \"C\" __global__ void part(const float* x, float* acc, long long c) {\n"
        "  __shared__ float s[256]; float t = 0;\n"
        "  for (long long j = blockIdx.x * 1024ll + threadIdx.x; j < min(c, (blockIdx.x + 1) * 1024ll); j += 256)\n"
        "    t += x[blockIdx.y * c + j];\n"
        "  s[threadIdx.x] = t; __syncthreads();\n"
        "  for (int w = 128; w > 0; w >>= 1) { if (threadIdx.x < w) s[threadIdx.x] += s[threadIdx.x + w]; __syncthreads(); }\n"
        "  if (threadIdx.x == 0) atomicAdd(&acc[blockIdx.y], s[0]);\n}\n"
        "extern \"C\" __global__ void copy(const float* acc, float* y, int r) {\n"
        "  int i = blockIdx.x * 256 + threadIdx.x; if (i < r) y[i] = acc[i]; }\n");
    assert_int_equal(kr_report_verdict(r), KR_VERDICT_PASSED);
    double v;
    assert_int_equal(kr_report_get(&v, r, "correct"), KR_OK);
    assert_true(v == 1);
    kr_report_free(r);
}

static void cheats_are_caught(void **state)
{
    (void)state;
    expect(g_vadd, "writes nothing", K(""), KR_VERDICT_INCORRECT, KR_FLAG_UNWRITTEN);
    /* unwritten outputs differ between runs only by their poison: no race */
    kr_report *r = judge(g_vadd, K(""));
    assert_false(kr_report_flags(r) & KR_FLAG_RACE);
    kr_report_free(r);
    expect(g_vadd, "writes half", K("if (i < n / 2) c[i] = a[i] + b[i];"), KR_VERDICT_INCORRECT,
           KR_FLAG_UNWRITTEN);
    expect(g_vadd, "returns the input", K("if (i < n) c[i] = a[i];"), KR_VERDICT_INCORRECT, 0);
    expect(g_vadd, "power-of-two only",
           K("long long m = n & ~1023ll; if (i < m) c[i] = a[i] + b[i];"), KR_VERDICT_INCORRECT,
           KR_FLAG_SHAPE_SPECIFIC | KR_FLAG_UNWRITTEN);
    expect(g_vadd, "mutates its inputs", K("if (i < n) { c[i] = a[i] + b[i]; a[i] = 0; }"),
           KR_VERDICT_INCORRECT, KR_FLAG_INPUT_MUTATED);
    /* the second run gets fresh inputs, so the kernel is not called racy */
    r = judge(g_vadd, K("if (i < n) { c[i] = a[i] + b[i]; a[i] = 0; }"));
    assert_false(kr_report_flags(r) & KR_FLAG_RACE);
    kr_report_free(r);
    expect(g_vadd, "writes past its output",
           "// kreward: launch k grid=(cdiv(N+1,256)) block=(256) args=(a, b, c, N)\n"
           "extern \"C\" __global__ void k(float* a, float* b, float* c, long long n) {\n"
           "  long long i = blockIdx.x * 256ll + threadIdx.x;\n"
           "  if (i < n) c[i] = a[i] + b[i]; else if (i == n) c[i] = 0; }\n",
           KR_VERDICT_INCORRECT, KR_FLAG_OUT_OF_BOUNDS);
    expect(g_vadd, "reads memory it never wrote (right on one run only)",
           K("if (i < n) { unsigned old = __float_as_uint(c[i]);\n"
             "  c[i] = a[i] + b[i] + (old == 0x7FBADBADu ? 0.f : 1.f); }"),
           KR_VERDICT_INCORRECT, KR_FLAG_RACE);
    expect(g_vadd, "fp16 arithmetic",
           K("if (i < n) c[i] = __half2float(__hadd(__float2half(a[i]), __float2half(b[i])));"),
           KR_VERDICT_INCORRECT, KR_FLAG_PRECISION);
    expect(g_vadd, "nondeterministic beyond tolerance",
           K("if (i < n) c[i] = a[i] + b[i] + ((clock64() >> 2) & 1 ? 0.5f : 0.f);"),
           KR_VERDICT_INCORRECT, KR_FLAG_RACE);
}

static void feedback_explains(void **state)
{
    (void)state;
    kr_report *r = judge(g_vadd, K("if (i < n / 2) c[i] = a[i] + b[i];"));
    const char *fb = kr_report_text(r, "feedback");
    assert_contains(fb, "case 'pow2' (N=1048576): 524288 of 1.05M outputs of 'c' wrong");
    assert_contains(fb, "first wrong at [524288]: got NaN (never written)");
    assert_contains(fb, "the last 524288 elements were never written");
    assert_false(contains(fb, "0x")); /* no seeds */
    char *json = NULL;
    assert_int_equal(kr_report_json(&json, r), KR_OK);
    assert_contains(json, "\"seed\": \"0x");
    assert_contains(json, "\"first_mismatches\"");
    kr_free(json);
    kr_report_free(r);
}

static void plan_and_memory_errors(void **state)
{
    (void)state;
    /* an argument of the wrong size is the candidate's fault: invalid_plan */
    kr_report *r = judge(g_vadd,
        "// kreward: launch k grid=(cdiv(N,256)) block=(256) args=(a, b, c, N)\n"
        "extern \"C\" __global__ void k(float* a, float* b, float* c, char n) {}\n");
    assert_int_equal(kr_report_verdict(r), KR_VERDICT_INVALID_PLAN);
    assert_contains(kr_report_text(r, "message"), "arg 3 'N' is an integer (passed as 4 or 8 "
                                                  "bytes), kernel parameter 3 is 1 bytes");
    kr_report_free(r);
    /* 3 x 64 GiB on a 141 GB card: a clear error, no crash */
    const char *huge =
        "{\"name\": \"huge\", \"dims\": [\"N\"], \"cases\": [{\"N\": 17179869184}],"
        " \"tensors\": [{\"name\": \"a\", \"dtype\": \"f32\", \"shape\": [\"N\"], \"role\": \"in\"},"
        "  {\"name\": \"b\", \"dtype\": \"f32\", \"shape\": [\"N\"], \"role\": \"in\"},"
        "  {\"name\": \"c\", \"dtype\": \"f32\", \"shape\": [\"N\"], \"role\": \"out\"}],"
        " \"reference\": {\"cuda\": \"// kreward: launch add grid=(cdiv(N,256)) block=(256) args=(a, b, c, N)\\n"
        "extern \\\"C\\\" __global__ void add(const float* a, const float* b, float* c, long long n) {}\"}}";
    kr_problem *p = make_problem(huge);
    kr_program *prog;
    kr_plan *plan;
    const char *src = K("if (i < n) c[i] = a[i] + b[i];");
    assert_int_equal(kr_compile(&prog, g_ctx, src, 0, NULL), KR_OK);
    assert_int_equal(kr_plan_from_source(&plan, g_ctx, src, 0, "c.cu"), KR_OK);
    int rc = kr_verify((r = test_report()), g_ctx, p, prog, plan, NULL);
    printf("huge: %s: %s\n", kr_status_name(rc), kr_report_text(r, "message"));
    assert_int_equal(rc, KR_ENOMEM);
    assert_int_equal(kr_report_verdict(r), KR_VERDICT_ERROR);
    assert_contains(kr_report_text(r, "message"), "GB of device memory");
    kr_report_free(r);
    kr_plan_free(plan);
    kr_program_free(prog);
    kr_problem_free(p);
}

/* A freed buffer is kept and handed to the next allocation of its size
 * (dbuf.c), zeroed in between, guards refilled: what one evaluation left
 * in it (a reference's answer, a candidate's outputs) is gone. */
static void freed_buffers_are_reused_zeroed(void **state)
{
    (void)state;
    kr__engine *e;
    assert_int_equal(kr__engine_get(g_ctx, &e), KR_OK);
    const uint64_t bytes = 3u << 20;
    kr__dbuf a, b, other;
    assert_int_equal(kr__dbuf_alloc(g_ctx, &a, bytes, "test"), KR_OK);
    assert_int_equal(kr__dbuf_fill(g_ctx, &a, 0x5A), KR_OK); /* "the answer" */
    CUdeviceptr base = a.base;
    kr__dbuf_free(g_ctx, &a);
    assert_int_equal(kr__dbuf_alloc(g_ctx, &other, bytes + 4096, "test"), KR_OK);
    assert_true(other.base != base); /* another size: not that one */
    assert_int_equal(kr__dbuf_alloc(g_ctx, &b, bytes, "test"), KR_OK);
    assert_true(b.base == base);
    unsigned char *host = malloc(b.alloc);
    assert_non_null(host);
    assert_int_equal(kr__engine_wait(g_ctx, 10, "the test's memsets"), KR_OK);
    assert_int_equal(kr__cuda()->cuMemcpyDtoH(host, b.base, b.alloc), CUDA_SUCCESS);
    size_t left = 0, guards = 0;
    for (uint64_t i = 0; i < b.alloc; i++) {
        int in_body = i >= KR__GUARD_BYTES && i < KR__GUARD_BYTES + b.bytes;
        left += in_body && host[i] != 0;
        guards += !in_body && host[i] == KR__CANARY;
    }
    printf("reused buffer: %zu bytes left from before (want 0), %zu of %llu guard bytes set\n", left,
           guards, (unsigned long long)(b.alloc - b.bytes));
    assert_int_equal(left, 0);
    assert_int_equal(guards, b.alloc - b.bytes);
    free(host);
    kr__dbuf_free(g_ctx, &b);
    kr__dbuf_free(g_ctx, &other);
    kr__dbuf_release_spares(g_ctx);
    assert_int_equal(e->num_spare, 0);
}

int main(void)
{
    g_ctx = gpu_context_or_skip();
    char *ref = json_escape(VADD_REF);
    char *vadd = malloc(strlen(VADD) + strlen(ref) + 1);
    sprintf(vadd, VADD, ref);
    g_vadd = make_problem(vadd);
    g_rowsum = make_problem(ROWSUM);
    free(ref);
    free(vadd);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(honest_kernels_pass),
        cmocka_unit_test(cheats_are_caught),
        cmocka_unit_test(feedback_explains),
        cmocka_unit_test(plan_and_memory_errors),
        cmocka_unit_test(freed_buffers_are_reused_zeroed),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    kr_problem_free(g_vadd);
    kr_problem_free(g_rowsum);
    kr_context_free(g_ctx);
    return rc;
}
