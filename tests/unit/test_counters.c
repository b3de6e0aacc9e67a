/* Hardware counters and the robust speedup without a GPU: the occupancy
 * limiter from kernel attributes and device limits, the plan's totals and
 * report fields from hand-built counters, the feedback text a model gets,
 * the bandwidth and occupancy reward terms (bounds, gates, order against
 * failing candidates), and the robust conditions' summary. */
#include "helpers.h"

#include "driver/profiler.h"
#include "bench/counters.h"
#include "bench/robust.h"
#include "report/report_impl.h"

#include <math.h>

static kr_context *ctx;

/* An H100/H200 SM (sm_90): the device attributes the engine reads. */
static kr__occupancy_in sm90(int threads, int regs, int64_t smem)
{
    kr__occupancy_in in = {threads, regs, smem, 32, 2048, 32, 65536, 233472, 1024};
    return in;
}

static void occupancy_and_limiter(void **state)
{
    (void)state;
    kr__occupancy o;
    kr__occupancy_in in = sm90(256, 128, 0);
    assert_int_equal(kr__occupancy_of(&in, &o), 0);
    /* 128 x 32 = 4096 registers a warp: 16 warps, two blocks of 8 */
    assert_int_equal(o.by_registers, 2);
    assert_int_equal(o.blocks, 2);
    assert_int_equal(o.limiter, KR__LIMIT_REGISTERS);
    assert_true(fabs(o.occupancy - 0.25) < 1e-12);
    /* 100 kB of shared memory a block (+1 kB reserved): two fit */
    in = sm90(256, 32, 100 * 1024);
    assert_int_equal(kr__occupancy_of(&in, &o), 0);
    assert_int_equal(o.by_shared, 2);
    assert_int_equal(o.limiter, KR__LIMIT_SHARED);
    assert_string_equal(kr__limiter_name(o.limiter), "shared_memory");
    /* 32-thread blocks: 32 blocks an SM hold half its warps */
    in = sm90(32, 16, 0);
    assert_int_equal(kr__occupancy_of(&in, &o), 0);
    assert_int_equal(o.limiter, KR__LIMIT_BLOCKS);
    assert_true(fabs(o.occupancy - 0.5) < 1e-12);
    /* 1024 threads, 32 registers: full, nothing limits */
    in = sm90(1024, 32, 0);
    assert_int_equal(kr__occupancy_of(&in, &o), 0);
    assert_int_equal(o.blocks, 2);
    assert_int_equal(o.limiter, KR__LIMIT_NONE);
    assert_true(fabs(o.occupancy - 1.0) < 1e-12);
    /* 640 threads (20 warps): threads allow 3 blocks (60 of 64 warps) */
    in = sm90(640, 24, 0);
    assert_int_equal(kr__occupancy_of(&in, &o), 0);
    assert_int_equal(o.by_warps, 3);
    assert_int_equal(o.limiter, KR__LIMIT_WARPS);
    assert_true(fabs(o.occupancy - 60.0 / 64) < 1e-12);
    /* registers round up to 256 a warp, whole warps per quarter SM: 72
     * registers = 2304 a warp: 28 warps, 3 blocks of 8 (not 28/8 rounded) */
    in = sm90(256, 72, 0);
    assert_int_equal(kr__occupancy_of(&in, &o), 0);
    assert_int_equal(o.by_registers, 3);
    in = sm90(0, 32, 0);
    assert_int_equal(kr__occupancy_of(&in, &o), -1);
}

static kr__kernel_counters kernel(const char *name, size_t launch, int regs, int threads)
{
    kr__kernel_counters k;
    memset(&k, 0, sizeof k);
    snprintf(k.name, sizeof k.name, "%s", name);
    k.launch = launch;
    k.regs = regs;
    k.threads = threads;
    for (int m = 0; m < KR__CM_N; m++)
        k.v[m] = NAN;
    kr__occupancy_in in = sm90(threads, regs, 0);
    kr__occupancy_of(&in, &k.occ);
    return k;
}

