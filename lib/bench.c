/* kr_benchmark: time a candidate against a baseline the way nvbench does,
 * hardened against kernels that game the measurement.
 *
 * One sample (either side; the sides alternate):
 *   regenerate the inputs of the next buffer set (fresh values), poison its
 *   outputs; flush L2 (a memset over twice its size); block the stream with
 *   kr_spin_until on a host-mapped flag; record start; enqueue the plan (or
 *   graph, or the caller's baseline); record stop; enqueue a clock probe;
 *   release the flag. The enqueued work then runs back to back: host launch
 *   latency is outside the interval. GPU time comes from CUPTI (every kernel
 *   on every stream between the spin kernel and the probe) or from the events.
 * Samples run at a low SM clock are dropped. Some candidate samples are
 * followed by a reference run on the same inputs and a comparison. */
#include "kreward/evaluate.h"
#include "clock.h"
#include "dtype.h"
#include "launch.h"
#include "reference.h"
#include "stats.h"
#include "trace.h"
#include "verify_impl.h"

#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#define MAX_SETS 8
#define MAX_T 64
#define MAX_S 64
#define PROBE_CYCLES 20000
#define SPIN_TIMEOUT_NS 2000000000ull
/* relative: the smallest speedup difference the benchmark claims to resolve */
#define SPEEDUP_RESOLUTION 0.005

enum { SIDE_CANDIDATE = 0, SIDE_BASELINE = 1 };

typedef struct {
    const char *name;
    int active;
    int callback;                 /* KR_BASELINE_CALLBACK */
    kr_baseline_fn fn;
    void *user;
    kr__bound_plan bp;
    int bound;
    kr__ready_plan ready[MAX_SETS];
    CUgraphExec graph[MAX_SETS];
    kr__dbuf scratch[MAX_SETS][MAX_S];
    double *event_us, *clock_mhz;
    size_t n, cap;
    double gpu_seconds;           /* summed event time, for the stopping rule */
    uint64_t scratch_bytes;
} side;

typedef struct {
    kr_context *ctx;
    kr__gpu *g;
    const kr_problem *p;
    size_t c;
    kr_bench_options o;
    size_t sets;
    kr__dbuf t[MAX_SETS][MAX_T];
    uint64_t seeds;               /* advances per regeneration */
    kr__dbuf flush;
    CUevent ev_start, ev_stop;
    side s[2];
    /* timed-output checks against the reference */
    kr__bound_plan ref;
    int has_ref;
    kr__dbuf want[MAX_T];
    kr__dbuf ref_scratch[MAX_S];
    size_t checks, checks_failed;
    char check_failure[600];
    /* sample order, for attributing CUPTI records */
    int *order;
    size_t num_order, cap_order;
} bstate;

static const struct {
    uint32_t min_samples, max_samples, sets;
    double min_time, max_time, noise, check_fraction;
} presets[] = {
    {0, 0, 0, 0, 0, 0, 0},
    {10, 200, 4, 0.002, 0.12, 0.02, 0.1},     /* fast */
    {30, 5000, 6, 0.5, 15.0, 0.005, 0.05},    /* precise */
};

int kr_bench_options_init(kr_bench_options *o, uint32_t version, uint32_t preset)
{
    if (!o)
        return KR_EINVAL;
    if (version != KR_BENCH_OPTIONS_VERSION)
        return KR_EVERSION;
    if (preset != KR_BENCH_FAST && preset != KR_BENCH_PRECISE)
        return KR_EINVAL;
    kr_bench_options d = KR_BENCH_OPTIONS_INIT;
    d.preset = preset;
    *o = d;
    return KR_OK;
}

static void fill_defaults(kr_bench_options *o)
{
    uint32_t p = o->preset == KR_BENCH_PRECISE ? 2 : 1;
    o->preset = p;
    o->min_samples = o->min_samples ? o->min_samples : presets[p].min_samples;
    o->max_samples = o->max_samples ? o->max_samples : presets[p].max_samples;
    if (o->max_samples < o->min_samples)
        o->max_samples = o->min_samples;
    o->min_time_s = o->min_time_s > 0 ? o->min_time_s : presets[p].min_time;
    o->max_time_s = o->max_time_s > 0 ? o->max_time_s : presets[p].max_time;
    o->target_noise = o->target_noise > 0 ? o->target_noise : presets[p].noise;
    o->buffer_sets = o->buffer_sets ? o->buffer_sets : presets[p].sets;
    if (o->buffer_sets > MAX_SETS)
        o->buffer_sets = MAX_SETS;
    o->check_fraction = o->check_fraction > 0 ? o->check_fraction : presets[p].check_fraction;
}

