/* Profile mode's wait sites (lib/run/wait_sites.c): one entry per call
 * site in first-seen order, the host's time counted from the wait before,
 * the table's last slot shared once full, and the report keys' slugs. */
#include "helpers.h"

#include "run/wait_sites.h"

#include <stdio.h>

static void sites_count_waits_and_the_host_time_before_them(void **state)
{
    (void)state;
    kr__wait_sites w = {0};
    kr__wait_sites_note(&w, "a timed sample", 1.0, 1.5); /* off: nothing */
    assert_int_equal(w.num, 0);
    w.on = 1;
    w.last_end = 0.5; /* the evaluation began */
    kr__wait_sites_note(&w, "the plan", 1.0, 1.25);
    char copy[] = "a timed sample"; /* the same text at another address: the same site */
    kr__wait_sites_note(&w, "a timed sample", 2.0, 2.5);
    kr__wait_sites_note(&w, copy, 3.0, 3.25);
    assert_int_equal(w.num, 2);
    assert_string_equal(w.site[0].what, "the plan");
    assert_true(w.site[0].n == 1);
    assert_true(w.site[0].host_s == 0.5 && w.site[0].wait_s == 0.25);
    assert_true(w.site[1].n == 2);
    /* host 1.25 -> 2.0 and 2.5 -> 3.0 */
    assert_true(w.site[1].host_s == 1.25 && w.site[1].wait_s == 0.75);
    assert_true(w.last_end == 3.25);
}

static void a_full_table_puts_new_sites_in_its_last_slot(void **state)
{
    (void)state;
    static char names[KR__WAIT_SITES + 3][16];
    kr__wait_sites w = {0};
    w.on = 1;
    for (int i = 0; i < KR__WAIT_SITES + 3; i++) {
        snprintf(names[i], sizeof names[i], "site %d", i);
        kr__wait_sites_note(&w, names[i], i, i + 0.5);
    }
    assert_int_equal(w.num, KR__WAIT_SITES);
    assert_true(w.site[KR__WAIT_SITES - 1].n == 4); /* its own wait and the three past room */
    assert_true(w.site[0].n == 1);
}

static void slugs_are_report_key_parts(void **state)
{
    (void)state;
    char out[40];
    kr__wait_site_slug("the benchmark's last queued inputs", out, sizeof out);
    assert_string_equal(out, "the_benchmark_s_last_queued_inputs");
    kr__wait_site_slug("  A timed sample  ", out, sizeof out);
    assert_string_equal(out, "a_timed_sample");
    char small[6];
    kr__wait_site_slug("reading check results", small, sizeof small);
    assert_string_equal(small, "readi");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(sites_count_waits_and_the_host_time_before_them),
        cmocka_unit_test(a_full_table_puts_new_sites_in_its_last_slot),
        cmocka_unit_test(slugs_are_report_key_parts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
