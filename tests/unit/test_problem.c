/* Problem specs: a valid one read back in full, and malformed ones, each
 * with the message (file:line:col, field, why) a user should see. */
#include "helpers.h"
#include "problem/problem_impl.h"

static const char *VALID =
    "{\n"
    "  \"name\": \"softmax_rows\",\n"
    "  \"description\": \"row softmax\",\n"
    "  \"dims\": [\"M\", \"N\"],\n"
    "  \"cases\": [\n"
    "    {\"name\": \"small\", \"M\": 3, \"N\": 33},\n"
    "    {\"name\": \"big\", \"M\": 1000, \"N\": 4099, \"timing\": true}\n"
    "  ],\n"
    "  \"tensors\": [\n"
    "    {\"name\": \"x\", \"dtype\": \"f32\", \"shape\": [\"M\", \"N\"], \"role\": \"in\",\n"
    "     \"init\": {\"dist\": \"normal\", \"mean\": 0, \"std\": 2}},\n"
    "    {\"name\": \"w\", \"dtype\": \"bf16\", \"shape\": [\"N\"], \"role\": \"in\"},\n"
    "    {\"name\": \"y\", \"dtype\": \"f32\", \"shape\": [\"M\", \"N\"], \"role\": \"out\",\n"
    "     \"tolerance\": {\"rtol\": 1e-5}},\n"
    "    {\"name\": \"stats\", \"dtype\": \"f64\", \"shape\": [\"cdiv(M, 2)\", 2], \"role\": \"inout\"}\n"
    "  ],\n"
    "  \"scalars\": [{\"name\": \"eps\", \"dtype\": \"f32\", \"value\": 1e-5}],\n"
    "  \"reference\": {\"golden\": true},\n"
    "  \"bytes\": \"M*N*8\",\n"
    "  \"flops\": \"5*M*N\",\n"
    "  \"baseline_us\": {\"NVIDIA H200\": 12.5}\n"
    "}\n";

static kr_problem *parse_ok(kr_context *ctx, const char *text)
{
    kr_problem *p = NULL;
    int rc = kr_problem_parse(&p, ctx, text, strlen(text), "p.json", NULL);
    if (rc != KR_OK)
        fail_msg("parse failed: %s", kr_context_errmsg(ctx));
    return p;
}

static void valid_problem(void **state)
{
    (void)state;
    kr_context *ctx = test_context(NULL);
    kr_problem *p = parse_ok(ctx, VALID);
    assert_string_equal(kr_problem_name(p), "softmax_rows");
    assert_int_equal(kr_problem_dim_count(p), 2);
    assert_int_equal(kr_problem_case_count(p), 2);
    assert_int_equal(kr_problem_timing_case(p), 1);
    assert_string_equal(kr_problem_case_name(p, 0), "small");
    assert_int_equal(kr_problem_case_dim(p, 1, 1), 4099);
    assert_int_equal(kr_problem_tensor_count(p), 4);
    assert_int_equal(kr_problem_find_tensor(p, "y"), 2);
    assert_int_equal(kr_problem_tensor_dtype(p, 1), KR_DTYPE_BF16);
    assert_int_equal(kr_problem_tensor_role(p, 3), KR_ROLE_INOUT);
    assert_int_equal(kr_problem_tensor_bytes(p, 0, 1), 1000ull * 4099 * 4);
    assert_int_equal(kr_problem_tensor_bytes(p, 1, 0), 33 * 2);
    assert_int_equal(kr_problem_tensor_bytes(p, 3, 0), 2 * 2 * 8); /* cdiv(3,2) x 2 f64 */
    int64_t ext[4];
    assert_int_equal(kr_problem_tensor_shape(ext, 4, p, 3, 1), 2);
    assert_int_equal(ext[0], 500);
    double rtol, atol;
    kr_problem_tensor_tolerance(&rtol, &atol, p, 2);
    assert_true(rtol == 1e-5);
    assert_true(atol == 1e-5); /* f32 default kept */
    kr_problem_tensor_tolerance(&rtol, &atol, p, 3);
    assert_true(rtol == 1e-7); /* f64 defaults */
    assert_int_equal(kr_problem_reference_kind(p), KR_REFERENCE_GOLDEN);
    assert_int_equal(strlen(kr_problem_hash(p)), 32);
    char *json = NULL;
    assert_int_equal(kr_problem_json(&json, p), KR_OK);
    assert_contains(json, "\"roofline_bytes\": 32792000");
    assert_contains(json, "\"dist\": \"normal\"");
    assert_contains(json, "\"NVIDIA H200\": 12.5");
    kr_free(json);
    kr_problem_free(p);
    kr_context_free(ctx);
}

