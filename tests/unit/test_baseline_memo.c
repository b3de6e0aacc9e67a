/* The baseline memo's bookkeeping (bench/baseline_memo.h): samples kept per
 * key, the most recent ones, nothing older than the age limit, one source of
 * times per key, the least recent key evicted, and the agreement rule that
 * decides whether a benchmark may add the memo's samples to its own. */
#include "helpers.h"

#include "bench/baseline_memo.h"

#include <math.h>

static kr__memo_table *table(void)
{
    kr__memo_table *t = calloc(1, sizeof *t);
    assert_non_null(t);
    return t;
}

static void fill(double *v, size_t n, double base, double step)
{
    for (size_t i = 0; i < n; i++)
        v[i] = base + step * (double)i;
}

static void keeps_the_most_recent_samples(void **state)
{
    (void)state;
    kr__memo_table *t = table();
    kr__memo_view v;
    assert_int_equal(kr__memo_get(t, 7, 0.0, &v), 0);
    double a[40], b[40];
    fill(a, 40, 100, 0.01);
    fill(b, 40, 200, 0.01);
    kr__memo_add(t, 7, 1.0, a, 40, a, 40, 1);
    kr__memo_add(t, 7, 2.0, b, 40, b, 40, 1);
    assert_int_equal(kr__memo_get(t, 7, 2.5, &v), 1);
    assert_int_equal(v.n_event, KR__MEMO_SAMPLES);
    assert_int_equal(v.n_time, KR__MEMO_SAMPLES);
    assert_int_equal(v.cupti, 1);
    /* 80 went in, 48 stay: all 40 of the second benchmark, 8 of the first */
    size_t second = 0, first = 0;
    for (size_t i = 0; i < v.n_time; i++) {
        second += v.time_us[i] >= 200;
        first += v.time_us[i] < 200;
    }
    assert_int_equal(second, 40);
    assert_int_equal(first, 8);
    /* other keys see nothing; key 0 means "may not share" */
    assert_int_equal(kr__memo_get(t, 8, 2.5, &v), 0);
    kr__memo_add(t, 0, 3.0, a, 40, a, 40, 1);
    assert_int_equal(kr__memo_get(t, 0, 3.0, &v), 0);
    free(t);
}

static void old_samples_are_not_used(void **state)
{
    (void)state;
    kr__memo_table *t = table();
    kr__memo_view v;
    double a[10];
    fill(a, 10, 50, 0.1);
    kr__memo_add(t, 3, 100.0, a, 10, a, 10, 0);
    assert_int_equal(kr__memo_get(t, 3, 100.0 + KR__MEMO_MAX_AGE_S - 1, &v), 1);
    assert_int_equal(kr__memo_get(t, 3, 100.0 + KR__MEMO_MAX_AGE_S + 1, &v), 0);
    /* adding to an expired key starts it over */
    kr__memo_add(t, 3, 200.0, a, 2, a, 2, 0);
    assert_int_equal(kr__memo_get(t, 3, 200.0, &v), 1);
    assert_int_equal(v.n_time, 2);
    kr__memo_forget(t, 3);
    assert_int_equal(kr__memo_get(t, 3, 200.0, &v), 0);
    free(t);
}

static void one_source_of_times(void **state)
{
    (void)state;
    kr__memo_table *t = table();
    kr__memo_view v;
    double ev[10], cupti[10], events[10];
    fill(ev, 10, 10, 0);
    fill(cupti, 10, 9, 0);
    fill(events, 10, 10, 0);
    kr__memo_add(t, 5, 1.0, ev, 10, cupti, 10, 1);
    kr__memo_add(t, 5, 2.0, ev, 10, events, 4, 0);
    assert_int_equal(kr__memo_get(t, 5, 2.0, &v), 1);
    assert_int_equal(v.cupti, 0);
    assert_int_equal(v.n_time, 4); /* the CUPTI times are gone */
    assert_int_equal(v.n_event, 20);
    free(t);
}

static void the_least_recent_key_is_evicted(void **state)
{
    (void)state;
    kr__memo_table *t = table();
    kr__memo_view v;
    double a[3] = {1, 1, 1};
    for (uint64_t k = 1; k <= KR__MEMO_KEYS; k++)
        kr__memo_add(t, k, (double)k, a, 3, a, 3, 1);
    kr__memo_add(t, 1, 20.0, a, 3, a, 3, 1); /* key 1 is recent again */
    kr__memo_add(t, 99, 21.0, a, 3, a, 3, 1);
    assert_int_equal(kr__memo_get(t, 99, 21.0, &v), 1);
    assert_int_equal(kr__memo_get(t, 1, 21.0, &v), 1);
    assert_int_equal(v.n_time, 6);
    assert_int_equal(kr__memo_get(t, 2, 21.0, &v), 0); /* the least recent went */
    assert_int_equal(kr__memo_get(t, 3, 21.0, &v), 1);
    free(t);
}

