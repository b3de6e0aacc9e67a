/* Launch plans: annotations and JSON, checked against real kernel
 * parameters (read from the CUBIN, no GPU) and every case of a problem. */
#include "helpers.h"

#include "problem/plan_impl.h"
#include "common/strbuf.h"

static const char *PROBLEM =
    "{\"name\": \"p\", \"dims\": [\"M\", \"N\"],\n"
    " \"cases\": [{\"name\": \"small\", \"M\": 7, \"N\": 33}, {\"name\": \"wide\", \"M\": 3, \"N\": 100000}],\n"
    " \"tensors\": [{\"name\": \"x\", \"dtype\": \"f32\", \"shape\": [\"M\", \"N\"], \"role\": \"in\"},\n"
    "             {\"name\": \"y\", \"dtype\": \"f32\", \"shape\": [\"M\", \"N\"], \"role\": \"out\"}],\n"
    " \"scalars\": [{\"name\": \"eps\", \"dtype\": \"f32\", \"value\": 0.5},\n"
    "             {\"name\": \"big\", \"dtype\": \"i64\", \"value\": 5}],\n"
    " \"reference\": {\"golden\": true}}";

static const char *KERNELS =
    "extern \"C\" __global__ void rows(const float* x, float* y, int m, int n, float eps) {}\n"
    "extern \"C\" __global__ void rows64(const float* x, float* y, long long m, long long n) {}\n"
    "extern \"C\" __global__ void __launch_bounds__(256) narrow(float* t, int n) {}\n";

typedef struct {
    kr_context *ctx;
    kr_problem *problem;
    kr_program *program;
} fixture;

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    f->ctx = test_context(NULL);
    assert_int_equal(kr_problem_parse(&f->problem, f->ctx, PROBLEM, strlen(PROBLEM), "p.json", NULL),
                     KR_OK);
    assert_int_equal(kr_compile(&f->program, f->ctx, KERNELS, 0, NULL), KR_OK);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    kr_program_free(f->program);
    kr_problem_free(f->problem);
    kr_context_free(f->ctx);
    free(f);
    return 0;
}

/* Parses plan text and checks it; returns the status, message in ctx. */
static int check_text(fixture *f, const char *src)
{
    kr_plan *plan = NULL;
    int rc = kr_plan_from_source(&plan, f->ctx, src, 0, "cand.cu");
    if (rc == KR_OK)
        rc = kr_plan_check(f->ctx, plan, f->problem, f->program);
    kr_plan_free(plan);
    return rc;
}

static void expect_plan_error(fixture *f, const char *src, int code, const char *message)
{
    int rc = check_text(f, src);
    if (rc != code || !contains(kr_context_errmsg(f->ctx), message))
        fail_msg("plan:\n%s\ngot %s \"%s\", expected %s \"...%s...\"", src, kr_status_name(rc),
                 kr_context_errmsg(f->ctx), kr_status_name(code), message);
}

static void annotations_parse(void **state)
{
    fixture *f = *state;
    const char *src =
        "// a comment\n"
        "// kreward: scratch tmp bytes=M*4 poison\n"
        "// kreward: launch rows grid=(cdiv(M, 4), 1) block=(128) smem=min(N, 1024)*4 args=(x, y, M, N, eps)\n"
        "   //   kreward:   launch narrow grid=1 block=(256) args=(tmp, M*N)\n";
    kr_plan *plan = NULL;
    assert_int_equal(kr_plan_from_source(&plan, f->ctx, src, 0, "cand.cu"), KR_OK);
    assert_int_equal(kr_plan_launch_count(plan), 2);
    assert_string_equal(kr_plan_launch_kernel(plan, 0), "rows");
    assert_string_equal(kr_plan_launch_kernel(plan, 1), "narrow");
    if (kr_plan_check(f->ctx, plan, f->problem, f->program) != KR_OK)
        fail_msg("%s", kr_context_errmsg(f->ctx));
    char *json = NULL;
    assert_int_equal(kr_plan_json(&json, plan), KR_OK);
    assert_contains(json, "\"init\": \"poison\"");
    assert_contains(json, "cdiv(M, 4)");
    kr_free(json);

    /* evaluated values: grid, block, smem and argument bytes */
    kr__bound_plan bp;
    assert_int_equal(kr__plan_bind(f->ctx, plan, f->problem, f->program, &bp), KR_OK);
    kr__limits lim;
    kr__limits_for(f->ctx, "sm_90a", &lim);
    kr__launch_dims d;
    assert_int_equal(kr__plan_dims(f->ctx, &bp, 0, 0, &lim, &d), KR_OK);
    assert_int_equal(d.grid[0], 2);
    assert_int_equal(d.grid[2], 1);
    assert_int_equal(d.block[0], 128);
    assert_int_equal(d.smem, 33 * 4);
    unsigned char v[8] = {0};
    assert_int_equal(kr__plan_arg_value(f->ctx, &bp, 0, 3, 1, v), KR_OK);
    int32_t n32;
    memcpy(&n32, v, 4);
    assert_int_equal(n32, 100000);
    assert_int_equal(kr__plan_arg_value(f->ctx, &bp, 0, 4, 0, v), KR_OK);
    float eps;
    memcpy(&eps, v, 4);
    assert_true(eps == 0.5f);
    uint64_t sb;
    assert_int_equal(kr__plan_scratch_bytes(f->ctx, &bp, 0, 0, &sb), KR_OK);
    assert_int_equal(sb, 28);
    kr__plan_unbind(&bp);
    kr_plan_free(plan);
}

