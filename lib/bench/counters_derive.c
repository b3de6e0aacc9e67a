/* From raw counters to what the report says: the CUPTI metric names, the
 * occupancy calculation and its limiter, the plan's totals, the report
 * fields and the per-kernel section. Pure arithmetic: unit-tested on
 * hand-built kernels (tests/unit/test_counters.c). */
#include "bench/counters.h"
#include "report/report_impl.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* Nsight Compute's names (the same metrics ncu reports under them). */
const char *const kr__counter_metrics[KR__CM_N] = {
    [KR__CM_DURATION_NS] = "gpu__time_duration.sum",
    [KR__CM_DRAM_READ] = "dram__bytes_read.sum",
    [KR__CM_DRAM_WRITE] = "dram__bytes_write.sum",
    [KR__CM_DRAM_PCT] = "dram__throughput.avg.pct_of_peak_sustained_elapsed",
    [KR__CM_SM_PCT] = "sm__throughput.avg.pct_of_peak_sustained_elapsed",
    [KR__CM_TENSOR_PCT] = "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed",
    [KR__CM_WARPS_PCT] = "sm__warps_active.avg.pct_of_peak_sustained_active",
    [KR__CM_L1_HIT_PCT] = "l1tex__t_sector_hit_rate.pct",
    [KR__CM_L2_HIT_PCT] = "lts__t_sector_hit_rate.pct",
    [KR__CM_BANK_LD] = "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",
    [KR__CM_BANK_ST] = "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum",
    [KR__CM_SHARED_WAVEFRONTS] = "l1tex__data_pipe_lsu_wavefronts_mem_shared.sum",
    [KR__CM_THREADS_PER_INST] = "smsp__thread_inst_executed_per_inst_executed.ratio",
    [KR__CM_BRANCHES] = "smsp__sass_branch_targets.sum",
    [KR__CM_DIVERGENT] = "smsp__sass_branch_targets_threads_divergent.sum",
    [KR__CM_LOCAL_LD] = "l1tex__t_bytes_pipe_lsu_mem_local_op_ld.sum",
    [KR__CM_LOCAL_ST] = "l1tex__t_bytes_pipe_lsu_mem_local_op_st.sum",
    [KR__CM_INST] = "smsp__inst_executed.sum",
};

const char *kr__limiter_name(int limiter)
{
    switch (limiter) {
    case KR__LIMIT_WARPS:
        return "threads";
    case KR__LIMIT_REGISTERS:
        return "registers";
    case KR__LIMIT_SHARED:
        return "shared_memory";
    case KR__LIMIT_BLOCKS:
        return "blocks";
    default:
        return "none";
    }
}

#define REG_UNIT 256       /* registers are allocated per warp in units of this many */
#define WARP_GRANULE 4     /* in whole warps per quarter of the SM (its 4 schedulers) */
#define SMEM_UNIT 128      /* shared memory is allocated per block in units of this */

static int64_t round_up(int64_t x, int64_t unit)
{
    return (x + unit - 1) / unit * unit;
}

int kr__occupancy_of(const kr__occupancy_in *in, kr__occupancy *out)
{
    memset(out, 0, sizeof *out);
    if (in->threads <= 0 || in->warp_size <= 0 || in->max_threads_sm < in->warp_size ||
        in->max_blocks_sm <= 0 || in->regs < 0 || in->smem < 0)
        return -1;
    int warps = (in->threads + in->warp_size - 1) / in->warp_size;
    int sm_warps = in->max_threads_sm / in->warp_size;
    out->by_warps = sm_warps / warps;
    out->by_blocks = in->max_blocks_sm;
    out->by_registers = in->max_blocks_sm;
    if (in->regs > 0) {
        int64_t per_warp = round_up((int64_t)in->regs * in->warp_size, REG_UNIT);
        int64_t reg_warps = in->regs_sm / per_warp / WARP_GRANULE * WARP_GRANULE;
        out->by_registers = (int)(reg_warps / warps);
    }
    out->by_shared = in->max_blocks_sm;
    if (in->smem > 0) {
        int64_t per_block = round_up(in->smem, SMEM_UNIT) + in->smem_reserved;
        out->by_shared = (int)(in->smem_sm / per_block);
    }
    /* the limiter is a resource that allows fewer blocks than the SM's
     * block cap; ties name the one a kernel author changes most easily */
    const struct {
        int blocks, limiter;
    } order[] = {{out->by_registers, KR__LIMIT_REGISTERS}, {out->by_shared, KR__LIMIT_SHARED},
                 {out->by_warps, KR__LIMIT_WARPS}};
    out->blocks = out->by_blocks;
    out->limiter = KR__LIMIT_BLOCKS;
    for (size_t i = 0; i < sizeof order / sizeof order[0]; i++)
        if (order[i].blocks < out->blocks) {
            out->blocks = order[i].blocks;
            out->limiter = order[i].limiter;
        }
    /* equal counts: the earlier resource in the order is named */
    for (size_t i = 0; i < sizeof order / sizeof order[0]; i++)
        if (order[i].blocks == out->blocks && out->blocks < out->by_blocks) {
            out->limiter = order[i].limiter;
            break;
        }
    out->occupancy = (double)out->blocks * warps / sm_warps;
    if (out->occupancy > 1)
        out->occupancy = 1;
    if (out->occupancy >= 1)
        out->limiter = KR__LIMIT_NONE; /* nothing holds it back */
    return 0;
}

