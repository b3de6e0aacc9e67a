/* The benchmark's results: per-side statistics (CUPTI or events, throttled
 * samples dropped), the speedup with its interval, flags, memory and the
 * roofline, into the report. */
#include "bench/bench_impl.h"
#include "common/clock.h"
#include "common/stats.h"
#include "compile/program_impl.h"
#include "driver/trace.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* relative: the smallest speedup difference the benchmark claims to resolve */
#define SPEEDUP_RESOLUTION 0.005

static void put_summary(kr_report *r, const char *prefix, const kr__summary *s)
{
    char key[64];
    const struct {
        const char *name;
        double v;
    } f[] = {{"_us", s->median},          {"_mean_us", s->mean}, {"_min_us", s->min},
             {"_max_us", s->max},         {"_stdev_us", s->stdev}, {"_p10_us", s->p10},
             {"_p90_us", s->p90},         {"_noise", s->noise}};
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) {
        snprintf(key, sizeof key, "%s%s", prefix, f[i].name);
        kr_report_set(r, key, f[i].v);
    }
    snprintf(key, sizeof key, "%s_samples", prefix);
    kr_report_set(r, key, (double)s->n);
}

static json_t *summary_json(const kr__summary *s)
{
    json_t *o = json_object();
    json_object_set_new(o, "median_us", json_real(s->median));
    json_object_set_new(o, "mean_us", json_real(s->mean));
    json_object_set_new(o, "min_us", json_real(s->min));
    json_object_set_new(o, "max_us", json_real(s->max));
    json_object_set_new(o, "stdev_us", json_real(s->stdev));
    json_object_set_new(o, "p10_us", json_real(s->p10));
    json_object_set_new(o, "p90_us", json_real(s->p90));
    json_object_set_new(o, "noise", json_real(s->noise));
    json_object_set_new(o, "samples", json_integer((json_int_t)s->n));
    return o;
}

/* Drops samples taken at a clock below 75 % of the highest seen. */
static size_t drop_throttled(const bside *s, double *times, size_t n, double top_mhz)
{
    size_t kept = 0, dropped = 0;
    for (size_t i = 0; i < n; i++) {
        if (s->clock_mhz[i] > 0 && s->clock_mhz[i] < 0.75 * top_mhz)
            dropped++;
        else
            times[kept++] = times[i];
    }
    return dropped;
}

static void set_flag(kr_report *r, uint64_t flag)
{
    kr_report_set_flags(r, kr_report_flags(r) | flag);
}

/* The fastest rate at which any honest kernel could do the problem's
 * flops, from the narrowest input type: tensor cores for 8- and 16-bit
 * types (and TF32 for f32), at a margin over what mma.sync measured here
 * (wgmma on Hopper runs faster than mma.sync), else the FMA rate. */
static double flops_peak(const bstate *b)
{
    const kr__engine *e = b->e;
    size_t narrowest = 8;
    int any_float = 0;
    for (size_t t = 0; t < b->p->num_tensors; t++) {
        const kr__tensor *x = &b->p->tensors[t];
        if (x->role == KR_ROLE_OUT)
            continue;
        size_t size = kr_dtype_size(x->dtype);
        narrowest = size < narrowest ? size : narrowest;
        any_float |= x->dtype != KR_DTYPE_I32 && x->dtype != KR_DTYPE_I64 && x->dtype != KR_DTYPE_BOOL;
    }
    if (e->peak_mma_flops <= 0 || !any_float)
        return e->peak_flops;
    double mma = e->peak_mma_flops;
    return narrowest == 1 ? 3.2 * mma : narrowest == 2 ? 1.6 * mma : narrowest == 4 ? 0.8 * mma
                                                                 : e->peak_flops;
}

/* The roofline: the time the problem's bytes take at the measured copy
 * bandwidth and its flops at the fastest pipe it could use; the slower of
 * the two is the floor. Faster than 80 % of either floor is impossible for
 * a kernel that does the work: it skipped work or cached results. */