static void int_args_follow_the_parameter_size(void **state)
{
    fixture *f = *state;
    kr_plan *plan = NULL;
    assert_int_equal(kr_plan_from_source(&plan, f->ctx,
                                         "// kreward: launch rows64 grid=(M) block=(32) args=(x, y, M, N*M)",
                                         0, "c.cu"), KR_OK);
    kr__bound_plan bp;
    assert_int_equal(kr__plan_bind(f->ctx, plan, f->problem, f->program, &bp), KR_OK);
    unsigned char v[8];
    assert_int_equal(kr__plan_arg_value(f->ctx, &bp, 0, 3, 1, v), KR_OK);
    int64_t n64;
    memcpy(&n64, v, 8);
    assert_int_equal(n64, 300000);
    kr__plan_unbind(&bp);
    kr_plan_free(plan);
}

static void plan_errors(void **state)
{
    fixture *f = *state;
    kr_plan *plan = NULL;
    assert_int_equal(kr_plan_from_source(&plan, f->ctx, "__global__ void k() {}\n", 0, "c.cu"),
                     KR_ENOTFOUND);
    assert_contains(kr_context_errmsg(f->ctx), "no launch plan");
    expect_plan_error(f, "\n// kreward: lunch rows grid=1 block=1 args=()", KR_EPLAN,
                      "plan line 2: unknown kreward directive");
    expect_plan_error(f, "// kreward: launch rows block=(32) args=(x, y, M, N, eps)", KR_EPLAN,
                      "needs grid=(...), block=(...) and args=(...)");
    expect_plan_error(f, "// kreward: launch rows grid=(1) block=(32) color=red args=(x, y, M, N, eps)",
                      KR_EPLAN, "unknown key 'color'");
    expect_plan_error(f, "// kreward: launch rows grid=(1,1,1,1) block=(32) args=(x, y, M, N, eps)",
                      KR_EPLAN, "malformed grid");
    expect_plan_error(f, "// kreward: launch rows grid=(M block=(32) args=(x)", KR_EPLAN,
                      "expected key=value");
    expect_plan_error(f, "// kreward: launch nope grid=(1) block=(32) args=()", KR_EPLAN,
                      "kernel 'nope' is not in the program (it defines: ");
    expect_plan_error(f, "// kreward: launch rows grid=(1) block=(32) args=(x, y, M, N)", KR_EPLAN,
                      "plan line 1 (launch rows): 4 args given, the kernel takes 5 parameters");
    expect_plan_error(f, "// kreward: launch rows grid=(1) block=(32) args=(x, y, M, big, eps)",
                      KR_EPLAN,
                      "plan line 1 (launch rows): arg 3 'big' is i64 (8 bytes), kernel parameter 3 is 4 bytes");
    expect_plan_error(f, "// kreward: launch rows grid=(1) block=(32) args=(x, M, x, N, eps)",
                      KR_EPLAN, "arg 2 'x' is a pointer (8 bytes), kernel parameter 2 is 4 bytes");
    expect_plan_error(f, "// kreward: launch rows grid=(1) block=(32) args=(x, y, M, K, eps)",
                      KR_EPLAN, "arg 3 'K' is not a tensor, scratch buffer, scalar or integer "
                                "expression over dims: column 1: unknown name 'K'");
    expect_plan_error(f, "// kreward: launch rows grid=(N-33) block=(32) args=(x, y, M, N, eps)",
                      KR_EPLAN, "case 'small': grid.x = 0, must be in [1,");
    expect_plan_error(f, "// kreward: launch rows grid=(1) block=(64, 32) args=(x, y, M, N, eps)",
                      KR_EPLAN, "block has 2048 threads, the kernel allows at most 1024");
    expect_plan_error(f, "// kreward: launch narrow grid=(1) block=(512) args=(y, N)", KR_EPLAN,
                      "block has 512 threads, the kernel allows at most 256");
    expect_plan_error(f, "// kreward: launch rows grid=(1) block=(2000) args=(x, y, M, N, eps)",
                      KR_EPLAN, "block.x = 2000, must be in [1, 1024]");
    expect_plan_error(f, "// kreward: launch rows grid=(1) block=(32) smem=N*100 args=(x, y, M, N, eps)",
                      KR_EPLAN, "case 'wide': smem = 10000000 bytes");
    expect_plan_error(f, "// kreward: launch rows grid=(1) block=(32) args=(x, y, M, N*N, eps)",
                      KR_EPLAN, "case 'wide': arg 3 'N*N' = 10000000000 does not fit the kernel's 4-byte parameter");
    expect_plan_error(f, "// kreward: launch rows grid=(1/0) block=(32) args=(x, y, M, N, eps)",
                      KR_EPLAN, "division by zero");
    expect_plan_error(f, "// kreward: scratch x bytes=4\n// kreward: launch narrow grid=1 block=1 args=(x, N)",
                      KR_EPLAN, "scratch name 'x' is already used");
    expect_plan_error(f, "// kreward: scratch t bytes=N-33\n// kreward: launch narrow grid=1 block=1 args=(t, N)",
                      KR_EPLAN, "(scratch t), case 'small': 0 bytes");
    expect_plan_error(f, "// kreward: scratch t\n", KR_EPLAN, "scratch t needs bytes=EXPR");
    expect_plan_error(f, "// kreward: launch rows grid=(1) grid=(2) block=(32) args=(x, y, M, N, eps)",
                      KR_EPLAN, "grid given twice");
    expect_plan_error(f, "// kreward: scratch t bytes=4 bytes=8\n", KR_EPLAN,
                      "scratch takes bytes=EXPR and zero or poison, not 'bytes'");
}

