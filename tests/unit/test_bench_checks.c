/* Where the early part of a benchmark's floor of checked calls goes
 * (bench/bench_check.c): KR__BENCH_EARLY_CHECKS distinct timed calls below
 * min_samples, drawn anew per benchmark, and the draw answers yes on exactly
 * those when the check fraction draws nothing else. (The rest of the floor,
 * after the last timed call, is gpu_bench's.) */
#include "helpers.h"

#include "bench/bench_impl.h"

static int bits(uint64_t m)
{
    int n = 0;
    for (; m; m &= m - 1)
        n++;
    return n;
}

static void floor_is_that_many_calls_below_min_samples(void **state)
{
    (void)state;
    static bstate b;
    const uint32_t spans[] = {4, 10, 30, 64, 500};
    for (size_t i = 0; i < sizeof spans / sizeof *spans; i++) {
        b.o.min_samples = spans[i];
        uint64_t limit = spans[i] < 64 ? (1ull << spans[i]) - 1 : ~0ull;
        for (int k = 0; k < 200; k++) {
            uint64_t m = kr__bench_pick_floor(&b);
            assert_int_equal(bits(m), KR__BENCH_EARLY_CHECKS);
            assert_true((m & ~limit) == 0);
        }
    }
    /* no more calls than the early floor: every one of them */
    b.o.min_samples = 1;
    assert_true(kr__bench_pick_floor(&b) == 1);
    b.o.min_samples = 2;
    assert_true(kr__bench_pick_floor(&b) == 3);
    b.o.min_samples = 0;
    assert_true(kr__bench_pick_floor(&b) == 0);
}

/* Drawn, not fixed: over many benchmarks every call below min_samples is
 * among the floor's, and no two benchmarks in a row need agree. */
static void floor_moves_from_benchmark_to_benchmark(void **state)
{
    (void)state;
    static bstate b;
    b.o.min_samples = 10;
    uint64_t seen = 0, first = kr__bench_pick_floor(&b);
    int differs = 0;
    for (int k = 0; k < 500; k++) {
        uint64_t m = kr__bench_pick_floor(&b);
        seen |= m;
        differs |= m != first;
    }
    assert_true(seen == (1ull << 10) - 1);
    assert_true(differs);
}

static void draw_says_yes_on_the_floor_calls(void **state)
{
    (void)state;
    static bstate b;
    b.o.min_samples = 10;
    b.o.check_fraction = 0; /* the floor alone */
    b.floor_checks = kr__bench_pick_floor(&b);
    int yes = 0;
    for (size_t call = 0; call < 100; call++) {
        b.s[SIDE_CANDIDATE].n = call;
        int drawn = kr__bench_draw_check(&b);
        assert_int_equal(drawn, call < 64 && (b.floor_checks >> call & 1));
        yes += drawn;
    }
    assert_int_equal(yes, KR__BENCH_EARLY_CHECKS);
    b.o.check_fraction = 1.0; /* everything */
    b.s[SIDE_CANDIDATE].n = 70;
    assert_true(kr__bench_draw_check(&b));
}

/* The sets in turn (kr__bench_set_of): the next sample's values are made
 * while this one's call and checks still use its set, so two samples in a
 * row never share one; and each side, whether it takes turns with the
 * other (rounds alternate which goes first: c b b c c b ...) or runs
 * alone, meets every set, as the per-side walk before it did. */
static void sets_in_turn_never_repeat_and_every_side_meets_all(void **state)
{
    (void)state;
    assert_int_equal(kr__bench_set_of(0, 1), 0);
    assert_int_equal(kr__bench_set_of(7, 1), 0);
    for (size_t sets = 2; sets <= KR__BENCH_MAX_SETS; sets++) {
        unsigned seen[2] = {0, 0}, alone = 0;
        size_t span = 4 * sets * sets;
        for (size_t g = 0; g < span; g++) {
            size_t k = kr__bench_set_of(g, sets);
            assert_true(k < sets);
            assert_true(k != kr__bench_set_of(g + 1, sets));
            int side = (int)(((g / 2) + (g % 2)) & 1); /* round g/2 goes (g/2 & 1) first */
            seen[side] |= 1u << k;
            alone |= 1u << k;
        }
        unsigned all = (1u << sets) - 1;
        assert_int_equal(seen[0], all);
        assert_int_equal(seen[1], all);
        assert_int_equal(alone, all);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(floor_is_that_many_calls_below_min_samples),
        cmocka_unit_test(floor_moves_from_benchmark_to_benchmark),
        cmocka_unit_test(draw_says_yes_on_the_floor_calls),
        cmocka_unit_test(sets_in_turn_never_repeat_and_every_side_meets_all),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
