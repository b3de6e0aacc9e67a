/* The example custom term (examples/custom_term), tested the way a user
 * tests their own: hand-filled reports, no GPU. */
#include "helpers.h"

#include "../../examples/custom_term/bandwidth_term.c"

static void scores_bandwidth(void **state)
{
    (void)state;
    kr_context *ctx = test_context(NULL);
    kr_reward *reward;
    assert_int_equal(kr_reward_new(&reward, ctx), KR_OK);
    assert_int_equal(kr_reward_register(reward, &bandwidth_term, sizeof bandwidth_term), KR_OK);
    assert_int_equal(kr_reward_add(reward, "bandwidth", "{\"exponent\": 2}", 0.5, KR_GATE_DEFAULT),
                     KR_OK);
    kr_report *r;
    kr_report_new(&r);
    kr_report_set_verdict(r, KR_VERDICT_PASSED);
    kr_report_set(r, "achieved_gbps", 3000);
    kr_report_set(r, "peak_gbps", 4000);
    double v;
    assert_int_equal(kr_reward_score(&v, reward, r), KR_OK);
    assert_true(fabs(v - 0.5 * 0.75 * 0.75) < 1e-12);
    /* gated: an incorrect candidate gets nothing from it */
    kr_report_set_verdict(r, KR_VERDICT_INCORRECT);
    assert_int_equal(kr_reward_score(&v, reward, r), KR_OK);
    assert_true(v == 0);
    /* missing metrics: an error naming the term */
    kr_report *empty;
    kr_report_new(&empty);
    kr_report_set_verdict(empty, KR_VERDICT_PASSED);
    assert_int_equal(kr_reward_score(&v, reward, empty), KR_EPLUGIN);
    assert_contains(kr_context_errmsg(ctx), "term 'bandwidth' failed: needs achieved_gbps");
    assert_int_equal(kr_reward_add(reward, "bandwidth", "{\"exponent\": -1}", 1, 0), KR_EPLUGIN);
    assert_contains(kr_context_errmsg(ctx), "exponent must be positive");
    kr_report_free(empty);
    kr_report_free(r);
    kr_reward_free(reward);
    kr_context_free(ctx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(scores_bandwidth)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