/* ---- the plan's totals ---- */

typedef struct {
    double sum, weight;
} wmean;

static void wadd(wmean *m, double x, double w)
{
    if (isnan(x) || !(w > 0))
        return;
    m->sum += x * w;
    m->weight += w;
}

static double wget(const wmean *m)
{
    return m->weight > 0 ? m->sum / m->weight : NAN;
}

static void sadd(double *total, double x)
{
    if (isnan(x))
        return;
    *total = isnan(*total) ? x : *total + x;
}

void kr__counters_summarize(const kr__kernel_counters *k, size_t n, kr__counters_summary *s)
{
    double nan = NAN;
    s->duration_s = s->dram_bytes = s->dram_read = s->dram_write = s->spill_bytes = nan;
    s->bank_conflicts = s->instructions = nan;
    s->slowest = 0;
    wmean dram = {0, 0}, sm = {0, 0}, tensor = {0, 0}, occ = {0, 0}, theo = {0, 0}, l1 = {0, 0},
          l2 = {0, 0}, eff = {0, 0};
    double wavefronts = nan, branches = nan, divergent = nan, slowest = -1;
    for (size_t i = 0; i < n; i++) {
        const double *v = k[i].v;
        /* rates are weighted by each kernel's time (1 each when unknown) */
        double w = isnan(v[KR__CM_DURATION_NS]) ? 1 : v[KR__CM_DURATION_NS];
        if (w > slowest) {
            slowest = w;
            s->slowest = i;
        }
        sadd(&s->duration_s, v[KR__CM_DURATION_NS] * 1e-9);
        sadd(&s->dram_read, v[KR__CM_DRAM_READ]);
        sadd(&s->dram_write, v[KR__CM_DRAM_WRITE]);
        sadd(&s->dram_bytes, v[KR__CM_DRAM_READ]);
        sadd(&s->dram_bytes, v[KR__CM_DRAM_WRITE]);
        wadd(&dram, v[KR__CM_DRAM_PCT] / 100, w);
        wadd(&sm, v[KR__CM_SM_PCT] / 100, w);
        wadd(&tensor, v[KR__CM_TENSOR_PCT] / 100, w);
        wadd(&occ, v[KR__CM_WARPS_PCT] / 100, w);
        if (k[i].occ.blocks > 0)
            wadd(&theo, k[i].occ.occupancy, w);
        wadd(&l1, v[KR__CM_L1_HIT_PCT] / 100, w);
        wadd(&l2, v[KR__CM_L2_HIT_PCT] / 100, w);
        /* efficiency per instruction: a kernel's weight is its instructions */
        wadd(&eff, v[KR__CM_THREADS_PER_INST] / 32, isnan(v[KR__CM_INST]) ? w : v[KR__CM_INST]);
        sadd(&s->bank_conflicts, v[KR__CM_BANK_LD]);
        sadd(&s->bank_conflicts, v[KR__CM_BANK_ST]);
        sadd(&wavefronts, v[KR__CM_SHARED_WAVEFRONTS]);
        sadd(&branches, v[KR__CM_BRANCHES]);
        sadd(&divergent, v[KR__CM_DIVERGENT]);
        sadd(&s->spill_bytes, v[KR__CM_LOCAL_LD]);
        sadd(&s->spill_bytes, v[KR__CM_LOCAL_ST]);
        sadd(&s->instructions, v[KR__CM_INST]);
    }
    s->dram_gbps = s->duration_s > 0 ? s->dram_bytes / s->duration_s / 1e9 : nan;
    s->dram_fraction = wget(&dram);
    s->sm_fraction = wget(&sm);
    s->tensor_fraction = wget(&tensor);
    s->occupancy = wget(&occ);
    s->occupancy_theoretical = wget(&theo);
    s->l1_hit = wget(&l1);
    s->l2_hit = wget(&l2);
    s->warp_efficiency = wget(&eff);
    /* the share of shared-memory wavefronts that conflicts added */
    s->bank_per_request = wavefronts > 0 ? s->bank_conflicts / wavefronts : nan;
    s->divergence = branches > 0 ? divergent / branches : nan;
}