static void json_plans(void **state)
{
    fixture *f = *state;
    const char *good = "{\"launches\": [{\"kernel\": \"rows\", \"grid\": [\"cdiv(M, 4)\"], "
                       "\"block\": [128], \"smem\": 0, \"args\": [\"x\", \"y\", \"M\", \"N\", \"eps\"]}],"
                       " \"scratch\": [{\"name\": \"t\", \"bytes\": \"N*4\", \"init\": \"zero\"}]}";
    kr_plan *plan = NULL;
    assert_int_equal(kr_plan_parse_json(&plan, f->ctx, good, 0, "plan.json"), KR_OK);
    if (kr_plan_check(f->ctx, plan, f->problem, f->program) != KR_OK)
        fail_msg("%s", kr_context_errmsg(f->ctx));
    kr_plan_free(plan);
    assert_int_equal(kr_plan_parse_json(&plan, f->ctx, "{\"launches\": []}", 0, "plan.json"),
                     KR_EPLAN);
    assert_int_equal(kr_plan_parse_json(&plan, f->ctx, "{\"launches\": [{\"kernel\": \"rows\", "
                                        "\"grid\": [1], \"block\": [1], \"args\": [], \"x\": 1}]}",
                                        0, "plan.json"), KR_EPLAN);
    assert_contains(kr_context_errmsg(f->ctx), "launches[0]: unknown key 'x'");
    assert_int_equal(kr_plan_parse_json(&plan, f->ctx, "{\"launches\": [{\"kernel\": \"rows\", "
                                        "\"grid\": [1.5], \"block\": [1], \"args\": []}]}",
                                        0, "plan.json"), KR_EPLAN);
    assert_int_equal(kr_plan_parse_json(&plan, f->ctx, "{oops", 0, "plan.json"), KR_EPARSE);
    assert_contains(kr_context_errmsg(f->ctx), "plan.json:1:");
}

/* A program with a kernel of the library's own name, launched by a plan:
 * refused when the plan is checked. */
static void expect_reserved(fixture *f, const char *kernel)
{
    char src[256], annotation[256];
    snprintf(src, sizeof src, "extern \"C\" __global__ void %s(float *y) { y[0] = 1; }\n", kernel);
    snprintf(annotation, sizeof annotation, "// kreward: launch %s grid=(1) block=(1) args=(y)\n",
             kernel);
    kr_program *spoof = NULL;
    assert_int_equal(kr_compile(&spoof, f->ctx, src, 0, NULL), KR_OK);
    kr_plan *plan = NULL;
    assert_int_equal(kr_plan_from_source(&plan, f->ctx, annotation, 0, "c.cu"), KR_OK);
    assert_int_equal(kr_plan_check(f->ctx, plan, f->problem, spoof), KR_EPLAN);
    assert_contains(kr_context_errmsg(f->ctx), "reserved");
    kr_plan_free(plan);
    kr_program_free(spoof);
}