static void hash_is_canonical(void **state)
{
    (void)state;
    kr_context *ctx = test_context(NULL);
    kr_problem *a = parse_ok(ctx, VALID);
    /* same content, other whitespace and key order: same hash */
    kr_problem *b = parse_ok(ctx,
        "{\"dims\":[\"M\",\"N\"],\"name\":\"softmax_rows\",\"description\":\"row softmax\","
        "\"cases\":[{\"N\":33,\"name\":\"small\",\"M\":3},{\"name\":\"big\",\"M\":1000,\"N\":4099,"
        "\"timing\":true}],\"tensors\":[{\"name\":\"x\",\"dtype\":\"f32\",\"shape\":[\"M\",\"N\"],"
        "\"role\":\"in\",\"init\":{\"dist\":\"normal\",\"mean\":0,\"std\":2}},{\"name\":\"w\","
        "\"dtype\":\"bf16\",\"shape\":[\"N\"],\"role\":\"in\"},{\"name\":\"y\",\"dtype\":\"f32\","
        "\"shape\":[\"M\",\"N\"],\"role\":\"out\",\"tolerance\":{\"rtol\":1e-5}},{\"name\":"
        "\"stats\",\"dtype\":\"f64\",\"shape\":[\"cdiv(M, 2)\",2],\"role\":\"inout\"}],"
        "\"scalars\":[{\"name\":\"eps\",\"dtype\":\"f32\",\"value\":1e-5}],\"reference\":"
        "{\"golden\":true},\"bytes\":\"M*N*8\",\"flops\":\"5*M*N\",\"baseline_us\":"
        "{\"NVIDIA H200\":12.5}}");
    assert_string_equal(kr_problem_hash(a), kr_problem_hash(b));
    char *changed = kr__strdup_for_test(VALID);
    char *at = strstr(changed, "4099");
    at[3] = '8';
    kr_problem *c = parse_ok(ctx, changed);
    assert_string_not_equal(kr_problem_hash(a), kr_problem_hash(c));
    free(changed);
    kr_problem_free(a);
    kr_problem_free(b);
    kr_problem_free(c);
    kr_context_free(ctx);
}

/* A minimal valid body; each malformed spec replaces one part. */
#define HEAD "{\"name\": \"p\", \"dims\": [\"N\"], "
#define CASES "\"cases\": [{\"N\": 7}, {\"N\": 1000}], "
#define OUT "{\"name\": \"y\", \"dtype\": \"f32\", \"shape\": [\"N\"], \"role\": \"out\"}"
#define IN "{\"name\": \"x\", \"dtype\": \"f32\", \"shape\": [\"N\"], \"role\": \"in\"}"
#define REF "\"reference\": {\"golden\": true}"
#define T(...) "\"tensors\": [" __VA_ARGS__ "], "