/* ---- into the report ---- */

static void put(kr_report *r, const char *key, double v)
{
    if (!isnan(v))
        kr_report_set(r, key, v);
}

static void put_json(json_t *o, const char *key, double v)
{
    if (!isnan(v))
        json_object_set_new(o, key, json_real(v));
}

static json_t *kernel_json(const kr__kernel_counters *k)
{
    json_t *o = json_object();
    json_object_set_new(o, "name", json_string(k->name));
    json_object_set_new(o, "launch", json_integer((json_int_t)k->launch));
    json_object_set_new(o, "registers", json_integer(k->regs));
    json_object_set_new(o, "threads_per_block", json_integer(k->threads));
    json_object_set_new(o, "shared_bytes", json_integer((json_int_t)k->smem));
    json_object_set_new(o, "local_bytes_per_thread", json_integer((json_int_t)k->local_bytes));
    if (k->occ.blocks > 0) {
        json_object_set_new(o, "blocks_per_sm", json_integer(k->occ.blocks));
        json_object_set_new(o, "occupancy_theoretical", json_real(k->occ.occupancy));
        json_object_set_new(o, "occupancy_limiter", json_string(kr__limiter_name(k->occ.limiter)));
        json_t *by = json_object();
        json_object_set_new(by, "threads", json_integer(k->occ.by_warps));
        json_object_set_new(by, "registers", json_integer(k->occ.by_registers));
        json_object_set_new(by, "shared_memory", json_integer(k->occ.by_shared));
        json_object_set_new(by, "blocks", json_integer(k->occ.by_blocks));
        json_object_set_new(o, "blocks_per_sm_by", by);
    }
    json_t *raw = json_object();
    for (int m = 0; m < KR__CM_N; m++)
        put_json(raw, kr__counter_metrics[m], k->v[m]);
    json_object_set_new(o, "metrics", raw);
    return o;
}

void kr__counters_report(kr_report *r, const kr__kernel_counters *k, size_t n,
                         const kr__counters_summary *s)
{
    put(r, "counters_gpu_s", s->duration_s);
    put(r, "dram_bytes", s->dram_bytes);
    put(r, "dram_read_bytes", s->dram_read);
    put(r, "dram_write_bytes", s->dram_write);
    put(r, "dram_gbps", s->dram_gbps);
    put(r, "dram_peak_fraction", s->dram_fraction);
    put(r, "sm_busy_fraction", s->sm_fraction);
    put(r, "tensor_busy_fraction", s->tensor_fraction);
    put(r, "occupancy", s->occupancy);
    put(r, "occupancy_theoretical", s->occupancy_theoretical);
    put(r, "l1_hit_rate", s->l1_hit);
    put(r, "l2_hit_rate", s->l2_hit);
    put(r, "shared_bank_conflicts", s->bank_conflicts);
    put(r, "shared_conflict_fraction", s->bank_per_request);
    put(r, "warp_efficiency", s->warp_efficiency);
    put(r, "branch_divergence", s->divergence);
    put(r, "spill_bytes", s->spill_bytes);
    put(r, "instructions", s->instructions);
    if (n && k[s->slowest].occ.blocks > 0)
        kr_report_set_text(r, "occupancy_limiter", kr__limiter_name(k[s->slowest].occ.limiter));
    json_t *sec = kr__report_section(r, "counters");
    if (!sec)
        return;
    json_t *list = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(list, kernel_json(&k[i]));
    json_object_set_new(sec, "kernels", list);
}
