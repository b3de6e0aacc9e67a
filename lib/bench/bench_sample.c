/* One sample of the benchmark (either side; the sides alternate):
 *   a buffer set drawn (not the last one), its inputs regenerated (fresh
 *   values) and its outputs poisoned behind the previous call; reset
 *   scratch; flush L2 (a memset over twice its size); block the stream
 *   with kr_spin_until on a host-mapped flag; record start; enqueue the
 *   plan (or graph, or the caller's baseline); record stop; enqueue a clock
 *   probe; release the flag; queue the values of the set after. The
 *   enqueued work then runs back to back: host launch latency is outside
 *   the interval, and the next values are made while the host reads this
 *   sample.
 * Some candidate samples are followed by a reference run on the set's seed
 * and a comparison (timed-output checks).
 * A side that met its stopping rule is sampled every DONE_PERIOD-th round
 * only while the other goes on (still interleaved, at a lower rate: a 2 ms
 * baseline sampled as often as a 20 us candidate needed was most of the
 * benchmark); the reference baseline's rule may be met with the samples of
 * earlier benchmarks of the same problem (baseline_memo.h): then it takes
 * no warm-up call, its memo's fresh samples, and nothing after they agree. */
#include "bench/bench_impl.h"
#include "common/clock.h"
#include "common/random.h"
#include "driver/trace.h"

#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PROBE_CYCLES 20000
#define DONE_PERIOD 8
#define SPIN_TIMEOUT_NS 2000000000ull

/* Fresh values in the inputs of a set, poison in its outputs, its guard
 * zones restored: the set is ready for its next call. */
static int prepare_set(bstate *b, size_t k)
{
    uint64_t seed = kr_problem_case_seed(b->seeds++, b->c);
    b->set_seed[k] = seed;
    int rc = kr__tset_fill_inputs(b->ctx, &b->set[k], seed);
    if (rc == KR_OK)
        rc = kr__tset_fill_outputs(b->ctx, &b->set[k], seed, 0);
    if (rc == KR_OK)
        rc = kr__tset_reguard(b->ctx, &b->set[k]);
    b->ready[k] = rc == KR_OK;
    return rc;
}

size_t kr__bench_next_set(size_t current, size_t sets, uint64_t r)
{
    /* any other set, drawn: a fixed turn would tie the set to the sample's
     * place in the schedule, and a side sampled every DONE_PERIOD-th round
     * met as few as two of six sets */
    return sets < 2 ? 0 : (current + 1 + (size_t)(r % (sets - 1))) % sets;
}

size_t kr__bench_next_set_avoiding(size_t current, size_t avoid, size_t sets, uint64_t r)
{
    if (avoid >= sets || avoid == current || sets < 3)
        return kr__bench_next_set(current, sets, r);
    size_t pick = (size_t)(r % (sets - 2)); /* among the sets - 2 others */
    for (size_t k = 0; k < sets; k++)
        if (k != current && k != avoid && pick-- == 0)
            return k;
    return current; /* (not reached) */
}