static const struct {
    const char *text;
    int code;
    const char *expected;
} MALFORMED[] = {
    {"", KR_EPARSE, "p.json:1:0:"},
    {"{\"name\": \"p\",\n \"dims\": [\"N\"\n}", KR_EPARSE, "p.json:3:1:"},
    {"[1, 2]", KR_EPARSE, "a problem is a JSON object"},
    {"{\"dims\": [\"N\"], " CASES T(OUT) REF "}", KR_EPARSE, "name: a problem needs a \"name\""},
    {HEAD CASES T(OUT) REF ", \"extra\": 1}", KR_EPARSE, "extra: unknown field 'extra'"},
    {"{\"name\": \"p\", \"name\": \"q\"}", KR_EPARSE, "duplicate object key"},
    {"{\"name\": \"p\", \"dims\": [], " CASES T(OUT) REF "}", KR_EPARSE, "dims: expected a non-empty array"},
    {"{\"name\": \"p\", \"dims\": [\"N\", \"N\"], " CASES T(OUT) REF "}", KR_EPARSE, "dims[1]: duplicate dim 'N'"},
    {"{\"name\": \"p\", \"dims\": [\"2N\"], " CASES T(OUT) REF "}", KR_EPARSE, "dims[0]: a dim name must be an identifier"},
    {"{\"name\": \"p\", \"dims\": [\"max\"], " CASES T(OUT) REF "}", KR_EPARSE, "function name"},
    {HEAD "\"cases\": [], " T(OUT) REF "}", KR_EPARSE, "cases: expected a non-empty array"},
    {HEAD "\"cases\": [{\"M\": 3}], " T(OUT) REF "}", KR_EPARSE, "cases[0].M: 'M' is not a dim"},
    {HEAD "\"cases\": [{\"name\": \"a\"}], " T(OUT) REF "}", KR_EPARSE, "cases[0]: case misses dim 'N'"},
    {HEAD "\"cases\": [{\"N\": 0}], " T(OUT) REF "}", KR_EPARSE, "cases[0].N: a dim value must be an integer >= 1"},
    {HEAD "\"cases\": [{\"N\": -4}], " T(OUT) REF "}", KR_EPARSE, "integer >= 1"},
    {HEAD "\"cases\": [{\"N\": 2.5}], " T(OUT) REF "}", KR_EPARSE, "integer >= 1"},
    {HEAD "\"cases\": [{\"N\": 1, \"timing\": true}, {\"N\": 2, \"timing\": true}], " T(OUT) REF "}", KR_EPARSE, "two timing cases"},
    {HEAD "\"cases\": [{\"name\": \"a\", \"N\": 1}, {\"name\": \"a\", \"N\": 2}], " T(OUT) REF "}", KR_EPARSE, "duplicate case name 'a'"},
    {HEAD CASES T(IN) REF "}", KR_EPARSE, "no tensor has role out or inout"},
    {HEAD CASES "\"tensors\": [], " REF "}", KR_EPARSE, "tensors: expected a non-empty array"},
    {HEAD CASES T(OUT ", " OUT) REF "}", KR_EPARSE, "tensors[1].name: duplicate tensor name 'y'"},
    {HEAD CASES T("{\"name\": \"N\", \"dtype\": \"f32\", \"shape\": [\"N\"], \"role\": \"out\"}") REF "}", KR_EPARSE, "already a dim or scalar name"},
    {HEAD CASES T("{\"name\": \"y\", \"dtype\": \"f33\", \"shape\": [\"N\"], \"role\": \"out\"}") REF "}", KR_EPARSE, "tensors[0].dtype: unsupported dtype 'f33' (supported: f32, f16"},
    {HEAD CASES T("{\"name\": \"y\", \"dtype\": \"f32\", \"shape\": [\"N\"], \"role\": \"output\"}") REF "}", KR_EPARSE, "tensors[0].role: role must be in, out or inout"},
    {HEAD CASES T("{\"name\": \"y\", \"dtype\": \"f32\", \"shape\": [\"K\"], \"role\": \"out\"}") REF "}", KR_EPARSE, "tensors[0].shape[0]: in \"K\": column 1: unknown name 'K' (known: N)"},
    {HEAD CASES T("{\"name\": \"y\", \"dtype\": \"f32\", \"shape\": [\"N/(N-7)\"], \"role\": \"out\"}") REF "}", KR_EPARSE, "tensors[0].shape: case 'case0': division by zero"},
    {HEAD CASES T("{\"name\": \"y\", \"dtype\": \"f32\", \"shape\": [\"N-8\"], \"role\": \"out\"}") REF "}", KR_EPARSE, "negative"},
    {HEAD CASES T("{\"name\": \"y\", \"dtype\": \"f32\", \"shape\": [\"N*1000000000000\", \"N*1000000000\"], \"role\": \"out\"}") REF "}", KR_ERANGE, "size overflows 64 bits"},
    {HEAD CASES T("{\"name\": \"y\", \"dtype\": \"f32\", \"shape\": [\"N*1000000000000\"], \"role\": \"out\"}") REF "}", KR_ETOOBIG, "over the"},
    {HEAD CASES T("{\"name\": \"y\", \"dtype\": \"f32\", \"shape\": \"N\", \"role\": \"out\"}") REF "}", KR_EPARSE, "tensors[0].shape: expected an array"},
    {HEAD CASES T("{\"name\": \"y\", \"dtype\": \"f32\", \"shape\": [1.5], \"role\": \"out\"}") REF "}", KR_EPARSE, "expected an integer expression"},
    {HEAD CASES T(OUT ", {\"name\": \"x\", \"dtype\": \"f32\", \"shape\": [\"N\"], \"role\": \"in\", \"init\": {\"dist\": \"gauss\"}}") REF "}", KR_EPARSE, "tensors[1].init: unknown dist 'gauss'"},
    {HEAD CASES T(OUT ", {\"name\": \"x\", \"dtype\": \"f32\", \"shape\": [\"N\"], \"role\": \"in\", \"init\": {\"dist\": \"uniform\", \"low\": 1, \"high\": 1}}") REF "}", KR_EPARSE, "uniform needs low < high"},
    {HEAD CASES T(OUT ", {\"name\": \"x\", \"dtype\": \"f32\", \"shape\": [\"N\"], \"role\": \"in\", \"init\": {\"dist\": \"normal\", \"std\": 0}}") REF "}", KR_EPARSE, "normal needs std > 0"},
    {HEAD CASES T(OUT ", {\"name\": \"x\", \"dtype\": \"f16\", \"shape\": [\"N\"], \"role\": \"in\", \"init\": {\"dist\": \"uniform\", \"low\": 0, \"high\": 100000}}") REF "}", KR_EPARSE, "range exceeds what f16 can hold"},
    {HEAD CASES T(OUT ", {\"name\": \"x\", \"dtype\": \"i8\", \"shape\": [\"N\"], \"role\": \"in\", \"init\": {\"dist\": \"int\", \"low\": 0, \"high\": 300}}") REF "}", KR_EPARSE, "exceeds i8 [-128, 127]"},
    {HEAD CASES T(OUT ", {\"name\": \"x\", \"dtype\": \"i32\", \"shape\": [\"N\"], \"role\": \"in\", \"init\": {\"dist\": \"normal\"}}") REF "}", KR_EPARSE, "i32 tensors take int or bernoulli inputs"},
    {HEAD CASES T(OUT ", {\"name\": \"x\", \"dtype\": \"bool\", \"shape\": [\"N\"], \"role\": \"in\", \"init\": {\"dist\": \"bernoulli\", \"p\": 1}}") REF "}", KR_EPARSE, "bernoulli needs 0 < p < 1"},
    {HEAD CASES T(OUT ", {\"name\": \"x\", \"dtype\": \"f32\", \"shape\": [\"N\"], \"role\": \"in\", \"init\": {\"dist\": \"mix\", \"base\": {\"dist\": \"int\"}}}") REF "}", KR_EPARSE, "the base of a mix is uniform, normal or pareto"},
    {HEAD CASES T(OUT ", {\"name\": \"x\", \"dtype\": \"f32\", \"shape\": [\"N\"], \"role\": \"in\", \"init\": {\"dist\": \"pareto\", \"alpha\": 0}}") REF "}", KR_EPARSE, "pareto needs alpha >= 0.1"},
    {HEAD CASES T(OUT ", {\"name\": \"x\", \"dtype\": \"f32\", \"shape\": [\"N\"], \"role\": \"in\", \"init\": {\"dist\": \"normal\", \"sigma\": 1}}") REF "}", KR_EPARSE, "tensors[1].init.sigma: unknown field 'sigma'"},
    {HEAD CASES T("{\"name\": \"y\", \"dtype\": \"f32\", \"shape\": [\"N\"], \"role\": \"out\", \"init\": {\"dist\": \"normal\"}}") REF "}", KR_EPARSE, "an output is poisoned"},
    {HEAD CASES T(OUT ", {\"name\": \"x\", \"dtype\": \"f32\", \"shape\": [\"N\"], \"role\": \"in\", \"tolerance\": {\"rtol\": 1}}") REF "}", KR_EPARSE, "inputs have no tolerance"},
    {HEAD CASES T("{\"name\": \"y\", \"dtype\": \"f32\", \"shape\": [\"N\"], \"role\": \"out\", \"tolerance\": {\"rtol\": -1}}") REF "}", KR_EPARSE, "tolerances must be >= 0"},
    {HEAD CASES T(OUT) "\"scalars\": [{\"name\": \"eps\", \"dtype\": \"f16\", \"value\": 1}], " REF "}", KR_EPARSE, "scalar dtype must be f32, f64, i32 or i64"},
    {HEAD CASES T(OUT) "\"scalars\": [{\"name\": \"k\", \"dtype\": \"i32\", \"value\": 0.5}], " REF "}", KR_EPARSE, "an integer scalar needs an integer value"},
    {HEAD CASES T(OUT) "\"scalars\": [{\"name\": \"k\", \"dtype\": \"i32\", \"value\": 4000000000}], " REF "}", KR_EPARSE, "does not fit i32"},
    {HEAD CASES T(OUT) "\"scalars\": [{\"name\": \"N\", \"dtype\": \"i32\", \"value\": 1}], " REF "}", KR_EPARSE, "scalars[0].name: duplicate name 'N'"},
    {HEAD CASES T(OUT) "\"reference\": {}}", KR_EPARSE, "give exactly one of source, cuda, golden"},
    {HEAD CASES T(OUT) "\"reference\": {\"golden\": true, \"cuda\": \"x\"}}", KR_EPARSE, "give exactly one"},
    {HEAD CASES T(OUT) "\"reference\": {\"source\": \"does/not/exist.cu\"}}", KR_EIO, "cannot read does/not/exist.cu"},
    {HEAD CASES T(OUT) "\"reference\": {\"golden\": false}}", KR_EPARSE, "must be true"},
    {HEAD CASES T(OUT) "\"reference\": {\"golden\": true, \"fast\": {\"cuda\": \"x\"}}}", KR_EPARSE, "reference.fast: a golden reference has no fast kernel"},
    {HEAD CASES T(OUT) "\"reference\": {\"cuda\": \"x\", \"fast\": \"f.cu\"}}", KR_EPARSE, "reference.fast: expected {\"source\""},
    {HEAD CASES T(OUT) "\"reference\": {\"cuda\": \"x\", \"fast\": {}}}", KR_EPARSE, "reference.fast: give exactly one of source, cuda"},
    {HEAD CASES T(OUT) "\"reference\": {\"cuda\": \"x\", \"fast\": {\"cuda\": \"\"}}}", KR_EPARSE, "reference.fast.cuda: expected CUDA source text"},
    {HEAD CASES T(OUT) "\"reference\": {\"cuda\": \"x\", \"fast\": {\"source\": \"no/fast.cu\"}}}", KR_EIO, "reference.fast.source: cannot read no/fast.cu"},
    {HEAD CASES T(OUT) "\"reference\": {\"cuda\": \"x\", \"fast\": {\"cuda\": \"y\", \"grid\": 1}}}", KR_EPARSE, "unknown field 'grid'"},
    {HEAD CASES T(OUT) REF ", \"bytes\": \"N*Q\"}", KR_EPARSE, "bytes: in \"N*Q\": column 3: unknown name 'Q'"},
    {HEAD CASES T(OUT) REF ", \"baseline_us\": {\"H200\": -3}}", KR_EPARSE, "baseline_us.H200: a baseline time must be a positive number"},
};

