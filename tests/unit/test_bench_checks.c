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

/* The next sample's set (kr__bench_next_set): never the current one (its
 * values are made while the current call and its checks use that set),
 * every other one reachable, and drawn, not tied to the schedule: a side
 * sampled only every DONE_PERIOD-th round (two of every 18 samples) still
 * meets every set, where a fixed turn over both sides gave it as few as two
 * of the precise preset's six. The draws here come from a fixed generator,
 * so the test cannot fail by chance. */
static uint64_t lcg(uint64_t *x)
{
    *x = *x * 6364136223846793005ull + 1442695040888963407ull;
    return *x >> 11;
}

static void next_set_is_another_and_every_side_meets_all(void **state)
{
    (void)state;
    assert_int_equal(kr__bench_next_set(0, 1, 12345), 0);
    for (size_t sets = 2; sets <= KR__BENCH_MAX_SETS; sets++) {
        for (size_t cur = 0; cur < sets; cur++) {
            unsigned reached = 0;
            for (uint64_t r = 0; r < 4 * sets; r++) {
                size_t k = kr__bench_next_set(cur, sets, r);
                assert_true(k < sets && k != cur);
                reached |= 1u << k;
            }
            assert_int_equal(reached, ((1u << sets) - 1) & ~(1u << cur));
        }
        /* the done side's samples: rounds 0 and 9 of every 16, the other
         * side every round; 64 of the done side's samples */
        uint64_t x = sets;
        size_t k = 0;
        unsigned done_side = 0;
        for (size_t round = 0, taken = 0; taken < 64; round++)
            for (int i = 0; i < 2; i++) {
                int w = (int)((round + i) & 1); /* side 1 is done */
                if (w == 1 && round % 16 != 0 && round % 16 != 9)
                    continue;
                if (w == 1) {
                    done_side |= 1u << k;
                    taken++;
                }
                k = kr__bench_next_set(k, sets, lcg(&x));
            }
        assert_int_equal(done_side, (1u << sets) - 1);
    }
}

/* With a sample in flight the next values avoid its set too (its check
 * reads it after the next call): never the current or the avoided set,
 * every other one reached; avoiding nothing (SIZE_MAX, or the current set)
 * draws as kr__bench_next_set, and so do two sets (nothing else to take). */
static void next_set_avoids_a_set_in_flight(void **state)
{
    (void)state;
    for (size_t sets = 2; sets <= KR__BENCH_MAX_SETS; sets++)
        for (size_t cur = 0; cur < sets; cur++)
            for (size_t avoid = 0; avoid < sets; avoid++) {
                unsigned reached = 0;
                for (uint64_t r = 0; r < 4 * sets; r++) {
                    size_t k = kr__bench_next_set_avoiding(cur, avoid, sets, r);
                    assert_true(k < sets && k != cur);
                    if (sets >= 3)
                        assert_true(k != avoid);
                    if (avoid == cur || sets < 3)
                        assert_int_equal(k, kr__bench_next_set(cur, sets, r));
                    reached |= 1u << k;
                }
                unsigned want = ((1u << sets) - 1) & ~(1u << cur);
                if (sets >= 3)
                    want &= ~(1u << avoid);
                assert_int_equal(reached, want);
                assert_int_equal(kr__bench_next_set_avoiding(cur, SIZE_MAX, sets, 7),
                                 kr__bench_next_set(cur, sets, 7));
            }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(floor_is_that_many_calls_below_min_samples),
        cmocka_unit_test(next_set_avoids_a_set_in_flight),
        cmocka_unit_test(floor_moves_from_benchmark_to_benchmark),
        cmocka_unit_test(draw_says_yes_on_the_floor_calls),
        cmocka_unit_test(next_set_is_another_and_every_side_meets_all),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