static void roofline(bstate *b, kr_report *r, double median_us)
{
    char why[256];
    int64_t bytes = -1, flops = -1;
    const kr_problem *p = b->p;
    if (p->bytes_expr)
        kr__expr_eval(p->bytes_expr, p->cases[b->c].dims, &bytes, why, sizeof why);
    if (p->flops_expr)
        kr__expr_eval(p->flops_expr, p->cases[b->c].dims, &flops, why, sizeof why);
    if ((bytes < 0 && flops < 0) || kr__peaks(b->ctx) != KR_OK)
        return;
    double t = median_us * 1e-6, floor_t = 0;
    if (bytes > 0) {
        kr_report_set(r, "achieved_gbps", (double)bytes / t / 1e9);
        kr_report_set(r, "peak_gbps", b->e->peak_bytes_per_s / 1e9);
        floor_t = (double)bytes / b->e->peak_bytes_per_s;
    }
    if (flops > 0) {
        double peak = flops_peak(b);
        kr_report_set(r, "achieved_tflops", (double)flops / t / 1e12);
        kr_report_set(r, "peak_fp32_tflops", b->e->peak_flops / 1e12);
        kr_report_set(r, "peak_tflops", peak / 1e12);
        if (b->e->peak_mma_flops > 0)
            kr_report_set(r, "peak_mma_bf16_tflops", b->e->peak_mma_flops / 1e12);
        double ft = (double)flops / peak;
        floor_t = ft > floor_t ? ft : floor_t;
    }
    if (t < 0.8 * floor_t)
        set_flag(r, KR_FLAG_IMPLAUSIBLE_SPEED);
    kr_report_set(r, "roofline_fraction", floor_t / t);
}

/* GPU times per side: CUPTI's where its records are complete, else events. */
static void side_times(bstate *b, double *times[2], size_t n[2], json_t *sec, int *side_stream,
                       int *device_launched)
{
    int use_cupti = 0;
    if (!(b->o.flags & KR_BENCH_EVENTS_ONLY) && kr__trace_active())
        use_cupti = kr__bench_cupti_times(b, times, n, side_stream, device_launched) == 0;
    for (int w = 0; w < 2 && !use_cupti; w++) {
        memcpy(times[w], b->s[w].event_us, b->s[w].n * sizeof(double));
        n[w] = b->s[w].n;
    }
    b->times_cupti = use_cupti;
    json_object_set_new(sec, "source", json_string(use_cupti ? "cupti" : "events"));
    if (!use_cupti)
        json_object_set_new(sec, "why_not_cupti",
                            json_string(b->o.flags & KR_BENCH_EVENTS_ONLY ? "KR_BENCH_EVENTS_ONLY"
                                        : b->ctx->trace_why[0] ? b->ctx->trace_why
                                                               : "CUPTI records incomplete"));
}

/* The memo's baseline samples after the n fresh ones in times (room made by
 * kr__bench_results) when they count for this benchmark and share its
 * source of times; how many were added. */
static size_t add_shared(bstate *b, kr_report *r, double *times, size_t n, json_t *sec)
{
    /* the fresh ones (the most recent), kept for the memo before the
     * summary sorts them */
    b->n_fresh = n < KR__MEMO_SAMPLES ? n : KR__MEMO_SAMPLES;
    memcpy(b->fresh_us, times + (n - b->n_fresh), b->n_fresh * sizeof(double));
    /* every fresh sample must agree: else nothing is shared and the memo is
     * forgotten (its conditions are gone). An agreed memo had its check
     * already (no baseline sample follows it); a pending one gets it here */
    int usable = b->memo_state == MEMO_PENDING || b->memo_state == MEMO_AGREED;
    if (usable && !kr__memo_agrees(&b->memo, b->s[SIDE_BASELINE].event_us, b->s[SIDE_BASELINE].n)) {
        kr__bench_memo_disagree(b);
        usable = 0;
    }
    const double *src = !usable ? NULL
                        : b->memo.cupti == b->times_cupti ? b->memo.time_us
                        : !b->times_cupti ? b->memo.event_us /* CUPTI fell back to events */
                        : NULL;
    size_t shared = !src ? 0 : src == b->memo.time_us ? b->memo.n_time : b->memo.n_event;
    if (shared)
        memcpy(times + n, src, shared * sizeof(double));
    json_object_set_new(sec, "baseline_shared_samples", json_integer((json_int_t)shared));
    kr_report_set(r, "baseline_shared_samples", (double)shared);
    json_object_set_new(sec, "baseline_fresh_samples", json_integer((json_int_t)n));
    /* after how many fresh samples the memo stood (more than three: the
     * first ones missed it by chance, and were looked at again per sample) */
    size_t agreed_at = shared ? b->memo_agreed_at : 0;
    json_object_set_new(sec, "baseline_memo_agreed_at", json_integer((json_int_t)agreed_at));
    kr_report_set(r, "baseline_memo_agreed_at", (double)agreed_at);
    return shared;
}