static void malformed_specs(void **state)
{
    (void)state;
    kr_context *ctx = test_context(NULL);
    size_t n = sizeof MALFORMED / sizeof MALFORMED[0];
    assert_true(n >= 30);
    for (size_t i = 0; i < n; i++) {
        kr_problem *p = (kr_problem *)0x1;
        int rc = kr_problem_parse(&p, ctx, MALFORMED[i].text, strlen(MALFORMED[i].text), "p.json",
                                  NULL);
        if (rc != MALFORMED[i].code || !contains(kr_context_errmsg(ctx), MALFORMED[i].expected))
            fail_msg("spec %zu: got %s \"%s\"; expected %s \"...%s...\"\n%s", i,
                     kr_status_name(rc), kr_context_errmsg(ctx),
                     kr_status_name(MALFORMED[i].code), MALFORMED[i].expected, MALFORMED[i].text);
        assert_null(p);
    }
    kr_context_free(ctx);
}

static void error_positions(void **state)
{
    (void)state;
    kr_context *ctx = test_context(NULL);
    const char *text =
        "{\n"
        "  \"name\": \"p\",\n"
        "  \"dims\": [\"N\"],\n"
        "  \"cases\": [{\"N\": 4}, {\"N\": 9}],\n"
        "  \"tensors\": [\n"
        "    {\"name\": \"y\", \"dtype\": \"f32\",\n"
        "     \"shape\": [\"N\", \"Q\"], \"role\": \"out\"}\n"
        "  ],\n"
        "  \"reference\": {\"golden\": true}\n"
        "}\n";
    kr_problem *p = NULL;
    assert_int_equal(kr_problem_parse(&p, ctx, text, strlen(text), "spec.json", NULL), KR_EPARSE);
    /* line 7, the column of "Q" */
    assert_contains(kr_context_errmsg(ctx), "spec.json:7:21: tensors[0].shape[1]:");
    kr_context_free(ctx);
}