static int enqueue_side(bstate *b, bside *s, size_t k)
{
    size_t failed;
    if (s->callback) {
        const kr_problem *p = b->p;
        uint64_t *ptrs = calloc(p->num_tensors ? p->num_tensors : 1, sizeof *ptrs);
        if (!ptrs)
            return kr__fail(b->ctx, KR_ENOMEM, "out of memory");
        for (size_t t = 0; t < p->num_tensors; t++)
            ptrs[t] = b->set[k].buf[t].ptr;
        char err[512] = "";
        int failed_cb = s->fn(s->user, (void *)b->e->stream, ptrs, p->num_tensors, err, sizeof err);
        free(ptrs);
        if (failed_cb != 0)
            return kr__fail(b->ctx, KR_EPLUGIN, "the baseline callback failed: %s",
                            err[0] ? err : "no message");
        return KR_OK;
    }
    if (s->graph[k])
        KR__CU(b->ctx, kr__cuda()->cuGraphLaunch(s->graph[k], b->e->stream), "cuGraphLaunch");
    else
        return kr__run_launch(b->ctx, &s->run[k], &failed);
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

static int push_sample(bstate *b, bside *s, double us, double mhz)
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

/* Flush, spin, start event, the side's work, stop event, clock probe,
 * release: everything between the spin and the probe is timed. slot: the
 * sample's events and probe place (two samples may be in flight). */
static int timed_enqueue(bstate *b, bside *s, size_t k, int slot)
{
    const kr__cuda_api *cu = kr__cuda();
    kr__engine *e = b->e;
    if (!(b->o.flags & KR_BENCH_NO_FLUSH)) {
        kr__gpu_bytes(e, KR__GPU_FILL, (double)b->flush.bytes);
        int timer = kr__gpu_begin(e, KR__GPU_FILL); /* before the spin: outside the clock */
        CUresult r = cu->cuMemsetD32Async(b->flush.ptr, (unsigned)b->seeds, b->flush.bytes / 4, e->stream);
        kr__gpu_end(e, timer);
        if (r != CUDA_SUCCESS)
            return kr__cuda_fail(b->ctx, r, "flushing L2");
    }
    /* a flag per sample in flight: a second sample's queueing never holds
     * the first's spin */
    _Atomic int *flag = (_Atomic int *)((char *)e->flag + KR__SPIN_FLAG_OFFSET(slot));
    CUdeviceptr flag_dev = e->flag_dev + KR__SPIN_FLAG_OFFSET(slot);
    atomic_store(flag, 0);
    uint64_t timeout = SPIN_TIMEOUT_NS;
    void *spin_params[] = {&flag_dev, &timeout};
    CUresult r = cu->cuLaunchKernel(e->f_spin_until, 1, 1, 1, 1, 1, 1, 0, e->stream, spin_params, NULL);
    if (r != CUDA_SUCCESS) {
        atomic_store(flag, 1);
        return kr__cuda_fail(b->ctx, r, "launching the spin kernel");
    }
    /* from here on the flag is released whatever fails: a spin left
     * waiting would hold the stream for SPIN_TIMEOUT_NS */
    r = cu->cuEventRecord(b->ev_start[slot], e->stream);
    int rc = r == CUDA_SUCCESS ? KR_OK : kr__cuda_fail(b->ctx, r, "cuEventRecord (start)");
    if (rc == KR_OK && (rc = enqueue_side(b, s, k)) != KR_OK && s == &b->s[SIDE_CANDIDATE])
        b->candidate_failed = 1;
    if (rc == KR_OK && (r = cu->cuEventRecord(b->ev_stop[slot], e->stream)) != CUDA_SUCCESS)
        rc = kr__cuda_fail(b->ctx, r, "cuEventRecord (stop)");
    long long cycles = PROBE_CYCLES;
    CUdeviceptr ns_out = e->flag_dev + KR__PROBE_NS_OFFSET(slot);
    CUdeviceptr cyc_out = e->flag_dev + KR__PROBE_CYCLES_OFFSET(slot);
    void *probe_params[] = {&cycles, &ns_out, &cyc_out};
    if (rc == KR_OK && (r = cu->cuLaunchKernel(e->f_spin_cycles, 1, 1, 1, 1, 1, 1, 0, e->stream,
                                               probe_params, NULL)) != CUDA_SUCCESS)
        rc = kr__cuda_fail(b->ctx, r, "launching the clock probe");
    if (rc == KR_OK && (r = cu->cuEventRecord(b->ev_done[slot], e->stream)) != CUDA_SUCCESS)
        rc = kr__cuda_fail(b->ctx, r, "cuEventRecord (done)");
    atomic_store(flag, 1); /* release: the queued work runs back to back */
    return rc;
}

/* Reads the sample's time (events) and SM clock (probe) after it ran. */
static int read_sample(bstate *b, bside *s, int slot, double *us, double *mhz)
{
    const kr__cuda_api *cu = kr__cuda();
    /* a callback may have put work on other streams: let it finish inside
     * this sample, where CUPTI attributes it (trusted, in-process code) */
    if (s->callback)
        KR__CU(b->ctx, cu->cuCtxSynchronize(), "cuCtxSynchronize after the baseline callback");
    float ms = 0;
    KR__CU(b->ctx, cu->cuEventElapsedTime(&ms, b->ev_start[slot], b->ev_stop[slot]), "cuEventElapsedTime");
    volatile uint64_t *probe = (volatile uint64_t *)((char *)b->e->flag + KR__PROBE_NS_OFFSET(slot));
    *mhz = probe[0] ? (double)probe[1] / (double)probe[0] * 1e3 : 0;
    *us = ms * 1e3;
    /* profile mode: the sample's own event pair, timed or not */
    kr__gpu_timer_add(&b->e->gpu, s == &b->s[SIDE_CANDIDATE] ? KR__GPU_CANDIDATE : KR__GPU_BASELINE,
                      ms * 1e-3);
    return KR_OK;
}

/* A sample queued and not yet read (sample_queue, sample_read). */
typedef struct pending {
    int which, timed, check, slot;
    size_t k;      /* its set */
    int ahead_rc;  /* the next set's values, queued behind it */
    bcheck c;
} pending;

/* One call of a side, on the set made ready for it, queued with what
 * follows it (timed: the sample counts; check: the candidate's call is
 * checked, bench_check.c). Its set's values were queued behind the
 * previous call (made here otherwise), and another set's are queued behind
 * this one: the wait (sample_read) is for this call only, so the GPU makes
 * them while the host reads this sample, checks it and queues the next
 * call (one sample's host round trip, ~70 us, was GPU idle, a candidate's
 * ~30 samples a tenth of its GPU worker's time). The values are made
 * after the call before: no call sees the next one's inputs. avoid: a set
 * the next values may not go to (a sample in flight's: its check reads it
 * after this call; SIZE_MAX none). On failure nothing is left to read. */
static int sample_queue(bstate *b, int which, int timed, int check, int slot, size_t avoid, pending *q)
{
    bside *s = &b->s[which];
    memset(q, 0, sizeof *q);
    q->which = which;
    q->timed = timed;
    q->check = check;
    q->slot = slot;
    size_t k = q->k = b->next;
    int rc = b->ready[k] ? KR_OK : prepare_set(b, k);
    b->ready[k] = 0;
    b->next = kr__bench_next_set_avoiding(k, avoid, b->sets, kr__random64());
    /* nothing of a check is queued before the call (its inputs' expected
     * hash comes from the reference's regenerated copy, after): a kernel
     * reading %globaltimer finds no gap that tells a checked call */
    if (rc == KR_OK && check)
        rc = kr__bench_check_begin(b, k, &q->c);
    if (rc == KR_OK && !s->callback)
        rc = kr__run_reset(b->ctx, &s->run[k]);
    /* a launch refused after others were queued: one of those that hangs
     * is this sample's hang, not teardown's (a free that would block on it) */
    if (rc == KR_OK && (rc = timed_enqueue(b, s, k, slot)) != KR_OK && b->candidate_failed)
        rc = kr__engine_settle_refused(b->ctx, rc, 10 + b->o.max_time_s,
                                       "a timed sample's queued launches");
    /* (the call's own error, a fault surfacing at the first sync, comes
     * before the next set's: sample_read) */
    if (rc == KR_OK)
        q->ahead_rc = b->ahead && b->next != k ? prepare_set(b, b->next) : KR_OK;
    if (rc != KR_OK)
        kr__bench_check_free(&q->c);
    return rc;
}

/* Waits for a queued sample, reads it, and checks it where it was drawn
 * for a check; keep 0: only waits (another sample's failure ends the
 * benchmark; a poisoned context is not waited on). */
static int sample_read(bstate *b, pending *q, int keep)
{
    bside *s = &b->s[q->which];
    int rc = keep || !b->ctx->poisoned
                 ? kr__engine_wait_event(b->ctx, b->ev_done[q->slot], 10 + b->o.max_time_s, "a timed sample")
                 : KR_OK;
    if (!keep) {
        kr__bench_check_free(&q->c);
        return rc;
    }
    if (rc == KR_OK)
        rc = q->ahead_rc;
    double us = 0, mhz = 0;
    if (rc == KR_OK)
        rc = read_sample(b, s, q->slot, &us, &mhz);
    if (rc == KR_OK && q->timed && (rc = record_order(b, q->which)) == KR_OK)
        rc = push_sample(b, s, us, mhz);
    if (rc == KR_OK && q->check)
        rc = kr__bench_check_end(b, q->k, &q->c);
    if (q->which == SIDE_CANDIDATE)
        b->last_checked = q->check;
    kr__bench_check_free(&q->c);
    return rc;
}

static int one_sample(bstate *b, int which, int timed, int check)
{
    pending q;
    int rc = sample_queue(b, which, timed, check, 0, SIZE_MAX, &q);
    return rc == KR_OK ? sample_read(b, &q, 1) : rc;
}

/* A round's two samples (sides w[0], w[1], checks check[]), in order. Both
 * are queued before the first is read, so the host's reading of the first
 * and its queueing of the second overlap the GPU's work (a round trip a
 * round less). Whether a round is paired never depends on its checks (a
 * call that could see the host queue the next sample would otherwise know
 * it is not checked): the second's next values go to a set other than the
 * first's, which the first's check reads after the second's call (so at
 * least three sets). Not paired: a side that is the caller's callback
 * (read after a context synchronize), values not made ahead, co-running
 * kernels, or KR_BENCH_PAIR=0. Each call's time is its own event pair and
 * probe (slots 0 and 1), and the samples are recorded in the order they
 * ran (the CUPTI records' order). */
static int round_samples(bstate *b, const int w[2], const int check[2], int n)
{
    int paired = n == 2 && b->pair && b->ahead && !b->occupy && b->sets >= 3 &&
                 !b->s[w[0]].callback && !b->s[w[1]].callback;
    if (!paired) {
        int rc = KR_OK;
        for (int i = 0; i < n && rc == KR_OK; i++)
            rc = one_sample(b, w[i], 1, check[i]);
        return rc;
    }
    pending q[2];
    int rc = sample_queue(b, w[0], 1, check[0], 0, SIZE_MAX, &q[0]);
    if (rc != KR_OK)
        return rc;
    int second = sample_queue(b, w[1], 1, check[1], 1, q[0].k, &q[1]);
    rc = sample_read(b, &q[0], 1);
    if (second != KR_OK)
        return rc != KR_OK ? rc : second;
    int rc1 = sample_read(b, &q[1], rc == KR_OK);
    return rc != KR_OK ? rc : rc1;
}

/* Whether a timed candidate call is checked: drawn at random per call. */
static int draw(const bstate *b, int which)
{
    return which == SIDE_CANDIDATE && b->has_ref && !(b->o.flags & KR_BENCH_NO_CHECK) &&
           kr__bench_draw_check(b);
}

static double noise_of(const bside *s)
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

/* Whether the side's median is known well enough: its spread under the
 * target, or, for kernels of a few microseconds whose call-to-call jitter
 * never falls under it (a 11 us copy: 2.2 % on the H200, so every such
 * benchmark ran to max_samples), the median's relative standard error
 * (1.2533 x spread / sqrt(n) for near-normal samples) under a quarter of
 * the target: more samples shrink that, they never shrink the spread. */
static int precise_enough(const bstate *b, const bside *s)
{
    double noise = noise_of(s);
    return noise <= b->o.target_noise ||
           1.2533 * noise / sqrt((double)s->n) <= 0.25 * b->o.target_noise;
}

static int side_done(const bstate *b, int which)
{
    const bside *s = &b->s[which];
    if (!s->active || s->n >= b->o.max_samples)
        return 1;
    /* the memo's samples stand in for the rest once enough fresh ones agree */
    if (which == SIDE_BASELINE && b->memo_state == MEMO_AGREED)
        return 1;
    return s->n >= b->o.min_samples && s->gpu_seconds >= b->o.min_time_s && precise_enough(b, s);
}

/* Once the baseline has its fresh samples (three, one where the memo is
 * moments old): the memo counts from here if they agree with it. A few
 * samples of a microsecond kernel can miss by chance, so a disagreement is
 * looked at again with every fresh sample up to the side's own
 * min_samples; disagreeing still, the conditions the memo was taken in are
 * gone: it is forgotten and the baseline timed in full. */
static void check_memo(bstate *b)
{
    const bside *s = &b->s[SIDE_BASELINE];
    if (b->memo_state != MEMO_PENDING || s->n < b->memo_fresh)
        return;
    if (kr__memo_agrees(&b->memo, s->event_us, s->n)) {
        b->memo_state = MEMO_AGREED;
        b->memo_agreed_at = s->n;
    }
    else if (s->n >= b->o.min_samples)
        kr__bench_memo_disagree(b);
}

/* (its samples do not join either: they may be what disturbed) */
void kr__bench_memo_disagree(bstate *b)
{
    b->memo_state = MEMO_DISAGREED;
    if (b->e->memo)
        kr__memo_forget(b->e->memo, b->memo_key);
}

/* The memo's samples for this benchmark, if any (under the trace lock,
 * which serialises benchmarks in the process). */
static void take_memo(bstate *b)
{
    if (!b->memo_key || !b->s[SIDE_BASELINE].active || !b->e->memo)
        return;
    /* times from events cannot stand in for CUPTI's (a few us apart): a
     * memo of event times counts only where this benchmark uses events
     * (the memo's event times serve a CUPTI memo's falling back) */
    int cupti_expected = !(b->o.flags & KR_BENCH_EVENTS_ONLY) && kr__trace_active();
    if (kr__memo_get(b->e->memo, b->memo_key, kr__now(), &b->memo) &&
        b->memo.n_event >= b->o.min_samples && (b->memo.cupti || !cupti_expected)) {
        b->memo_state = MEMO_PENDING;
        b->memo_fresh = kr__memo_fresh_needed(&b->memo);
    }
}

static double median_of(const double *v, size_t n)
{
    double *c = malloc(n * sizeof *c);
    if (!c || !n) {
        free(c);
        return 0;
    }
    memcpy(c, v, n * sizeof *c);
    for (size_t i = 1; i < n; i++) /* a handful of samples: insertion sort */
        for (size_t j = i; j > 0 && c[j - 1] > c[j]; j--) {
            double t = c[j];
            c[j] = c[j - 1];
            c[j - 1] = t;
        }
    double m = n % 2 ? c[n / 2] : 0.5 * (c[n / 2 - 1] + c[n / 2]);
    free(c);
    return m;
}

/* The time budget: a candidate far slower than the baseline (or one call
 * over the ceiling) is not measured to the end. */
static int too_slow(const bstate *b)
{
    const bside *c = &b->s[SIDE_CANDIDATE], *base = &b->s[SIDE_BASELINE];
    if (c->n && c->event_us[c->n - 1] > b->o.max_call_s * 1e6)
        return 1;
    if (!c->n || !base->active || !base->n)
        return 0;
    return median_of(c->event_us, c->n) > b->o.max_slowdown * median_of(base->event_us, base->n);
}

int kr__bench_measure(bstate *b, double *wall)
{
    double t0 = kr__now();
    int rc = KR_OK;
    take_memo(b);
    b->floor_checks = kr__bench_pick_floor(b);
    /* warm-up: one untimed run of each side (module load, caches); not the
     * baseline's where a memo of it stands: it ran in this context before,
     * its module is loaded, and the memo's fresh samples judge it */
    for (int w = 0; w < 2 && rc == KR_OK; w++)
        if (b->s[w].active && !(w == SIDE_BASELINE && b->memo_state == MEMO_PENDING))
            rc = one_sample(b, w, 0, 0);
    kr__trace_discard();
    for (size_t round = 0; rc == KR_OK; round++) {
        /* both sides draw their sets from the same ones (no side is tied
         * to buffers that happen to sit better in memory), and take turns
         * going first in a round (no side always follows the other) */
        /* which sides sample this round: each side's rule reads its own
         * samples and the memo's state (checked after the round), so both
         * are known before either sample runs */
        int w[2], check[2], n = 0;
        for (size_t i = 0; i < 2; i++) {
            int side = (int)((round + i) & 1);
            /* rounds 0 and 9 of every 16: one even, one odd, so a done
             * side's samples still go first half of the time; a baseline
             * the memo stands for is done with its fresh samples (each a
             * naive reference's full run: 2-3 ms a call on the bundled
             * large cases, the most of what a memo leaves) */
            int memo_done = side == SIDE_BASELINE && b->memo_state == MEMO_AGREED;
            if (b->s[side].active && b->s[side].n < b->o.max_samples &&
                (!side_done(b, side) || (!memo_done && (round % (2 * DONE_PERIOD) == 0 ||
                                                        round % (2 * DONE_PERIOD) == DONE_PERIOD + 1)))) {
                w[n] = side;
                check[n++] = draw(b, side);
            }
        }
        rc = round_samples(b, w, check, n);
        check_memo(b);
        int done = side_done(b, 0) && side_done(b, 1);
        if (rc == KR_OK && too_slow(b)) {
            b->slow = 1;
            break;
        }
        if (done || (kr__now() - t0 > b->o.max_time_s && b->s[0].n >= 3))
            break;
    }
    /* the rest of the floor: a checked call after the last timed one
     * (unless it was checked), and more where the timed calls stopped
     * before the early draws; calls of the same kind, untimed (a slow
     * candidate, verified already, is not held any longer) */
    while (rc == KR_OK && !b->slow && b->has_ref && !(b->o.flags & KR_BENCH_NO_CHECK) &&
           (b->checks < KR__BENCH_MIN_CHECKS || !b->last_checked))
        rc = one_sample(b, SIDE_CANDIDATE, 0, 1);
    /* the last sample's values for a next one: nothing may still run when
     * the trace is read and the sets are freed */
    if (rc == KR_OK)
        rc = kr__engine_wait(b->ctx, 10, "the benchmark's last queued inputs");
    *wall = kr__now() - t0;
    return rc;
}