/* The example: a copy at 2.9 TB/s, 71 % of DRAM peak, held to 25 %
 * occupancy by its registers. */
static kr__kernel_counters memory_bound(void)
{
    kr__kernel_counters k = kernel("copy", 0, 128, 256);
    k.v[KR__CM_DURATION_NS] = 100000;    /* 100 us */
    k.v[KR__CM_DRAM_READ] = 145e6;
    k.v[KR__CM_DRAM_WRITE] = 145e6;      /* 290 MB in 100 us */
    k.v[KR__CM_DRAM_PCT] = 71;
    k.v[KR__CM_SM_PCT] = 20;
    k.v[KR__CM_WARPS_PCT] = 23;
    k.v[KR__CM_L2_HIT_PCT] = 80;
    return k;
}

static void feedback_text(void **state)
{
    (void)state;
    kr__kernel_counters k = memory_bound();
    kr__counters_summary s;
    kr__counters_summarize(&k, 1, &s);
    char text[1000];
    kr__counters_feedback(text, sizeof text, &k, 1, &s);
    assert_string_equal(text, "memory-bound: 2.9 TB/s, 71 % of DRAM peak; occupancy 25 % limited "
                              "by 128 registers/thread (achieved 23 %)");
    /* compute-bound, with bank conflicts, divergence and spills */
    kr__kernel_counters c = kernel("gemm", 0, 32, 128);
    c.v[KR__CM_SM_PCT] = 85;
    c.v[KR__CM_TENSOR_PCT] = 40;
    c.v[KR__CM_DRAM_PCT] = 10;
    c.v[KR__CM_BANK_LD] = 300;
    c.v[KR__CM_BANK_ST] = 100;
    c.v[KR__CM_SHARED_WAVEFRONTS] = 1000;
    c.v[KR__CM_BRANCHES] = 100;
    c.v[KR__CM_DIVERGENT] = 25;
    c.v[KR__CM_LOCAL_LD] = 2e6;
    c.v[KR__CM_LOCAL_ST] = 1e6;
    c.local_bytes = 64;
    kr__counters_summarize(&c, 1, &s);
    kr__counters_feedback(text, sizeof text, &c, 1, &s);
    assert_string_equal(text, "compute-bound: SM 85 % busy, tensor pipes 40 % busy; 40 % of "
                              "shared-memory wavefronts are bank conflicts (pad or swizzle the "
                              "shared arrays); 25 % of branches diverge within a warp; 3.0 MB of "
                              "local-memory traffic (64 bytes/thread of spills or stack arrays)");
    /* neither unit saturated: latency-bound */
    kr__kernel_counters l = kernel("scan", 0, 32, 1024);
    l.v[KR__CM_SM_PCT] = 15;
    l.v[KR__CM_DRAM_PCT] = 20;
    kr__counters_summarize(&l, 1, &s);
    kr__counters_feedback(text, sizeof text, &l, 1, &s);
    assert_non_null(strstr(text, "latency-bound: DRAM 20 % and SM 15 % of peak"));
    /* no counters at all (no permission): the limiter still speaks */
    kr__kernel_counters none = kernel("copy", 0, 128, 256);
    kr__counters_summarize(&none, 1, &s);
    kr__counters_feedback(text, sizeof text, &none, 1, &s);
    assert_string_equal(text, "occupancy 25 % limited by 128 registers/thread");
    /* nothing to say: empty */
    kr__kernel_counters fine = kernel("copy", 0, 32, 1024);
    kr__counters_summarize(&fine, 1, &s);
    kr__counters_feedback(text, sizeof text, &fine, 1, &s);
    assert_string_equal(text, "");
}