/* What a plan may not do is the plan's fault (invalid_plan), never an
 * environment error: reserved kernel names, too many or too large scratch
 * buffers. */
static void plan_limits(void **state)
{
    fixture *f = *state;
    expect_reserved(f, "kr_spin_cycles");
    /* the specialised generators' names too, present and future ones */
    expect_reserved(f, "kr_generate_NORMAL_NONE_F32");
    expect_reserved(f, "kr_scrub_shared");
    kr_plan *plan = NULL;
    /* scratch: more than the limit's total bytes */
    expect_plan_error(f, "// kreward: scratch big bytes=(M*N*4*1000)\n"
                      "// kreward: launch narrow grid=(1) block=(1) args=(big, N)\n",
                      KR_EPLAN, "a plan may use at most");
    /* scratch: more than 64 buffers */
    kr__buf many = KR__BUF_INIT;
    for (int i = 0; i < 65; i++)
        kr__buf_printf(&many, "// kreward: scratch s%d bytes=(4)\n", i);
    kr__buf_printf(&many, "// kreward: launch narrow grid=(1) block=(1) args=(s0, N)\n");
    assert_int_equal(kr_plan_from_source(&plan, f->ctx, many.data, 0, "c.cu"), KR_EPLAN);
    assert_contains(kr_context_errmsg(f->ctx), "more than 64 scratch buffers");
    kr__buf_free(&many);
    /* args: 512 fill CUDA's 4 KiB of parameters; 513 are refused in the
     * text form and in JSON, saying the limit */
    kr__buf args = KR__BUF_INIT, json = KR__BUF_INIT;
    kr__buf_printf(&args, "// kreward: launch narrow grid=(1) block=(1) args=(y");
    kr__buf_printf(&json, "{\"launches\": [{\"kernel\": \"narrow\", \"grid\": [1], \"block\": [1], "
                          "\"args\": [\"y\"");
    for (int i = 1; i < 513; i++) {
        kr__buf_printf(&args, ", N");
        kr__buf_printf(&json, ", \"N\"");
    }
    kr__buf_printf(&args, ")\n");
    kr__buf_printf(&json, "]}]}");
    assert_int_equal(kr_plan_from_source(&plan, f->ctx, args.data, 0, "c.cu"), KR_EPLAN);
    assert_contains(kr_context_errmsg(f->ctx), "up to 512 args");
    assert_int_equal(kr_plan_parse_json(&plan, f->ctx, json.data, 0, "plan.json"), KR_EPLAN);
    assert_contains(kr_context_errmsg(f->ctx), "at most 512 names or expressions");
    kr__buf_free(&args);
    kr__buf_free(&json);
}

/* Annotations that are not live code comments are never silently live:
 * inside block comments and string literals they are not annotations,
 * inside conditional groups or continued by a splice they are refused. */
static void annotations_only_where_live(void **state)
{
    fixture *f = *state;
    const char *live = "// kreward: launch narrow grid=(1) block=(1) args=(y, N)\n";
    const char *hidden[] = {
        "/* // kreward: launch narrow grid=(2) block=(1) args=(y, N) */\n",
        "const char *s = \"\\n// kreward: launch narrow grid=(3) block=(1) args=(y, N)\";\n",
    };
    for (size_t i = 0; i < 2; i++) {
        kr__buf src = KR__BUF_INIT;
        kr__buf_printf(&src, "%s%s", hidden[i], live);
        kr_plan *plan = NULL;
        assert_int_equal(kr_plan_from_source(&plan, f->ctx, src.data, 0, "c.cu"), KR_OK);
        assert_int_equal(kr_plan_launch_count(plan), 1);
        char *json = NULL;
        kr_plan_json(&json, plan);
        assert_contains(json, "\"1\""); /* the live one's grid, not 2 or 3 */
        kr_free(json);
        kr_plan_free(plan);
        kr__buf_free(&src);
    }
    expect_plan_error(f, "#if 0\n// kreward: launch narrow grid=(1) block=(1) args=(y, N)\n#endif\n",
                      KR_EPLAN, "inside #if/#ifdef");
    expect_plan_error(f, "#ifdef FAST\n// kreward: launch narrow grid=(1) block=(1) args=(y, N)\n"
                      "#endif\n", KR_EPLAN, "inside #if/#ifdef");
    expect_plan_error(f, "// kreward: launch narrow grid=(1) block=(1) \\\nargs=(y, N)\n", KR_EPLAN,
                      "continued onto the next line");
}

