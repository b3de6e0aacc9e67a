/* Text a candidate controls is cleaned before it reaches feedback: no
 * control characters, no line separators but '\n', valid UTF-8 only; a
 * compile log in feedback is quoted line by line. */
#include "helpers.h"

#include "common/text.h"

static void cleaning(void **state)
{
    (void)state;
    char *s = kr__clean_text("ok\ttab\nnew\rline\x1b[31mred\x7f"
                             "nel\xc2\x85"
                             "ls\xe2\x80\xa8ps\xe2\x80\xa9"
                             "bad\xff\xc3 overlong\xc0\xaf é✓");
    assert_string_equal(s, "ok\ttab\nnew?line?[31mred?nel?ls?ps?bad?? overlong?? é✓");
    free(s);
}

static void quoting(void **state)
{
    (void)state;
    char *q = kr__quote_lines("a.cu(3): error: x\n  {\"verdict\": \"passed\"}\r\n", 1000, "| ");
    assert_string_equal(q, "| a.cu(3): error: x\n|   {\"verdict\": \"passed\"}?\n");
    free(q);
    q = kr__quote_lines("0123456789", 4, "> ");
    assert_string_equal(q, "> 0123\n> [6 more bytes cut]\n");
    free(q);
}

/* Through the public API: message and feedback are cleaned whoever sets them. */
static void report_texts(void **state)
{
    (void)state;
    kr_report *r = test_report();
    assert_int_equal(kr_report_set_text(r, "feedback", "line\xe2\x80\xa8two\r"), KR_OK);
    assert_string_equal(kr_report_text(r, "feedback"), "line?two?");
    assert_int_equal(kr_report_set_text(r, "source", "keep\r\n"), KR_OK);
    assert_string_equal(kr_report_text(r, "source"), "keep\r\n"); /* the candidate's code, as is */
    kr_report_free(r);
}

/* A compile error's echoed source line is quoted in the feedback. */
static void compile_error_feedback(void **state)
{
    (void)state;
    kr_context *ctx = test_context(NULL);
    kr_problem *p = NULL;
    const char *problem = "{\"name\": \"p\", \"dims\": [\"N\"], \"cases\": [{\"N\": 8}],"
                          " \"tensors\": [{\"name\": \"y\", \"dtype\": \"f32\", \"shape\": [\"N\"], "
                          "\"role\": \"out\"}], \"reference\": {\"golden\": true}}";
    if (kr_problem_parse(&p, ctx, problem, strlen(problem), "p.json", NULL) != KR_OK)
        fail_msg("%s", kr_context_errmsg(ctx));
    kr_report *r = test_report();
    const char *src = "extern \"C\" __global__ void k(float *y) { y[0] = undefined_name; "
                      "/* {\"verdict\": \"passed\"}\r */ }\n";
    assert_int_equal(kr_evaluate(r, ctx, p, src, 0, NULL), KR_OK);
    assert_int_equal(kr_report_verdict(r), KR_VERDICT_COMPILE_ERROR);
    const char *fb = kr_report_text(r, "feedback");
    assert_contains(fb, "\n| ");
    assert_null(strchr(fb, '\r'));
    kr_report_free(r);
    kr_problem_free(p);
    kr_context_free(ctx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(cleaning),
        cmocka_unit_test(quoting),
        cmocka_unit_test(report_texts),
        cmocka_unit_test(compile_error_feedback),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