static void multi_kernel(void **state)
{
    (void)state;
    kr__kernel_counters k[2] = {kernel("small", 0, 32, 1024), memory_bound()};
    k[1].launch = 1;
    k[0].v[KR__CM_DURATION_NS] = 25000;
    k[0].v[KR__CM_DRAM_READ] = 1e6;
    k[0].v[KR__CM_DRAM_WRITE] = 0;
    k[0].v[KR__CM_DRAM_PCT] = 10;
    k[0].v[KR__CM_SM_PCT] = 70;
    kr__counters_summary s;
    kr__counters_summarize(k, 2, &s);
    assert_int_equal(s.slowest, 1);
    assert_true(fabs(s.duration_s - 125e-6) < 1e-15);
    assert_true(fabs(s.dram_bytes - 291e6) < 1);
    /* rates weighted by time: (10 x 25 + 71 x 100) / 125 */
    assert_true(fabs(s.dram_fraction - (0.10 * 25 + 0.71 * 100) / 125) < 1e-12);
    char text[1000];
    kr__counters_feedback(text, sizeof text, k, 2, &s);
    /* the slower kernel first, each with its share of the time */
    const char *copy = strstr(text, "kernel copy (launch 2, 80 % of the time): memory-bound");
    const char *small = strstr(text, "kernel small (launch 1, 20 % of the time): compute-bound");
    assert_non_null(copy);
    assert_non_null(small);
    assert_true(copy < small);
    /* into a report: metrics, the limiter, the section */
    kr_report *r = test_report();
    kr__counters_report(r, k, 2, &s);
    double v;
    assert_int_equal(kr_report_get(&v, r, "dram_bytes"), KR_OK);
    assert_true(fabs(v - 291e6) < 1);
    assert_int_equal(kr_report_get(&v, r, "dram_gbps"), KR_OK);
    assert_true(fabs(v - 291e6 / 125e-6 / 1e9) < 1e-6);
    assert_int_equal(kr_report_get(&v, r, "occupancy_theoretical"), KR_OK);
    assert_true(fabs(v - (1.0 * 25 + 0.25 * 100) / 125) < 1e-12);
    assert_string_equal(kr_report_text(r, "occupancy_limiter"), "registers");
    /* a counter no kernel had is absent, not 0 */
    assert_int_equal(kr_report_get(&v, r, "l1_hit_rate"), KR_ENOTFOUND);
    char *json = NULL;
    assert_int_equal(kr_report_json(&json, r), KR_OK);
    assert_non_null(strstr(json, "\"dram__bytes_read.sum\""));
    assert_non_null(strstr(json, "\"occupancy_limiter\": \"registers\""));
    kr_free(json);
    kr_report_free(r);
}

static double score(kr_reward *w, int verdict, uint64_t flags, double dram, double occ)
{
    kr_report *r = test_report();
    kr_report_set_verdict(r, verdict);
    kr_report_set_flags(r, flags);
    if (!isnan(dram))
        kr_report_set(r, "dram_peak_fraction", dram);
    if (!isnan(occ))
        kr_report_set(r, "occupancy", occ);
    double v = NAN;
    assert_int_equal(kr_reward_score(&v, w, r), KR_OK);
    kr_report_free(r);
    return v;
}