static void default_timing_case_is_largest(void **state)
{
    (void)state;
    kr_context *ctx = test_context(NULL);
    const char *text = HEAD "\"cases\": [{\"N\": 7}, {\"N\": 100000}, {\"N\": 30}], " T(OUT) REF "}";
    kr_problem *p = parse_ok(ctx, text);
    assert_int_equal(kr_problem_timing_case(p), 1);
    kr_problem_free(p);
    kr_context_free(ctx);
}

/* A spec of n one-element input tensors and one output. */
static char *spec_with_tensors(size_t n)
{
    char *text = malloc(n * 96 + 256), *at = text; /* an entry is under 70 bytes */
    at += sprintf(at, "{\"name\": \"wide\", \"dims\": [\"N\"], \"cases\": [{\"N\": 4}], \"tensors\": [");
    for (size_t t = 0; t + 1 < n; t++)
        at += sprintf(at, "{\"name\": \"x%zu\", \"dtype\": \"f32\", \"shape\": [\"N\"], \"role\": \"in\"}, ",
                      t);
    sprintf(at, "{\"name\": \"y\", \"dtype\": \"f32\", \"shape\": [\"N\"], \"role\": \"out\"}], "
                "\"reference\": {\"golden\": true}}");
    return text;
}

/* A KernelBench model's lifted parameters make hundreds of tensors: 1024
 * are taken (the limit was 64), one more is refused with both numbers. */