#define CU(call, what)                                     \
    do {                                                   \
        CUresult r_ = (call);                              \
        if (r_ != CUDA_SUCCESS)                            \
            return kr__cuda_fail(b->ctx, r_, what);        \
    } while (0)

static int is_output(const kr_problem *p, size_t t)
{
    return p->tensors[t].role != KR_ROLE_IN;
}

static uint64_t elements(const kr_problem *p, size_t t, size_t c)
{
    return p->cases[c].bytes[t] / (uint64_t)kr__dtype_size(p->tensors[t].dtype);
}

/* Fresh values in the inputs of a set, poison in its outputs. */
static int refresh_set(bstate *b, size_t k)
{
    uint64_t seed = kr_problem_case_seed(b->seeds++, b->c);
    for (size_t t = 0; t < b->p->num_tensors; t++) {
        const kr__tensor *x = &b->p->tensors[t];
        int rc = x->role == KR_ROLE_OUT ? kr__poison(b->ctx, &b->t[k][t], x->dtype, 0)
                                        : kr__k_generate(b->ctx, b->t[k][t].ptr, elements(b->p, t, b->c),
                                                         &x->dist, seed, (uint32_t)t);
        if (rc != KR_OK)
            return rc;
    }
    return KR_OK;
}

static int bind_side(bstate *b, side *s, const kr_program *prog, const kr_plan *plan)
{
    int rc = kr__plan_bind(b->ctx, plan, b->p, prog, &s->bp);
    s->bound = 1;
    for (size_t k = 0; k < b->sets && rc == KR_OK; k++) {
        CUdeviceptr tptr[MAX_T], sptr[MAX_S];
        for (size_t t = 0; t < b->p->num_tensors; t++)
            tptr[t] = b->t[k][t].ptr;
        uint64_t total = 0;
        for (size_t i = 0; i < plan->num_scratch && rc == KR_OK; i++) {
            uint64_t bytes = 0;
            rc = kr__plan_scratch_bytes(b->ctx, &s->bp, i, b->c, &bytes);
            if (rc == KR_OK)
                rc = kr__dbuf_alloc(b->ctx, &s->scratch[k][i], bytes, "a scratch buffer");
            sptr[i] = s->scratch[k][i].ptr;
            total += bytes;
        }
        s->scratch_bytes = total;
        if (rc == KR_OK)
            rc = kr__ready(b->ctx, &s->bp, b->c, &s->ready[k]);
        if (rc == KR_OK)
            kr__ready_bind(&s->ready[k], tptr, sptr);
    }
    return rc;
}

/* Zero-init scratch must be zero before every run; poison scratch gets poison. */
static int reset_scratch(bstate *b, side *s, size_t k)
{
    for (size_t i = 0; s->bound && i < s->bp.plan->num_scratch; i++)
        CU(kr__cuda()->cuMemsetD8Async(s->scratch[k][i].ptr, s->bp.plan->scratch[i].zero ? 0 : 0xA5,
                                       s->scratch[k][i].bytes, b->g->stream), "cuMemsetD8Async");
    return KR_OK;
}

static int capture_graphs(bstate *b, side *s)
{
    const kr__cuda_api *cu = kr__cuda();
    for (size_t k = 0; k < b->sets; k++) {
        CUgraph graph = NULL;
        size_t failed;
        CU(cu->cuStreamBeginCapture(b->g->stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL),
           "cuStreamBeginCapture");
        int rc = kr__ready_launch(b->ctx, &s->bp, &s->ready[k], b->g->stream, &failed);
        CUresult r = cu->cuStreamEndCapture(b->g->stream, &graph);
        if (rc != KR_OK)
            return rc;
        if (r != CUDA_SUCCESS)
            return kr__cuda_fail(b->ctx, r, "cuStreamEndCapture");
        r = cu->cuGraphInstantiateWithFlags(&s->graph[k], graph, 0);
        cu->cuGraphDestroy(graph);
        if (r != CUDA_SUCCESS)
            return kr__cuda_fail(b->ctx, r, "cuGraphInstantiateWithFlags");
    }
    return KR_OK;
}