static void agreement(void **state)
{
    (void)state;
    kr__memo_view v;
    memset(&v, 0, sizeof v);
    /* a quiet memo around 1000 us: 3 % is the floor of the tolerance */
    v.n_event = 20;
    for (size_t i = 0; i < 20; i++)
        v.event_us[i] = 1000 + (i % 2 ? 2 : -2);
    double near[3] = {1010, 1020, 1015}, far[3] = {1050, 1060, 1040};
    assert_true(kr__memo_agrees(&v, near, 3));
    assert_false(kr__memo_agrees(&v, far, 3));
    /* a baseline slowed by 40 %, or by 7 % (a disturbed GPU), never agrees,
     * however noisy the memo: the tolerance stops at 5 % */
    for (size_t i = 0; i < 20; i++)
        v.event_us[i] = i % 2 ? 700 : 1300;
    double slowed[3] = {1400, 1400, 1400};
    assert_false(kr__memo_agrees(&v, slowed, 3));
    double seven[3] = {1070, 1070, 1070};
    assert_false(kr__memo_agrees(&v, seven, 3));
    double fine[3] = {1040, 960, 1000};
    assert_true(kr__memo_agrees(&v, fine, 3));
    assert_false(kr__memo_agrees(&v, fine, 0));
}

/* One fresh sample against a memo added to moments ago (the previous
 * candidate of the problem), three against an older one; the age counts
 * from the last addition, not the first. */
static void fresh_samples_by_the_memos_age(void **state)
{
    (void)state;
    kr__memo_table *t = table();
    double a[20];
    fill(a, 20, 100, 0.01);
    kr__memo_add(t, 9, 10.0, a, 20, a, 20, 1);
    kr__memo_view v;
    assert_int_equal(kr__memo_get(t, 9, 11.0, &v), 1);
    assert_true(fabs(v.age_s - 1.0) < 1e-9);
    assert_int_equal(kr__memo_fresh_needed(&v), KR__MEMO_FRESH_YOUNG);
    assert_int_equal(kr__memo_get(t, 9, 10.0 + KR__MEMO_YOUNG_S + 1, &v), 1);
    assert_int_equal(kr__memo_fresh_needed(&v), KR__MEMO_FRESH);
    kr__memo_add(t, 9, 20.0, a, 5, a, 5, 1); /* young again */
    assert_int_equal(kr__memo_get(t, 9, 21.0, &v), 1);
    assert_int_equal(kr__memo_fresh_needed(&v), KR__MEMO_FRESH_YOUNG);
    assert_true(KR__MEMO_FRESH_YOUNG < KR__MEMO_FRESH);
    free(t);
}

/* Single-sample additions keep a memo young; after KR__MEMO_QUICK_MAX of
 * them in a row the next benchmark compares three, and an addition of
 * three starts the count again. */
static void quick_additions_are_bounded(void **state)
{
    (void)state;
    kr__memo_table *t = table();
    double a[20];
    fill(a, 20, 100, 0.01);
    kr__memo_add(t, 5, 1.0, a, 20, a, 20, 1); /* a full first benchmark */
    kr__memo_view v;
    double now = 1.0;
    for (int i = 0; i < KR__MEMO_QUICK_MAX; i++) {
        assert_int_equal(kr__memo_get(t, 5, now + 0.5, &v), 1);
        assert_int_equal(kr__memo_fresh_needed(&v), KR__MEMO_FRESH_YOUNG);
        now += 0.5;
        kr__memo_add(t, 5, now, a, 1, a, 1, 1);
    }
    assert_int_equal(kr__memo_get(t, 5, now + 0.5, &v), 1);
    assert_int_equal(v.quick, KR__MEMO_QUICK_MAX);
    assert_int_equal(kr__memo_fresh_needed(&v), KR__MEMO_FRESH);
    kr__memo_add(t, 5, now + 0.5, a, KR__MEMO_FRESH, a, KR__MEMO_FRESH, 1);
    assert_int_equal(kr__memo_get(t, 5, now + 1.0, &v), 1);
    assert_int_equal(kr__memo_fresh_needed(&v), KR__MEMO_FRESH_YOUNG);
    free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(keeps_the_most_recent_samples),
        cmocka_unit_test(old_samples_are_not_used),
        cmocka_unit_test(one_source_of_times),
        cmocka_unit_test(the_least_recent_key_is_evicted),
        cmocka_unit_test(agreement),
        cmocka_unit_test(fresh_samples_by_the_memos_age),
        cmocka_unit_test(quick_additions_are_bounded),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