static void many_tensors_up_to_the_limit(void **state)
{
    (void)state;
    kr_context *ctx = test_context(NULL);
    char *text = spec_with_tensors(1024);
    kr_problem *p = parse_ok(ctx, text);
    assert_int_equal(kr_problem_tensor_count(p), 1024);
    assert_int_equal(kr_problem_find_tensor(p, "y"), 1023);
    kr_problem_free(p);
    free(text);
    text = spec_with_tensors(1025);
    p = NULL;
    assert_int_equal(kr_problem_parse(&p, ctx, text, strlen(text), "p.json", NULL), KR_EPARSE);
    assert_contains(kr_context_errmsg(ctx), "1025 tensors, at most 1024");
    assert_null(p);
    free(text);
    kr_context_free(ctx);
}

static void load_from_file_with_relative_reference(void **state)
{
    (void)state;
    kr_context *ctx = test_context(NULL);
    char *dir = test_tempdir();
    char path[4200];
    snprintf(path, sizeof path, "%s/ref.cu", dir);
    FILE *f = fopen(path, "w");
    fputs("// kreward: launch k grid=(cdiv(N,128)) block=(128) args=(y, N)\n"
          "extern \"C\" __global__ void k(float* y, int n) {\n"
          "  int i = blockIdx.x * 128 + threadIdx.x; if (i < n) y[i] = 1.0f; }\n", f);
    fclose(f);
    snprintf(path, sizeof path, "%s/problem.json", dir);
    f = fopen(path, "w");
    fputs(HEAD CASES T(OUT) "\"reference\": {\"source\": \"ref.cu\"}}", f);
    fclose(f);
    kr_problem *p = NULL;
    assert_int_equal(kr_problem_load(&p, ctx, path), KR_OK);
    assert_int_equal(kr_problem_reference_kind(p), KR_REFERENCE_SOURCE);
    if (kr_problem_check_reference(ctx, p) != KR_OK)
        fail_msg("%s", kr_context_errmsg(ctx));
    kr_problem_free(p);
    assert_int_equal(kr_problem_load(&p, ctx, "/nonexistent/problem.json"), KR_EIO);
    test_rmtree(dir);
    kr_context_free(ctx);
}