static int enqueue_side(bstate *b, side *s, size_t k)
{
    size_t failed;
    if (s->callback) {
        uint64_t ptrs[MAX_T];
        for (size_t t = 0; t < b->p->num_tensors; t++)
            ptrs[t] = b->t[k][t].ptr;
        char err[512] = "";
        if (s->fn(s->user, (void *)b->g->stream, ptrs, b->p->num_tensors, err, sizeof err) != 0)
            return kr__fail(b->ctx, KR_EPLUGIN, "the baseline callback failed: %s",
                            err[0] ? err : "no message");
        return KR_OK;
    }
    if (s->graph[k])
        CU(kr__cuda()->cuGraphLaunch(s->graph[k], b->g->stream), "cuGraphLaunch");
    else
        return kr__ready_launch(b->ctx, &s->bp, &s->ready[k], b->g->stream, &failed);
    return KR_OK;
}

static int record_order(bstate *b, int which)
{
    if (b->num_order == b->cap_order) {
        size_t cap = b->cap_order ? b->cap_order * 2 : 256;
        int *grown = realloc(b->order, cap * sizeof *grown);
        if (!grown)
            return kr__fail(b->ctx, KR_ENOMEM, "out of memory");
        b->order = grown;
        b->cap_order = cap;
    }
    b->order[b->num_order++] = which;
    return KR_OK;
}

static int push_sample(bstate *b, side *s, double us, double mhz)
{
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 128;
        double *e = realloc(s->event_us, cap * sizeof *e);
        if (e)
            s->event_us = e;
        double *m = e ? realloc(s->clock_mhz, cap * sizeof *m) : NULL;
        if (!m)
            return kr__fail(b->ctx, KR_ENOMEM, "out of memory");
        s->clock_mhz = m;
        s->cap = cap;
    }
    s->event_us[s->n] = us;
    s->clock_mhz[s->n] = mhz;
    s->n++;
    s->gpu_seconds += us * 1e-6;
    return KR_OK;
}

/* Runs the reference on set k's inputs and compares the candidate's outputs. */
static int check_outputs(bstate *b, size_t k)
{
    kr__gpu *g = b->g;
    CUdeviceptr tptr[MAX_T], sptr[MAX_S];
    kr__ready_plan rp;
    size_t failed, slot[MAX_T];
    for (size_t t = 0; t < b->p->num_tensors; t++)
        tptr[t] = is_output(b->p, t) ? b->want[t].ptr : b->t[k][t].ptr;
    for (size_t i = 0; i < b->ref.plan->num_scratch; i++) {
        sptr[i] = b->ref_scratch[i].ptr;
        CU(kr__cuda()->cuMemsetD8Async(sptr[i], b->ref.plan->scratch[i].zero ? 0 : 0xA5,
                                       b->ref_scratch[i].bytes, g->stream), "cuMemsetD8Async");
    }
    int rc = kr__ready(b->ctx, &b->ref, b->c, &rp);
    if (rc != KR_OK)
        return rc;
    kr__ready_bind(&rp, tptr, sptr);
    rc = kr__gpu_slots_reset(b->ctx, g);
    if (rc == KR_OK)
        rc = kr__ready_launch(b->ctx, &b->ref, &rp, g->stream, &failed);
    kr__ready_free(&rp);
    for (size_t t = 0; t < b->p->num_tensors && rc == KR_OK; t++) {
        const kr__tensor *x = &b->p->tensors[t];
        if (!is_output(b->p, t))
            continue;
        CUdeviceptr st = kr__gpu_slot(g, sizeof(kr__cmp_stats) / 8, &slot[t]);
        CU(kr__cuda()->cuMemsetD8Async(st + 24, 0xff, 8, g->stream), "cuMemsetD8Async");
        rc = kr__k_compare(b->ctx, b->t[k][t].ptr, b->want[t].ptr, elements(b->p, t, b->c), x->dtype,
                           x->rtol, x->atol, x->role == KR_ROLE_OUT ? kr__poison_bits(x->dtype, 0)
                                                                    : 0xffffffffu, st);
    }
    if (rc == KR_OK)
        rc = kr__gpu_fetch_slots(b->ctx, g);
    b->checks++;
    for (size_t t = 0; t < b->p->num_tensors && rc == KR_OK; t++) {
        if (!is_output(b->p, t))
            continue;
        kr__cmp_stats stats;
        memcpy(&stats, &g->slots[slot[t]], sizeof stats);
        if (stats.mismatches) {
            if (!b->checks_failed++)
                snprintf(b->check_failure, sizeof b->check_failure,
                         "a timed call (sample %zu) wrote %llu wrong values to '%s'",
                         b->s[0].n, stats.mismatches, b->p->tensors[t].name);
        }
    }
    return rc;
}