/* A clean benchmark's fresh baseline samples join the memo: not when the
 * candidate's work reached beyond its samples (side streams, device
 * launches) or its checks failed, which could have disturbed them. */
static void share_baseline(bstate *b, int disturbed)
{
    if (!b->memo_key || disturbed || b->checks_failed || b->candidate_failed || !b->s[1].n ||
        b->memo_state == MEMO_DISAGREED)
        return;
    if (!b->e->memo && !(b->e->memo = calloc(1, sizeof *b->e->memo)))
        return; /* sharing is an optimisation: without memory, none */
    kr__memo_add(b->e->memo, b->memo_key, kr__now(), b->s[1].event_us, b->s[1].n, b->fresh_us,
                 b->n_fresh, b->times_cupti);
}

/* Per side: throttled samples dropped, summaries into the report. */
static size_t summarize_sides(bstate *b, kr_report *r, double *times[2], size_t n[2],
                              kr__summary sum[2], json_t *sec, double top)
{
    size_t dropped = 0;
    const char *prefix[2] = {"time", "baseline"};
    for (int w = 0; w < 2; w++) {
        if (!b->s[w].active)
            continue;
        size_t d = drop_throttled(&b->s[w], times[w], n[w], top);
        dropped += d;
        n[w] -= d;
        if (w == SIDE_BASELINE)
            n[w] += add_shared(b, r, times[w], n[w], sec);
        kr__summary es;
        /* the event median, for comparison; summarize sorts: a copy */
        double *ev = malloc((b->s[w].n + 1) * sizeof(double));
        if (ev)
            memcpy(ev, b->s[w].event_us, b->s[w].n * sizeof(double));
        kr__summarize(ev, ev ? b->s[w].n : 0, &es);
        free(ev);
        kr__summarize(times[w], n[w], &sum[w]);
        put_summary(r, prefix[w], &sum[w]);
        char key[64];
        snprintf(key, sizeof key, "%s_event_us", prefix[w]);
        kr_report_set(r, key, es.median);
        json_t *sj = summary_json(&sum[w]);
        json_object_set_new(sj, "event_median_us", json_real(es.median));
        json_object_set_new(sj, "name", json_string(b->s[w].name));
        json_object_set_new(sec, w ? "baseline" : "candidate", sj);
    }
    return dropped;
}

static void speedup(bstate *b, kr_report *r, double *times[2], const size_t n[2],
                    const kr__summary sum[2])
{
    if (!b->s[1].active || !n[0] || !n[1])
        return;
    double lo, hi;
    kr__ratio_interval(times[1], n[1], times[0], n[0], &lo, &hi);
    /* sampling cannot see systematic differences: a kernel timed against
     * itself came out 0.2 % apart on the H200, twice (likely cause: each
     * side writes its own output buffers, placed differently; they cannot
     * be shared, or a stale-output candidate would pass the timed checks),
     * so the interval is widened by a resolution below which no speedup
     * is claimed */
    lo *= 1 - SPEEDUP_RESOLUTION;
    hi *= 1 + SPEEDUP_RESOLUTION;
    kr_report_set(r, "speedup", sum[1].median / sum[0].median);
    kr_report_set(r, "speedup_low", lo);
    kr_report_set(r, "speedup_high", hi);
}