static kr_problem *load_in(kr_context *ctx, const char *dir)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/problem.json", dir);
    kr_problem *p = NULL;
    if (kr_problem_load(&p, ctx, path) != KR_OK)
        fail_msg("%s", kr_context_errmsg(ctx));
    return p;
}

/* reference.fast: read beside the problem, named in its JSON, part of its
 * hash (a changed fast kernel is another problem for every cache keyed by
 * it), and inlined in the spec a worker parses without the files. */
static void fast_reference_is_read_hashed_and_inlined(void **state)
{
    (void)state;
    kr_context *ctx = test_context(NULL);
    char *dir = test_tempdir();
    const char *ref = "// kreward: launch k grid=(cdiv(N,128)) block=(128) args=(y, N)\n"
                      "extern \"C\" __global__ void k(float* y, int n) {\n"
                      "  int i = blockIdx.x * 128 + threadIdx.x; if (i < n) y[i] = 1.0f; }\n";
    test_write_file(dir, "ref.cu", ref);
    test_write_file(dir, "problem.json", HEAD CASES T(OUT) "\"reference\": {\"source\": \"ref.cu\"}}");
    kr_problem *plain = load_in(ctx, dir);
    test_write_file(dir, "fast.cu", ref);
    test_write_file(dir, "problem.json",
               HEAD CASES T(OUT) "\"reference\": {\"source\": \"ref.cu\", \"fast\": {\"source\": \"fast.cu\"}}}");
    kr_problem *p = load_in(ctx, dir);
    assert_string_equal(p->fast_name, "fast.cu");
    assert_string_equal(p->fast_source, ref);
    assert_null(p->fast_plan_json);
    assert_string_not_equal(kr_problem_hash(p), kr_problem_hash(plain));
    char *json = NULL;
    assert_int_equal(kr_problem_json(&json, p), KR_OK);
    assert_contains(json, "\"fast\": \"fast.cu\"");
    free(json);
    /* the spec a worker gets needs neither file */
    assert_contains(p->spec, "\"fast\":{\"cuda\":");
    assert_null(strstr(p->spec, "fast.cu"));
    kr_problem *again = NULL;
    if (kr_problem_parse(&again, ctx, p->spec, strlen(p->spec), "worker.json", "/nonexistent") != KR_OK)
        fail_msg("%s", kr_context_errmsg(ctx));
    assert_string_equal(again->fast_source, ref);
    /* a different fast kernel, a different problem; one that does not
     * compile fails the problem's check, named */
    assert_int_equal(kr_problem_check_reference(ctx, p), KR_OK);
    test_write_file(dir, "fast.cu", "// another\n");
    kr_problem *other = load_in(ctx, dir);
    assert_string_not_equal(kr_problem_hash(other), kr_problem_hash(p));
    assert_int_not_equal(kr_problem_check_reference(ctx, other), KR_OK);
    assert_contains(kr_context_errmsg(ctx), "reference.fast: ");
    kr_problem_free(other);
    kr_problem_free(again);
    kr_problem_free(p);
    kr_problem_free(plain);
    test_rmtree(dir);
    kr_context_free(ctx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(valid_problem),
        cmocka_unit_test(hash_is_canonical),
        cmocka_unit_test(malformed_specs),
        cmocka_unit_test(error_positions),
        cmocka_unit_test(default_timing_case_is_largest),
        cmocka_unit_test(many_tensors_up_to_the_limit),
        cmocka_unit_test(load_from_file_with_relative_reference),
        cmocka_unit_test(fast_reference_is_read_hashed_and_inlined),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