static int one_sample(bstate *b, int which, size_t k, int timed)
{
    const kr__cuda_api *cu = kr__cuda();
    kr__gpu *g = b->g;
    side *s = &b->s[which];
    int rc = refresh_set(b, k);
    if (rc == KR_OK)
        rc = reset_scratch(b, s, k);
    if (rc != KR_OK)
        return rc;
    if (!(b->o.flags & KR_BENCH_NO_FLUSH))
        CU(cu->cuMemsetD32Async(b->flush.ptr, (unsigned)b->seeds, b->flush.bytes / 4, g->stream),
           "flushing L2");
    atomic_store((_Atomic int *)g->flag, 0);
    uint64_t timeout = SPIN_TIMEOUT_NS;
    void *spin_params[] = {&g->flag_dev, &timeout};
    CU(cu->cuLaunchKernel(g->f_spin_until, 1, 1, 1, 1, 1, 1, 0, g->stream, spin_params, NULL),
       "launching the spin kernel");
    CU(cu->cuEventRecord(b->ev_start, g->stream), "cuEventRecord");
    rc = enqueue_side(b, s, k);
    if (rc == KR_OK)
        rc = (cu->cuEventRecord(b->ev_stop, g->stream) == CUDA_SUCCESS) ? KR_OK : KR_ECUDA;
    long long cycles = PROBE_CYCLES;
    CUdeviceptr ns_out = g->flag_dev + 16, cyc_out = g->flag_dev + 24;
    void *probe_params[] = {&cycles, &ns_out, &cyc_out};
    if (rc == KR_OK)
        CU(cu->cuLaunchKernel(g->f_spin_cycles, 1, 1, 1, 1, 1, 1, 0, g->stream, probe_params, NULL),
           "launching the clock probe");
    atomic_store((_Atomic int *)g->flag, 1); /* release: the queued work runs back to back */
    if (rc != KR_OK)
        return rc;
    if ((rc = kr__gpu_wait(b->ctx, 10 + b->o.max_time_s, "a timed sample")) != KR_OK)
        return rc;
    /* a callback may have put work on other streams: let it finish inside
     * this sample, where CUPTI attributes it (trusted, in-process code) */
    if (s->callback)
        CU(cu->cuCtxSynchronize(), "cuCtxSynchronize after the baseline callback");
    float ms = 0;
    CU(cu->cuEventElapsedTime(&ms, b->ev_start, b->ev_stop), "cuEventElapsedTime");
    volatile uint64_t *probe = (volatile uint64_t *)((char *)g->flag + 16);
    double mhz = probe[0] ? (double)probe[1] / (double)probe[0] * 1e3 : 0;
    if (!timed)
        return KR_OK;
    if ((rc = record_order(b, which)) != KR_OK || (rc = push_sample(b, s, ms * 1e3, mhz)) != KR_OK)
        return rc;
    int check = which == SIDE_CANDIDATE && b->has_ref && !(b->o.flags & KR_BENCH_NO_CHECK) &&
                (s->n == 1 || fmod((double)s->n * b->o.check_fraction, 1.0) < b->o.check_fraction);
    return check ? check_outputs(b, k) : KR_OK;
}

static double noise_of(const side *s)
{
    if (s->n < 2)
        return INFINITY;
    double mean = 0, ss = 0;
    for (size_t i = 0; i < s->n; i++)
        mean += s->event_us[i];
    mean /= (double)s->n;
    for (size_t i = 0; i < s->n; i++)
        ss += (s->event_us[i] - mean) * (s->event_us[i] - mean);
    return mean > 0 ? sqrt(ss / (double)(s->n - 1)) / mean : INFINITY;
}

static int side_done(const bstate *b, const side *s)
{
    return !s->active || (s->n >= b->o.min_samples && s->gpu_seconds >= b->o.min_time_s &&
                          noise_of(s) <= b->o.target_noise) || s->n >= b->o.max_samples;
}

static int measure(bstate *b, double *wall)
{
    double t0 = kr__now();
    size_t k = 0;
    int rc = KR_OK;
    /* warm-up: one untimed run of each side (module load, caches) */
    for (int w = 0; w < 2 && rc == KR_OK; w++)
        if (b->s[w].active)
            rc = one_sample(b, w, k++ % b->sets, 0);
    kr__trace_discard();
    for (size_t round = 0; rc == KR_OK; round++) {
        /* both sides walk the same sets in the same order (no side is tied
         * to buffers that happen to sit better in memory), and take turns
         * going first in a round (no side always follows the other) */
        for (size_t i = 0; i < 2 && rc == KR_OK; i++) {
            int w = (int)((round + i) & 1);
            if (b->s[w].active && b->s[w].n < b->o.max_samples)
                rc = one_sample(b, w, b->s[w].n % b->sets, 1);
        }
        int done = side_done(b, &b->s[0]) && side_done(b, &b->s[1]);
        if (done || (kr__now() - t0 > b->o.max_time_s && b->s[0].n >= 3))
            break;
    }
    *wall = kr__now() - t0;
    return rc;
}

