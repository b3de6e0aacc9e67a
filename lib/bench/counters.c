/* Collecting a plan's hardware counters (KR_BENCH_COUNTERS): after the
 * benchmark, one more run of the candidate's plan on fresh inputs of the
 * timing case, untimed, with CUPTI's range profiler replaying each kernel
 * as many passes as the metrics need (driver/profiler.c). Timed samples
 * never run under the profiler. The occupancy and its limiter come from the
 * kernels' attributes and the device's limits, so they are reported even
 * where counters are not allowed. */
#include "bench/counters.h"
#include "common/clock.h"
#include "common/random.h"
#include "driver/profiler.h"
#include "driver/trace.h"
#include "run/dbuf.h"
#include "run/engine.h"
#include "run/workspace.h"
#include "problem/problem_impl.h"
#include "report/report_impl.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Room for kernels the plan's kernels launch from the device. */
#define EXTRA_RANGES 16
/* Kernel replay runs each kernel once per pass. */
#define RUN_TIMEOUT_S 120.0

typedef struct cstate {
    kr_context *ctx;
    const kr_problem *p;
    const kr_program *prog;
    size_t c;
    kr__bound_plan bp;
    int bound;
    kr__run run;
    kr__tset set;
} cstate;

static int device_limits(kr_context *ctx, kr__occupancy_in *in)
{
    const kr__cuda_api *cu = kr__cuda();
    int v[6];
    const CUdevice_attribute attr[6] = {
        CU_DEVICE_ATTRIBUTE_WARP_SIZE, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR,
        CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR,
        CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR,
        CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR,
        CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK};
    for (int i = 0; i < 6; i++)
        KR__CU(ctx, cu->cuDeviceGetAttribute(&v[i], attr[i], ctx->dev), "cuDeviceGetAttribute");
    in->warp_size = v[0];
    in->max_threads_sm = v[1];
    in->max_blocks_sm = v[2];
    in->regs_sm = v[3];
    in->smem_sm = v[4];
    in->smem_reserved = v[5];
    return KR_OK;
}

/* The plan's launches as kernels: names, attributes, occupancy. */
static int describe_launches(cstate *s, kr__kernel_counters *k, size_t n)
{
    kr__occupancy_in dev;
    memset(&dev, 0, sizeof dev);
    int rc = device_limits(s->ctx, &dev);
    for (size_t l = 0; l < n && rc == KR_OK; l++) {
        const kr__ready_step *st = &s->run.ready.launches[l];
        size_t kernel = s->bp.launches[l].kernel;
        snprintf(k[l].name, sizeof k[l].name, "%s", kr_program_kernel_name(s->prog, kernel));
        k[l].launch = l;
        for (int m = 0; m < KR__CM_N; m++)
            k[l].v[m] = NAN;
        int64_t regs = kr_program_kernel_attr(s->prog, kernel, KR_KERNEL_REGISTERS);
        int64_t smem = kr_program_kernel_attr(s->prog, kernel, KR_KERNEL_SHARED_STATIC);
        int64_t local = kr_program_kernel_attr(s->prog, kernel, KR_KERNEL_LOCAL_BYTES);
        k[l].regs = regs > 0 ? (int)regs : 0;
        k[l].threads = (int)(st->dims.block[0] * st->dims.block[1] * st->dims.block[2]);
        k[l].smem = (smem > 0 ? smem : 0) + st->dims.smem;
        k[l].local_bytes = local > 0 ? local : 0;
        kr__occupancy_in in = dev;
        in.threads = k[l].threads;
        in.regs = k[l].regs;
        in.smem = k[l].smem;
        if (regs < 0 || kr__occupancy_of(&in, &k[l].occ) != 0)
            memset(&k[l].occ, 0, sizeof k[l].occ); /* unknown: left out */
    }
    return rc;
}

static int setup(cstate *s, const kr_plan *plan)
{
    int rc = kr__plan_bind(s->ctx, plan, s->p, s->prog, &s->bp);
    s->bound = 1;
    if (rc == KR_OK)
        rc = kr__tset_alloc(s->ctx, &s->set, s->p, s->c, KR__SET_ALL, "counters buffer set");
    if (rc == KR_OK)
        rc = kr__run_prepare(s->ctx, &s->run, &s->bp, s->c);
    if (rc != KR_OK)
        return rc;
    kr__run_bind(&s->run, &s->set, &s->set);
    uint64_t seed = kr_problem_case_seed(kr__random64(), s->c);
    rc = kr__tset_fill_inputs(s->ctx, &s->set, seed);
    if (rc == KR_OK)
        rc = kr__tset_fill_outputs(s->ctx, &s->set, seed, 0);
    if (rc == KR_OK)
        rc = kr__run_reset(s->ctx, &s->run);
    /* everything queued so far runs before the profiler starts: only the
     * plan's own kernels become ranges */
    if (rc == KR_OK)
        rc = kr__engine_wait(s->ctx, RUN_TIMEOUT_S, "preparing the counters run");
    return rc;
}