static void describe(bstate *b, json_t *sec, int side_stream, int device_launched)
{
    json_object_set_new(sec, "side_stream_work", json_boolean(side_stream));
    json_object_set_new(sec, "device_launched_kernels", json_boolean(device_launched));
    json_object_set_new(sec, "case", json_string(b->p->cases[b->c].name));
    json_object_set_new(sec, "preset", json_string(b->o.preset == KR_BENCH_PRECISE ? "precise" : "fast"));
    json_object_set_new(sec, "graph", json_boolean(!!(b->o.flags & KR_BENCH_GRAPH)));
    json_object_set_new(sec, "l2_flush", json_boolean(!(b->o.flags & KR_BENCH_NO_FLUSH)));
    json_object_set_new(sec, "buffer_sets", json_integer((json_int_t)b->sets));
}

static void timed_checks(bstate *b, kr_report *r)
{
    if (!b->checks_failed)
        return;
    set_flag(r, b->check_flags);
    if (kr_report_verdict(r) == KR_VERDICT_PASSED || kr_report_verdict(r) == KR_VERDICT_NONE) {
        kr_report_set_verdict(r, KR_VERDICT_INCORRECT);
        kr_report_set(r, "correct", 0);
    }
    kr_report_set_text(r, "message", b->check_failure);
    kr_report_set_text(r, "feedback", b->check_failure);
}

/* Device memory the candidate uses: its tensors, its scratch and its
 * module's writable globals (a 1 GiB __device__ workspace is not free). */
static void memory(bstate *b, kr_report *r)
{
    uint64_t mem = b->s[0].bp.program->global_bytes;
    for (size_t i = 0; i < b->s[0].run[0].num_scratch; i++)
        mem += b->s[0].run[0].scratch[i].bytes;
    for (size_t t = 0; t < b->p->num_tensors; t++)
        mem += b->p->cases[b->c].bytes[t];
    kr_report_set(r, "memory_bytes", (double)mem);
}

int kr__bench_results(bstate *b, kr_report *r, double wall)
{
    json_t *sec = kr__report_section(r, "timing");
    double *times[2] = {malloc((b->s[0].n + 1) * sizeof(double)),
                        malloc((b->s[1].n + KR__MEMO_SAMPLES + 1) * sizeof(double))};
    if (!times[0] || !times[1] || !sec) {
        free(times[0]);
        free(times[1]);
        return kr__fail(b->ctx, KR_ENOMEM, "out of memory");
    }
    size_t n[2] = {0, 0};
    int side_stream = 0, device_launched = 0;
    side_times(b, times, n, sec, &side_stream, &device_launched);
    double top = 0;
    for (int w = 0; w < 2; w++)
        for (size_t i = 0; i < b->s[w].n; i++)
            top = b->s[w].clock_mhz[i] > top ? b->s[w].clock_mhz[i] : top;
    kr__summary sum[2];
    memset(sum, 0, sizeof sum);
    size_t dropped = summarize_sides(b, r, times, n, sum, sec, top);
    kr_report_set(r, "dropped_samples", (double)dropped);
    if (dropped)
        set_flag(r, KR_FLAG_THROTTLED);
    kr_report_set(r, "sm_clock_mhz", top);
    kr_report_set(r, "bench_wall_s", wall);
    kr_report_set(r, "timed_checks", (double)b->checks);
    speedup(b, r, times, n, sum);
    for (int w = 0; w < 2; w++)
        if (b->s[w].active && sum[w].noise > b->o.target_noise)
            set_flag(r, KR_FLAG_NOISY);
    if (side_stream || device_launched)
        set_flag(r, KR_FLAG_SIDE_STREAM);
    share_baseline(b, side_stream || device_launched);
    if (b->slow) {
        set_flag(r, KR_FLAG_SLOW);
        kr_report_set(r, "max_slowdown", b->o.max_slowdown);
    }
    describe(b, sec, side_stream, device_launched);
    timed_checks(b, r);
    memory(b, r);
    if (n[0])
        roofline(b, r, sum[0].median);
    free(times[0]);
    free(times[1]);
    return KR_OK;
}