/* CUPTI: per sample (records in start order, each sample opened by its spin
 * kernel), the kernels on the sample's stream between the spin kernel and
 * the clock probe, and every kernel on any other stream until the next
 * sample; the span from the first start to the last end, plus the whole of
 * any side-stream kernel that started while the stream was blocked. */
static int cupti_times(bstate *b, double *out[2], size_t n_out[2], int *side_stream,
                       int *device_launched)
{
    kr__kernel_record *r;
    size_t n;
    if (kr__trace_collect(&r, &n) != 0)
        return -1;
    size_t sample = 0, found = 0;
    uint64_t pending = 0; /* other-stream work since the last probe */
    uint32_t own = 0;     /* the engine's stream, as CUPTI numbers it */
    for (size_t i = 0; i < n; i++)
        if (r[i].marker == 1) {
            own = r[i].stream;
            break;
        }
    for (size_t i = 0; i < n && sample < b->num_order; i++) {
        if (r[i].marker != 1) {
            /* another stream's kernel that started before this sample's spin
             * kernel (e.g. launched by a callback while the stream was still
             * flushing) belongs to the sample that follows */
            if (r[i].marker == 0 && r[i].stream != own) {
                pending += r[i].end - r[i].start;
                *side_stream = 1;
            }
            continue;
        }
        uint64_t lo = UINT64_MAX, hi = 0, hidden = pending;
        pending = 0;
        int probe_seen = 0;
        size_t j = i + 1;
        for (; j < n && r[j].marker != 1 && !probe_seen; j++) {
            if (r[j].marker == 2) {
                probe_seen = 1;
                continue;
            }
            if (r[j].stream == r[i].stream) {
                if (r[j].start < r[i].end)
                    continue;
            } else {
                *side_stream = 1;
                /* started while the sample's stream was blocked: counts in
                 * full, so hiding work never makes anything look faster */
                if (r[j].start < r[i].end) {
                    hidden += r[j].end - r[j].start;
                    continue;
                }
            }
            lo = r[j].start < lo ? r[j].start : lo;
            hi = r[j].end > hi ? r[j].end : hi;
            *device_launched |= r[j].device_launched;
        }
        i = j - 1; /* after the probe: the engine's own kernels, then the next sample */
        int which = b->order[sample++];
        if (hi > lo || hidden) {
            out[which][n_out[which]++] = (double)((hi > lo ? hi - lo : 0) + hidden) * 1e-3;
            found++;
        }
    }
    free(r);
    return found == b->num_order ? 0 : -1;
}

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
static size_t drop_throttled(side *s, double *times, size_t n, double top_mhz)
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

int kr__peaks(kr_context *ctx); /* peaks.c */

static void roofline(bstate *b, kr_report *r, double median_us)
{
    char why[256];
    int64_t bytes = -1, flops = -1;
    const kr_problem *p = b->p;
    if (p->bytes_expr)
        kr__expr_eval(p->bytes_expr, p->cases[b->c].dims, &bytes, why, sizeof why);
    if (p->flops_expr)
        kr__expr_eval(p->flops_expr, p->cases[b->c].dims, &flops, why, sizeof why);
    if (bytes < 0 && flops < 0)
        return;
    if (kr__peaks(b->ctx) != KR_OK)
        return;
    double t = median_us * 1e-6, floor_t = 0;
    if (bytes > 0) {
        kr_report_set(r, "achieved_gbps", (double)bytes / t / 1e9);
        kr_report_set(r, "peak_gbps", b->g->peak_bytes_per_s / 1e9);
        floor_t = (double)bytes / b->g->peak_bytes_per_s;
        /* faster than moving its bytes allows: it skipped work or cached results */
        if (t < 0.8 * floor_t)
            kr_report_set_flags(r, kr_report_flags(r) | KR_FLAG_IMPLAUSIBLE_SPEED);
    }
    if (flops > 0) {
        kr_report_set(r, "achieved_tflops", (double)flops / t / 1e12);
        kr_report_set(r, "peak_fp32_tflops", b->g->peak_flops / 1e12);
        double ft = (double)flops / b->g->peak_flops;
        floor_t = ft > floor_t ? ft : floor_t;
    }
    kr_report_set(r, "roofline_fraction", floor_t / t);
}