/* A program belongs to the context that made it: using it with another
 * context is refused by name, never run against the wrong module. */
static void handles_of_another_context(void **state)
{
    fixture *f = *state;
    kr_context *other = test_context(NULL);
    kr_plan *plan = NULL;
    assert_int_equal(kr_plan_from_source(&plan, other, "// kreward: launch narrow grid=(1) "
                                         "block=(1) args=(y, N)\n", 0, "c.cu"), KR_OK);
    assert_int_equal(kr_plan_check(other, plan, f->problem, f->program), KR_EINVAL);
    assert_contains(kr_context_errmsg(other), "the program was made by another context");
    kr_report *r = test_report();
    assert_int_equal(kr_verify(r, other, f->problem, f->program, plan, NULL), KR_EINVAL);
    assert_int_equal(kr_report_verdict(r), KR_VERDICT_ERROR);
    assert_contains(kr_report_text(r, "message"), "another context");
    kr_report_free(r);
    r = test_report();
    assert_int_equal(kr_evaluate_program(r, other, f->problem, f->program, plan, NULL), KR_EINVAL);
    assert_contains(kr_report_text(r, "message"), "another context");
    kr_report_free(r);
    kr_reward *w = NULL;
    assert_int_equal(kr_reward_preset(&w, f->ctx, "makora"), KR_OK);
    kr_evaluate_options o;
    kr_evaluate_options_init(&o, KR_EVALUATE_OPTIONS_VERSION);
    o.reward = w;
    r = test_report();
    assert_int_equal(kr_evaluate(r, other, f->problem, "x", 1, &o), KR_EINVAL);
    assert_contains(kr_report_text(r, "message"), "the reward was made by another context");
    kr_report_free(r);
    kr_reward_free(w);
    kr_plan_free(plan);
    kr_context_free(other);
}

/* A ready program (as from Triton) goes through the same pipeline as a
 * source: without a GPU, not_run with the compile metrics kept. */
static void evaluate_a_ready_program(void **state)
{
    fixture *f = *state;
    kr_plan *plan = NULL;
    assert_int_equal(kr_plan_from_source(&plan, f->ctx, "// kreward: launch rows grid=(M) "
                                         "block=(32) args=(x, y, M, N, eps)\n", 0, "c.cu"), KR_OK);
    kr_report *r = test_report();
    assert_int_equal(kr_evaluate_program(r, f->ctx, f->problem, f->program, plan, NULL),
                     KR_ENODEVICE);
    assert_int_equal(kr_report_verdict(r), KR_VERDICT_NOT_RUN);
    double kernels = 0, compiled = 0;
    assert_int_equal(kr_report_get(&kernels, r, "kernels"), KR_OK);
    assert_int_equal(kr_report_get(&compiled, r, "compiled"), KR_OK);
    assert_true(kernels == 3 && compiled == 1);
    assert_contains(kr_report_text(r, "message"), "need an NVIDIA GPU");
    kr_report_free(r);
    /* a plan that does not fit is the program's verdict */
    kr_plan_free(plan);
    assert_int_equal(kr_plan_from_source(&plan, f->ctx, "// kreward: launch rows grid=(M) "
                                         "block=(32) args=(x, y)\n", 0, "c.cu"), KR_OK);
    r = test_report();
    assert_int_equal(kr_evaluate_program(r, f->ctx, f->problem, f->program, plan, NULL), KR_OK);
    assert_int_equal(kr_report_verdict(r), KR_VERDICT_INVALID_PLAN);
    kr_report_free(r);
    kr_plan_free(plan);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(annotations_parse, setup, teardown),
        cmocka_unit_test_setup_teardown(int_args_follow_the_parameter_size, setup, teardown),
        cmocka_unit_test_setup_teardown(plan_errors, setup, teardown),
        cmocka_unit_test_setup_teardown(json_plans, setup, teardown),
        cmocka_unit_test_setup_teardown(plan_limits, setup, teardown),
        cmocka_unit_test_setup_teardown(annotations_only_where_live, setup, teardown),
        cmocka_unit_test_setup_teardown(handles_of_another_context, setup, teardown),
        cmocka_unit_test_setup_teardown(evaluate_a_ready_program, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