static void teardown(cstate *s)
{
    kr__run_free(s->ctx, &s->run);
    kr__tset_free(s->ctx, &s->set);
    if (s->bound)
        kr__plan_unbind(&s->bp);
}

static int profiled_work(void *user)
{
    cstate *s = user;
    size_t failed;
    int rc = kr__run_launch(s->ctx, &s->run, &failed);
    if (rc == KR_OK)
        rc = kr__engine_wait(s->ctx, RUN_TIMEOUT_S, "the counters run");
    return rc;
}

/* Ranges to kernels: in launch order; kernels beyond the plan's launches
 * were launched from the device. */
static size_t assign(kr__kernel_counters *k, size_t launches, const double *values, size_t ranges)
{
    for (size_t i = 0; i < ranges; i++) {
        if (i >= launches) {
            memset(&k[i], 0, sizeof k[i]);
            snprintf(k[i].name, sizeof k[i].name, "device-launched kernel %zu", i - launches + 1);
            k[i].launch = launches - 1;
        }
        memcpy(k[i].v, &values[i * KR__CM_N], sizeof k[i].v);
    }
    return ranges > launches ? ranges : launches;
}

/* The bytes the problem says a kernel must move (its "bytes"), for the
 * bandwidth term's correction; nothing when the problem does not say. */
static void problem_bytes(kr_report *r, const kr_problem *p, size_t c)
{
    char why[256];
    int64_t bytes = -1;
    if (p->bytes_expr && kr__expr_eval(p->bytes_expr, p->cases[c].dims, &bytes, why, sizeof why) ==
                             KR_OK && bytes > 0)
        kr_report_set(r, "problem_bytes", (double)bytes);
}

static void finish(kr_report *r, const kr__kernel_counters *k, size_t n, const char *why,
                   const kr__profiler_out *po, double t0)
{
    kr__counters_summary sum;
    kr__counters_summarize(k, n, &sum);
    kr__counters_report(r, k, n, &sum);
    kr_report_set(r, "counters_available", why ? 0 : 1);
    json_t *sec = kr__report_section(r, "counters");
    if (sec) {
        json_object_set_new(sec, "available", json_boolean(!why));
        if (why)
            json_object_set_new(sec, "why", json_string(why));
        else
            json_object_set_new(sec, "passes", json_integer((json_int_t)po->passes));
        json_object_set_new(sec, "no_permission", json_boolean(po->no_permission));
    }
    if (why)
        kr_report_set_text(r, "counters_why", why);
    else
        kr_report_set(r, "counters_passes", (double)po->passes);
    char text[2000];
    kr__counters_feedback(text, sizeof text, k, n, &sum);
    if (text[0])
        kr_report_set_text(r, "counters_feedback", text);
    kr_report_set(r, "counters_wall_s", kr__now() - t0);
}

int kr__counters_collect(kr_report *r, kr_context *ctx, const kr_problem *p,
                         const kr_program *prog, const kr_plan *plan, size_t case_index)
{
    double t0 = kr__now();
    kr__engine *e;
    int rc = kr__engine_get(ctx, &e);
    if (rc != KR_OK)
        return rc;
    /* the replays save and restore device memory: no spare buffers to carry */
    kr__dbuf_release_spares(ctx);
    cstate s;
    memset(&s, 0, sizeof s);
    s.ctx = ctx;
    s.p = p;
    s.prog = prog;
    s.c = case_index;
    rc = setup(&s, plan);
    size_t launches = s.run.ready.num_launches, max_ranges = launches + EXTRA_RANGES;
    kr__kernel_counters *k = rc == KR_OK ? calloc(max_ranges, sizeof *k) : NULL;
    double *values = k ? calloc(max_ranges * KR__CM_N, sizeof *values) : NULL;
    if (rc == KR_OK && !values)
        rc = kr__fail(ctx, KR_ENOMEM, "out of memory");
    if (rc == KR_OK)
        rc = describe_launches(&s, k, launches);
    if (rc == KR_OK) {
        char why[1024] = "";
        kr__profiler_out po;
        /* the replays' kernel records must not reach another measurement */
        kr__trace_lock();
        int got = kr__profiler_run(ctx->cuda_home, ctx->cu, ctx->device_ordinal,
                                   kr__counter_metrics, KR__CM_N, max_ranges, profiled_work, &s,
                                   values, &po, why, sizeof why);
        kr__trace_discard();
        kr__trace_unlock();
        if (po.work_rc != KR_OK) {
            rc = po.work_rc; /* the device failed under the profiler: the caller judges */
        } else {
            size_t n = got == 0 ? assign(k, launches, values, po.num_ranges) : launches;
            problem_bytes(r, p, case_index);
            finish(r, k, n, got == 0 ? NULL : why, &po, t0);
        }
    }
    free(values);
    free(k);
    teardown(&s);
    return rc;
}
