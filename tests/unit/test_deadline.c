/* A verification run's deadline (verify/verify_deadline.c): 10^5 times the
 * reference's time on the case, at least the floor, at most the caller's
 * timeout_s; no reference time (a golden reference, or none measured): the
 * timeout itself. */
#include "helpers.h"

#include "verify/verify_impl.h"

static void deadline_follows_the_reference_between_floor_and_timeout(void **state)
{
    (void)state;
    /* none measured: the caller's timeout */
    assert_true(kr__vdeadline_rule(0, 10) == 10);
    assert_true(kr__vdeadline_rule(-1, 10) == 10);
    /* a launch of a few microseconds: the floor */
    assert_true(kr__vdeadline_rule(2e-6, 10) == KR__DEADLINE_FLOOR_S);
    /* in between: the factor */
    double d = kr__vdeadline_rule(1e-5, 10);
    assert_true(d > 0.99 && d < 1.01);
    /* a slow reference: the caller's timeout caps it */
    assert_true(kr__vdeadline_rule(1e-3, 10) == 10);
    assert_true(kr__vdeadline_rule(1e-3, 2) == 2);
    /* a timeout under the floor is the caller's to set */
    assert_true(kr__vdeadline_rule(2e-6, 0.1) == 0.1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(deadline_follows_the_reference_between_floor_and_timeout),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