static void reward_terms(void **state)
{
    (void)state;
    kr_reward *w = NULL;
    const char *cfg = "{\"terms\": [{\"term\": \"correct\", \"weight\": 1},"
                      " {\"term\": \"dram_bandwidth\", \"weight\": 0.5},"
                      " {\"term\": \"occupancy\", \"weight\": 0.5, \"config\": {\"target\": 0.5}}]}";
    if (kr_reward_from_json(&w, ctx, cfg, strlen(cfg)) != KR_OK)
        fail_msg("%s", kr_context_errmsg(ctx));
    /* 0.71 of peak over the 0.8 target; 25 % occupancy over 0.5 */
    double v = score(w, KR_VERDICT_PASSED, 0, 0.71, 0.25);
    assert_true(fabs(v - (1 + 0.5 * 0.71 / 0.8 + 0.5 * 0.5)) < 1e-12);
    /* full marks at and past the target, never more */
    assert_true(fabs(score(w, KR_VERDICT_PASSED, 0, 0.95, 0.9) - 2) < 1e-12);
    /* no counters: no pay, and no error */
    assert_true(fabs(score(w, KR_VERDICT_PASSED, 0, NAN, NAN) - 1) < 1e-12);
    /* a failing candidate with perfect counters scores below the worst
     * passing one */
    assert_true(score(w, KR_VERDICT_INCORRECT, 0, 1, 1) < score(w, KR_VERDICT_PASSED, 0, NAN, NAN));
    /* speed terms: a flagged candidate gets their floor */
    assert_true(fabs(score(w, KR_VERDICT_PASSED, KR_FLAG_IMPLAUSIBLE_SPEED, 1, 1) - 1) < 1e-12);
    char *json = NULL;
    assert_int_equal(kr_reward_json(&json, w), KR_OK);
    assert_non_null(strstr(json, "\"dram_peak_fraction\""));
    kr_free(json);
    kr_reward_free(w);
    /* traffic the problem does not need is not paid */
    cfg = "{\"terms\": [{\"term\": \"dram_bandwidth\", \"config\": {\"target\": 1}}]}";
    assert_int_equal(kr_reward_from_json(&w, ctx, cfg, strlen(cfg)), KR_OK);
    kr_report *r = test_report();
    kr_report_set_verdict(r, KR_VERDICT_PASSED);
    kr_report_set(r, "dram_peak_fraction", 0.8);
    kr_report_set(r, "dram_bytes", 200e6);
    kr_report_set(r, "problem_bytes", 100e6);
    assert_int_equal(kr_reward_score(&v, w, r), KR_OK);
    assert_true(fabs(v - 0.4) < 1e-12);
    kr_report_free(r);
    kr_reward_free(w);
    /* configs are checked */
    cfg = "{\"terms\": [{\"term\": \"occupancy\", \"config\": {\"target\": 2}}]}";
    assert_int_equal(kr_reward_from_json(&w, ctx, cfg, strlen(cfg)), KR_EPLUGIN);
    cfg = "{\"terms\": [{\"term\": \"occupancy\", \"config\": {\"metric\": \"speedup\"}}]}";
    assert_int_equal(kr_reward_from_json(&w, ctx, cfg, strlen(cfg)), KR_EPLUGIN);
    cfg = "{\"terms\": [{\"term\": \"dram_bandwidth\", \"config\": {\"metric\": \"occupancy\"}}]}";
    assert_int_equal(kr_reward_from_json(&w, ctx, cfg, strlen(cfg)), KR_EPLUGIN);
}

static kr__robust_cond cond(const char *name, double speedup)
{
    kr__robust_cond c;
    memset(&c, 0, sizeof c);
    snprintf(c.name, sizeof c.name, "%s", name);
    c.speedup = speedup;
    c.speedup_low = c.speedup_high = c.time_us = c.baseline_us = NAN;
    return c;
}