static void results(bstate *b, kr_report *r, double wall)
{
    json_t *sec = kr__report_section(r, "timing");
    double *times[2] = {NULL, NULL};
    size_t n[2] = {0, 0};
    int side_stream = 0, device_launched = 0, use_cupti = 0;
    for (int w = 0; w < 2; w++)
        times[w] = malloc((b->s[w].n + 1) * sizeof(double));
    if (!(b->o.flags & KR_BENCH_EVENTS_ONLY) && kr__trace_active())
        use_cupti = cupti_times(b, times, n, &side_stream, &device_launched) == 0;
    for (int w = 0; w < 2 && !use_cupti; w++) {
        memcpy(times[w], b->s[w].event_us, b->s[w].n * sizeof(double));
        n[w] = b->s[w].n;
    }
    json_object_set_new(sec, "source", json_string(use_cupti ? "cupti" : "events"));
    if (!use_cupti)
        json_object_set_new(sec, "why_not_cupti",
                            json_string(b->o.flags & KR_BENCH_EVENTS_ONLY ? "KR_BENCH_EVENTS_ONLY"
                                        : b->ctx->trace_why[0] ? b->ctx->trace_why
                                                               : "CUPTI records incomplete"));
    double top = 0;
    for (int w = 0; w < 2; w++)
        for (size_t i = 0; i < b->s[w].n; i++)
            top = b->s[w].clock_mhz[i] > top ? b->s[w].clock_mhz[i] : top;
    size_t dropped = 0;
    kr__summary sum[2];
    const char *prefix[2] = {"time", "baseline"};
    for (int w = 0; w < 2; w++) {
        if (!b->s[w].active)
            continue;
        size_t d = drop_throttled(&b->s[w], times[w], n[w], top);
        dropped += d;
        size_t kept = n[w] - d;
        n[w] = kept;
        double *ev = malloc((b->s[w].n + 1) * sizeof(double));
        if (ev)
            memcpy(ev, b->s[w].event_us, b->s[w].n * sizeof(double));
        kr__summary es;
        kr__summarize(ev, ev ? b->s[w].n : 0, &es);
        free(ev);
        kr__summarize(times[w], kept, &sum[w]);
        put_summary(r, prefix[w], &sum[w]);
        char key[64];
        snprintf(key, sizeof key, "%s_event_us", prefix[w]);
        kr_report_set(r, key, es.median);
        json_t *sj = summary_json(&sum[w]);
        json_object_set_new(sj, "event_median_us", json_real(es.median));
        json_object_set_new(sj, "name", json_string(b->s[w].name));
        json_object_set_new(sec, w ? "baseline" : "candidate", sj);
    }
    kr_report_set(r, "dropped_samples", (double)dropped);
    if (dropped)
        kr_report_set_flags(r, kr_report_flags(r) | KR_FLAG_THROTTLED);
    kr_report_set(r, "sm_clock_mhz", top);
    kr_report_set(r, "bench_wall_s", wall);
    kr_report_set(r, "timed_checks", (double)b->checks);
    if (b->s[1].active && n[0] && n[1]) {
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
    for (int w = 0; w < 2; w++)
        if (b->s[w].active && sum[w].noise > b->o.target_noise)
            kr_report_set_flags(r, kr_report_flags(r) | KR_FLAG_NOISY);
    if (side_stream || device_launched)
        kr_report_set_flags(r, kr_report_flags(r) | KR_FLAG_SIDE_STREAM);
    json_object_set_new(sec, "side_stream_work", json_boolean(side_stream));
    json_object_set_new(sec, "device_launched_kernels", json_boolean(device_launched));
    json_object_set_new(sec, "case", json_string(b->p->cases[b->c].name));
    json_object_set_new(sec, "preset", json_string(b->o.preset == 2 ? "precise" : "fast"));
    json_object_set_new(sec, "graph", json_boolean(!!(b->o.flags & KR_BENCH_GRAPH)));
    json_object_set_new(sec, "l2_flush", json_boolean(!(b->o.flags & KR_BENCH_NO_FLUSH)));
    json_object_set_new(sec, "buffer_sets", json_integer((json_int_t)b->sets));
    if (b->checks_failed) {
        kr_report_set_flags(r, kr_report_flags(r) | KR_FLAG_TIMED_OUTPUT_WRONG);
        if (kr_report_verdict(r) == KR_VERDICT_PASSED || kr_report_verdict(r) == KR_VERDICT_NONE) {
            kr_report_set_verdict(r, KR_VERDICT_INCORRECT);
            kr_report_set(r, "correct", 0);
        }
        kr_report_set_text(r, "message", b->check_failure);
        kr_report_set_text(r, "feedback", b->check_failure);
    }
    uint64_t mem = b->s[0].scratch_bytes;
    for (size_t t = 0; t < b->p->num_tensors; t++)
        mem += b->p->cases[b->c].bytes[t];
    kr_report_set(r, "memory_bytes", (double)mem);
    if (n[0])
        roofline(b, r, sum[0].median);
    free(times[0]);
    free(times[1]);
}

static int setup(bstate *b, const kr_program *cand, const kr_plan *plan, const kr_baseline *base)
{
    const kr__cuda_api *cu = kr__cuda();
    const kr_problem *p = b->p;
    int rc = kr__gpu_get(b->ctx, &b->g);
    if (rc != KR_OK)
        return rc;
    if (p->num_tensors > MAX_T)
        return kr__fail(b->ctx, KR_EUNSUPPORTED, "at most %d tensors", MAX_T);
    for (size_t k = 0; k < b->sets; k++)
        for (size_t t = 0; t < p->num_tensors && rc == KR_OK; t++)
            rc = kr__dbuf_alloc(b->ctx, &b->t[k][t], p->cases[b->c].bytes[t], "a benchmark buffer set");
    /* at least twice the L2, so nothing of the last sample survives */
    uint64_t flush = (uint64_t)(b->g->l2_bytes > 0 ? b->g->l2_bytes : 64 << 20) * 2;
    if (rc == KR_OK && !(b->o.flags & KR_BENCH_NO_FLUSH))
        rc = kr__dbuf_alloc(b->ctx, &b->flush, flush, "the L2 flush buffer");
    if (rc != KR_OK)
        return rc;
    CU(cu->cuEventCreate(&b->ev_start, CU_EVENT_DEFAULT), "cuEventCreate");
    CU(cu->cuEventCreate(&b->ev_stop, CU_EVENT_DEFAULT), "cuEventCreate");
    /* persisting-L2 windows survive memset flushes: disable and reset them */
    cu->cuCtxSetLimit(CU_LIMIT_PERSISTING_L2_CACHE_SIZE, 0);
    cu->cuCtxResetPersistingL2Cache();
    b->s[0].active = 1;
    b->s[0].name = "candidate";
    if ((rc = bind_side(b, &b->s[0], cand, plan)) != KR_OK)
        return rc;
    if (p->reference_kind == KR_REFERENCE_SOURCE) {
        rc = kr__reference_bind(b->ctx, p, &b->ref);
        b->has_ref = 1; /* teardown unbinds whatever the bind left */
        if (rc != KR_OK)
            return rc;
        const kr_plan *rplan = b->ref.plan;
        for (size_t t = 0; t < p->num_tensors && rc == KR_OK; t++)
            if (is_output(p, t))
                rc = kr__dbuf_alloc(b->ctx, &b->want[t], p->cases[b->c].bytes[t], "a reference copy");
        for (size_t i = 0; i < rplan->num_scratch && rc == KR_OK; i++) {
            uint64_t bytes;
            rc = kr__plan_scratch_bytes(b->ctx, &b->ref, i, b->c, &bytes);
            if (rc == KR_OK)
                rc = kr__dbuf_alloc(b->ctx, &b->ref_scratch[i], bytes, "a reference scratch buffer");
        }
        if (rc != KR_OK)
            return rc;
    }
    kr_baseline def = KR_BASELINE_INIT;
    const kr_baseline *bl = base ? base : &def;
    side *s = &b->s[1];
    s->name = bl->name ? bl->name : bl->kind == KR_BASELINE_REFERENCE ? "reference"
                                  : bl->kind == KR_BASELINE_CALLBACK ? "callback" : "baseline";
    if (bl->kind == KR_BASELINE_REFERENCE && b->has_ref) {
        s->active = 1;
        rc = bind_side(b, s, b->ref.program, b->ref.plan);
    } else if (bl->kind == KR_BASELINE_PROGRAM) {
        if (!bl->program || !bl->plan)
            return kr__fail(b->ctx, KR_EINVAL, "a program baseline needs a program and a plan");
        s->active = 1;
        rc = bind_side(b, s, bl->program, bl->plan);
    } else if (bl->kind == KR_BASELINE_CALLBACK) {
        if (!bl->fn)
            return kr__fail(b->ctx, KR_EINVAL, "a callback baseline needs a function");
        s->active = s->callback = 1;
        s->fn = bl->fn;
        s->user = bl->user;
    }
    if (rc == KR_OK && (b->o.flags & KR_BENCH_GRAPH))
        for (int w = 0; w < 2 && rc == KR_OK; w++)
            if (b->s[w].active && !b->s[w].callback)
                rc = capture_graphs(b, &b->s[w]);
    return rc;
}

static void teardown(bstate *b)
{
    const kr__cuda_api *cu = kr__cuda();
    int alive = !b->ctx->poisoned && b->g;
    for (int w = 0; w < 2; w++) {
        side *s = &b->s[w];
        for (size_t k = 0; k < MAX_SETS; k++) {
            kr__ready_free(&s->ready[k]);
            if (s->graph[k] && alive)
                cu->cuGraphExecDestroy(s->graph[k]);
            for (size_t i = 0; i < MAX_S; i++)
                kr__dbuf_free(b->ctx, &s->scratch[k][i]);
        }
        if (s->bound)
            kr__plan_unbind(&s->bp);
        free(s->event_us);
        free(s->clock_mhz);
    }
    for (size_t k = 0; k < MAX_SETS; k++)
        for (size_t t = 0; t < MAX_T; t++)
            kr__dbuf_free(b->ctx, &b->t[k][t]);
    for (size_t t = 0; t < MAX_T; t++)
        kr__dbuf_free(b->ctx, &b->want[t]);
    for (size_t i = 0; i < MAX_S; i++)
        kr__dbuf_free(b->ctx, &b->ref_scratch[i]);
    kr__dbuf_free(b->ctx, &b->flush);
    kr__reference_unbind(&b->ref);
    if (alive && b->ev_start)
        cu->cuEventDestroy(b->ev_start);
    if (alive && b->ev_stop)
        cu->cuEventDestroy(b->ev_stop);
    free(b->order);
}

int kr_benchmark(kr_context *ctx, const kr_problem *problem, const kr_program *cand,
                 const kr_plan *plan, const kr_bench_options *opts, const kr_baseline *baseline,
                 kr_report **report)
{
    if (!report)
        return KR_EINVAL;
    if (!*report && kr_report_new(report) != KR_OK)
        return KR_ENOMEM;
    kr_report *r = *report;
    if (!ctx || !problem || !cand || !plan) {
        kr_report_set_text(r, "message", "kr_benchmark needs a context, problem, program and plan");
        return kr__fail(ctx, KR_EINVAL, "kr_benchmark needs a context, problem, program and plan");
    }
    kr__clear_error(ctx);
    bstate *b = calloc(1, sizeof *b);
    if (!b)
        return kr__fail(ctx, KR_ENOMEM, "out of memory");
    b->ctx = ctx;
    b->p = problem;
    kr_bench_options d = KR_BENCH_OPTIONS_INIT;
    b->o = opts ? *opts : d;
    int rc = KR_OK;
    if (b->o.version == 0 || b->o.version > KR_BENCH_OPTIONS_VERSION)
        rc = kr__fail(ctx, KR_EVERSION, "kr_bench_options version %u is newer than this library",
                      b->o.version);
    fill_defaults(&b->o);
    b->c = b->o.case_index < 0 ? problem->timing_case : (size_t)b->o.case_index;
    if (rc == KR_OK && b->c >= problem->num_cases)
        rc = kr__fail(ctx, KR_EINVAL, "case %lld does not exist", (long long)b->o.case_index);
    b->sets = b->o.buffer_sets;
    b->seeds = b->o.seed;
    while (!b->seeds && getrandom(&b->seeds, sizeof b->seeds, 0) != (ssize_t)sizeof b->seeds)
        ;
    double wall = 0;
    if (rc == KR_OK)
        rc = setup(b, cand, plan, baseline);
    if (rc == KR_OK)
        rc = measure(b, &wall);
    if (rc == KR_OK) {
        results(b, r, wall);
    } else {
        kr_report_set_text(r, "message", kr_context_errmsg(ctx));
        if (rc == KR_EFAULT || rc == KR_ETIMEOUT) /* the candidate broke the device */
            kr_report_set_verdict(r, rc == KR_EFAULT ? KR_VERDICT_FAULT : KR_VERDICT_TIMEOUT);
    }
    teardown(b);
    free(b);
    return rc;
}
