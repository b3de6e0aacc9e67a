/* The integer expression evaluator: precedence, cdiv, overflow, errors. */
#include "helpers.h"

#include "common/expr.h"

#include <limits.h>

static const char *const NAMES[] = {"M", "N", "K"};
static const int64_t VALUES[] = {7, 100, -3};

static int64_t eval_ok(const char *text)
{
    char why[300] = "";
    kr__expr *e = kr__expr_parse(text, NAMES, 3, why, sizeof why);
    if (!e)
        fail_msg("parse of '%s' failed: %s", text, why);
    int64_t v = 0;
    if (kr__expr_eval(e, VALUES, &v, why, sizeof why) != 0)
        fail_msg("eval of '%s' failed: %s", text, why);
    kr__expr_free(e);
    return v;
}

static void parse_fails(const char *text, const char *expected)
{
    char why[300] = "";
    kr__expr *e = kr__expr_parse(text, NAMES, 3, why, sizeof why);
    if (e)
        fail_msg("'%s' parsed, expected an error containing '%s'", text, expected);
    assert_contains(why, expected);
}

static void eval_fails(const char *text, const char *expected)
{
    char why[300] = "";
    kr__expr *e = kr__expr_parse(text, NAMES, 3, why, sizeof why);
    assert_non_null(e);
    int64_t v;
    assert_int_equal(kr__expr_eval(e, VALUES, &v, why, sizeof why), -1);
    assert_contains(why, expected);
    kr__expr_free(e);
}

static void arithmetic(void **state)
{
    (void)state;
    assert_int_equal(eval_ok("1 + 2 * 3"), 7);
    assert_int_equal(eval_ok("(1 + 2) * 3"), 9);
    assert_int_equal(eval_ok("N - M - 1"), 92); /* left associative */
    assert_int_equal(eval_ok("N / M / 2"), 7);
    assert_int_equal(eval_ok("N % M"), 2);
    assert_int_equal(eval_ok("-M"), -7);
    assert_int_equal(eval_ok("--M"), 7);
    assert_int_equal(eval_ok("+M"), 7);
    assert_int_equal(eval_ok("2 * -M"), -14);
    assert_int_equal(eval_ok("min(M, N)"), 7);
    assert_int_equal(eval_ok("max(M, N) * 2"), 200);
    assert_int_equal(eval_ok("max(min(M, K), 0)"), 0);
    assert_int_equal(eval_ok("M*N*4"), 2800);
    assert_int_equal(eval_ok("  N  "), 100);
    assert_int_equal(eval_ok("9223372036854775807"), INT64_MAX);
}

static void division_semantics(void **state)
{
    (void)state;
    /* C truncation for / and %, mathematical ceiling for cdiv */
    assert_int_equal(eval_ok("-7 / 2"), -3);
    assert_int_equal(eval_ok("-7 % 2"), -1);
    assert_int_equal(eval_ok("cdiv(N, M)"), 15);
    assert_int_equal(eval_ok("cdiv(N, 4)"), 25);
    assert_int_equal(eval_ok("cdiv(0, 5)"), 0);
    assert_int_equal(eval_ok("cdiv(-7, 2)"), -3);
    assert_int_equal(eval_ok("cdiv(7, -2)"), -3);
    assert_int_equal(eval_ok("cdiv(-7, -2)"), 4);
    assert_int_equal(eval_ok("cdiv(K, 2)"), -1);
    assert_int_equal(eval_ok("cdiv(1, 1)"), 1);
}

static void overflow_and_zero(void **state)
{
    (void)state;
    eval_fails("9223372036854775807 + 1", "overflow in +");
    eval_fails("-9223372036854775807 - 2", "overflow in -");
    eval_fails("4294967296 * 4294967296", "overflow in *");
    eval_fails("N / (M - 7)", "division by zero");
    eval_fails("N % 0", "modulo by zero");
    eval_fails("cdiv(N, M - 7)", "division by zero");
    eval_fails("(-9223372036854775807 - 1) / -1", "overflow");
    eval_fails("-(-9223372036854775807 - 1)", "overflow in unary -");
    eval_fails("cdiv(-9223372036854775807 - 1, -1)", "overflow");
}

static void syntax_errors(void **state)
{
    (void)state;
    parse_fails("", "empty expression");
    parse_fails("   ", "empty expression");
    parse_fails("M +", "expected a value");
    parse_fails("(M", "expected ')'");
    parse_fails("M)", "unexpected ')'");
    parse_fails("Q * 2", "unknown name 'Q' (known: M, N, K)");
    parse_fails("floor(M, 2)", "unknown function 'floor'");
    parse_fails("min(M)", "expected ','");
    parse_fails("M ** 2", "column 4");
    parse_fails("1.5 * M", "plain integer");
    parse_fails("99999999999999999999", "too large");
    parse_fails("M N", "unexpected 'N'");
    parse_fails("M & 1", "unexpected '&'");
    char deep[300];
    memset(deep, '(', 200);
    deep[200] = 'M';
    memset(deep + 201, ')', 200 < 98 ? 0 : 98);
    deep[299] = '\0';
    parse_fails(deep, "nested too deeply");
}

static void uses_and_text(void **state)
{
    (void)state;
    char why[100];
    kr__expr *e = kr__expr_parse("cdiv(N, 256)", NAMES, 3, why, sizeof why);
    assert_true(kr__expr_uses(e, 1));
    assert_false(kr__expr_uses(e, 0));
    assert_string_equal(kr__expr_text(e), "cdiv(N, 256)");
    kr__expr_free(e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(arithmetic),
        cmocka_unit_test(division_semantics),
        cmocka_unit_test(overflow_and_zero),
        cmocka_unit_test(syntax_errors),
        cmocka_unit_test(uses_and_text),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