static void robust_summary(void **state)
{
    (void)state;
    kr__robust_cond c[4] = {cond("cold_l2", 2.0), cond("warm_l2", 0.5), cond("co_running", NAN),
                            cond("case_N_4096", 4.0)};
    snprintf(c[2].why, sizeof c[2].why, "not measured: a callback baseline synchronizes the device");
    double lo, geo;
    assert_int_equal(kr__robust_summarize(c, 4, &lo, &geo), 3);
    assert_true(fabs(lo - 0.5) < 1e-12);
    assert_true(fabs(geo - cbrt(4.0)) < 1e-12); /* (2 x 0.5 x 4)^(1/3) */
    assert_int_equal(kr__robust_summarize(c + 2, 1, &lo, &geo), 0);
    assert_true(isnan(lo) && isnan(geo));
    char key[64];
    kr__robust_key(key, sizeof key, "case_", "N=4096 (big)");
    assert_string_equal(key, "case_N_4096__big_");
    kr_report *r = test_report();
    kr_report_set_verdict(r, KR_VERDICT_PASSED);
    kr_report_set_text(r, "feedback", "passed");
    kr__robust_report(r, c, 4, 1.5, 33);
    double v;
    assert_int_equal(kr_report_get(&v, r, "speedup_warm_l2"), KR_OK);
    assert_true(fabs(v - 0.5) < 1e-12);
    assert_int_equal(kr_report_get(&v, r, "speedup_co_running"), KR_ENOTFOUND);
    assert_int_equal(kr_report_get(&v, r, "speedup_robust_min"), KR_OK);
    assert_true(fabs(v - 0.5) < 1e-12);
    assert_int_equal(kr_report_get(&v, r, "robust_conditions"), KR_OK);
    assert_true(v == 3);
    assert_int_equal(kr_report_get(&v, r, "robust_wall_s"), KR_OK);
    assert_true(v == 1.5);
    /* the feedback a multi-turn loop shows the model */
    kr__bench_feedback(r);
    assert_string_equal(kr_report_text(r, "feedback"),
                        "passed; under perturbed conditions at least 0.50x (geometric mean 1.59x: "
                        "cold_l2 2.00x, warm_l2 0.50x, case_N_4096 4.00x)");
    kr_report_set_text(r, "counters_feedback", "memory-bound: 2.9 TB/s, 71 % of DRAM peak");
    kr_report_set_text(r, "feedback", "passed");
    kr__bench_feedback(r);
    assert_non_null(strstr(kr_report_text(r, "feedback"),
                           "; profile: memory-bound: 2.9 TB/s, 71 % of DRAM peak"));
    kr_report_free(r);
    /* neither ran: the feedback is left alone */
    r = test_report();
    kr_report_set_text(r, "feedback", "passed");
    kr__bench_feedback(r);
    assert_string_equal(kr_report_text(r, "feedback"), "passed");
    kr_report_free(r);
    /* a robust reward reads the minimum as a speed metric */
    kr_reward *w = NULL;
    const char *cfg = "{\"terms\": [{\"term\": \"speedup\", \"config\": {\"mode\": \"clipped\","
                      " \"metric\": \"speedup_robust_min\", \"max\": 3}}]}";
    assert_int_equal(kr_reward_from_json(&w, ctx, cfg, strlen(cfg)), KR_OK);
    r = test_report();
    kr_report_set_verdict(r, KR_VERDICT_PASSED);
    kr_report_set(r, "speedup", 2.0);
    kr_report_set(r, "speedup_robust_min", 0.5);
    assert_int_equal(kr_reward_score(&v, w, r), KR_OK);
    assert_true(fabs(v - 0.5) < 1e-12);
    kr_report_free(r);
    kr_reward_free(w);
}

static int never(void *user)
{
    (*(int *)user)++;
    return 0;
}

/* Without counters the profiler says why and never runs the work. */
static void without_cupti(void **state)
{
    (void)state;
    double values[4 * KR__CM_N];
    kr__profiler_out po;
    char why[1024];
    int called = 0;
    setenv("KREWARD_COUNTERS", "0", 1);
    assert_int_equal(kr__profiler_run(NULL, NULL, 0, kr__counter_metrics, KR__CM_N, 4, never,
                                      &called, values, &po, why, sizeof why), -1);
    assert_string_equal(why, "disabled by KREWARD_COUNTERS=0");
    unsetenv("KREWARD_COUNTERS");
    setenv("KREWARD_CUPTI_LIBRARY", "/nonexistent/libcupti.so.13", 1);
    assert_int_equal(kr__profiler_run(NULL, NULL, 0, kr__counter_metrics, KR__CM_N, 4, never,
                                      &called, values, &po, why, sizeof why), -1);
    assert_non_null(strstr(why, "CUPTI not available"));
    assert_int_equal(po.no_permission, 0);
    assert_int_equal(called, 0);
    unsetenv("KREWARD_CUPTI_LIBRARY");
}

int main(void)
{
    ctx = test_context(NULL);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(occupancy_and_limiter), cmocka_unit_test(feedback_text),
        cmocka_unit_test(multi_kernel),          cmocka_unit_test(reward_terms),
        cmocka_unit_test(robust_summary),        cmocka_unit_test(without_cupti),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    kr_context_free(ctx);
    return rc;
}
