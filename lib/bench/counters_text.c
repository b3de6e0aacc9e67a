/* The counters as feedback a model can act on: per kernel (the ones with
 * the most time, at most three), what bounds it with the numbers behind
 * the call, the occupancy and what limits it in the kernel's own terms
 * (registers per thread, shared bytes per block, threads per block), then
 * the problems the counters show. Thresholds are where Nsight Compute's
 * rules start to comment; below them a kernel is not told anything. */
#include "bench/counters.h"
#include "common/strbuf.h"
#include "report/report_impl.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BOUND_AT 0.6          /* a unit this busy bounds the kernel */
#define BANK_CONFLICTS_AT 0.1 /* of shared wavefronts */
#define DIVERGENCE_AT 0.1     /* of branches */
#define EFFICIENCY_BELOW 0.8  /* active threads per warp instruction, of 32 */
#define L2_HIT_BELOW 0.5
#define MAX_KERNELS 3

static void rate(char *out, size_t size, double bytes_per_s)
{
    if (bytes_per_s >= 1e12)
        snprintf(out, size, "%.1f TB/s", bytes_per_s / 1e12);
    else
        snprintf(out, size, "%.0f GB/s", bytes_per_s / 1e9);
}

static void amount(char *out, size_t size, double bytes)
{
    if (bytes >= 1e9)
        snprintf(out, size, "%.1f GB", bytes / 1e9);
    else if (bytes >= 1e6)
        snprintf(out, size, "%.1f MB", bytes / 1e6);
    else if (bytes >= 1e3)
        snprintf(out, size, "%.1f kB", bytes / 1e3);
    else
        snprintf(out, size, "%.0f bytes", bytes);
}

/* memory-, compute- or latency-bound, with the numbers; nothing when the
 * counters are not there. */
static void bound(kr__buf *b, const kr__kernel_counters *k)
{
    const double *v = k->v;
    double dram = v[KR__CM_DRAM_PCT] / 100, sm = v[KR__CM_SM_PCT] / 100;
    double tensor = v[KR__CM_TENSOR_PCT] / 100;
    double bytes = v[KR__CM_DRAM_READ] + v[KR__CM_DRAM_WRITE], ns = v[KR__CM_DURATION_NS];
    if (!isnan(dram) && dram >= BOUND_AT && (isnan(sm) || dram >= sm)) {
        char bw[32] = "";
        if (bytes > 0 && ns > 0) {
            rate(bw, sizeof bw, bytes / (ns * 1e-9));
            kr__buf_printf(b, "memory-bound: %s, %.0f %% of DRAM peak", bw, 100 * dram);
        } else {
            kr__buf_printf(b, "memory-bound: %.0f %% of DRAM peak", 100 * dram);
        }
        double l2 = v[KR__CM_L2_HIT_PCT] / 100;
        if (!isnan(l2) && l2 < L2_HIT_BELOW)
            kr__buf_printf(b, " (L2 hit rate %.0f %%: data is fetched again from DRAM)", 100 * l2);
    } else if ((!isnan(sm) && sm >= BOUND_AT) || (!isnan(tensor) && tensor >= BOUND_AT)) {
        kr__buf_printf(b, "compute-bound: SM %.0f %% busy", 100 * (isnan(sm) ? 0 : sm));
        if (!isnan(tensor))
            kr__buf_printf(b, ", tensor pipes %.0f %% busy", 100 * tensor);
    } else if (!isnan(dram) && !isnan(sm)) {
        kr__buf_printf(b, "latency-bound: DRAM %.0f %% and SM %.0f %% of peak, neither saturated "
                       "(more independent work per SM or fewer dependent steps)", 100 * dram, 100 * sm);
        if (!isnan(tensor) && tensor > 0.05)
            kr__buf_printf(b, ", tensor pipes %.0f %% busy", 100 * tensor);
    }
}

static void occupancy(kr__buf *b, const kr__kernel_counters *k)
{
    double achieved = k->v[KR__CM_WARPS_PCT] / 100;
    const char *sep = b->len ? "; " : "";
    if (k->occ.blocks <= 0) {
        if (!isnan(achieved))
            kr__buf_printf(b, "%sachieved occupancy %.0f %%", sep, 100 * achieved);
        return;
    }
    if (k->occ.limiter == KR__LIMIT_NONE) {
        if (!isnan(achieved) && achieved < 0.5)
            kr__buf_printf(b, "%sachieved occupancy %.0f %% of a possible 100 %% (too few "
                           "blocks, or warps waiting at barriers)", sep, 100 * achieved);
        return;
    }
    kr__buf_printf(b, "%soccupancy %.0f %% limited by ", sep, 100 * k->occ.occupancy);
    switch (k->occ.limiter) {
    case KR__LIMIT_REGISTERS:
        kr__buf_printf(b, "%d registers/thread", k->regs);
        break;
    case KR__LIMIT_SHARED:
        kr__buf_printf(b, "%lld bytes of shared memory/block", (long long)k->smem);
        break;
    case KR__LIMIT_WARPS:
        kr__buf_printf(b, "%d threads/block", k->threads);
        break;
    default:
        kr__buf_printf(b, "the blocks-per-SM limit (%d blocks of %d threads)", k->occ.blocks,
                       k->threads);
    }
    if (!isnan(achieved))
        kr__buf_printf(b, " (achieved %.0f %%)", 100 * achieved);
}

static void problems(kr__buf *b, const kr__kernel_counters *k)
{
    const double *v = k->v;
    double conflicts = v[KR__CM_BANK_LD] + v[KR__CM_BANK_ST];
    double wavefronts = v[KR__CM_SHARED_WAVEFRONTS];
    if (wavefronts > 0 && conflicts / wavefronts >= BANK_CONFLICTS_AT)
        kr__buf_printf(b, "; %.0f %% of shared-memory wavefronts are bank conflicts (pad or "
                       "swizzle the shared arrays)", 100 * conflicts / wavefronts);
    if (v[KR__CM_BRANCHES] > 0 && v[KR__CM_DIVERGENT] / v[KR__CM_BRANCHES] >= DIVERGENCE_AT)
        kr__buf_printf(b, "; %.0f %% of branches diverge within a warp",
                       100 * v[KR__CM_DIVERGENT] / v[KR__CM_BRANCHES]);
    double eff = v[KR__CM_THREADS_PER_INST] / 32;
    if (!isnan(eff) && eff < EFFICIENCY_BELOW)
        kr__buf_printf(b, "; warps run %.0f %% of their threads on average", 100 * eff);
    double local = v[KR__CM_LOCAL_LD] + v[KR__CM_LOCAL_ST];
    if (local > 0 || k->local_bytes > 0) {
        char amt[32] = "";
        if (local > 0) {
            amount(amt, sizeof amt, local);
            kr__buf_printf(b, "; %s of local-memory traffic", amt);
        } else {
            kr__buf_printf(b, "; local memory in use");
        }
        if (k->local_bytes > 0)
            kr__buf_printf(b, " (%lld bytes/thread of spills or stack arrays)",
                           (long long)k->local_bytes);
    }
}

static int by_time_desc(const void *a, const void *b)
{
    const kr__kernel_counters *x = *(const kr__kernel_counters *const *)a;
    const kr__kernel_counters *y = *(const kr__kernel_counters *const *)b;
    double tx = isnan(x->v[KR__CM_DURATION_NS]) ? 0 : x->v[KR__CM_DURATION_NS];
    double ty = isnan(y->v[KR__CM_DURATION_NS]) ? 0 : y->v[KR__CM_DURATION_NS];
    return (tx < ty) - (tx > ty);
}

void kr__counters_feedback(char *out, size_t size, const kr__kernel_counters *k, size_t n,
                           const kr__counters_summary *s)
{
    if (size)
        out[0] = 0;
    if (!n || !size)
        return;
    const kr__kernel_counters **order = malloc(n * sizeof *order);
    if (!order)
        return;
    for (size_t i = 0; i < n; i++)
        order[i] = &k[i];
    qsort(order, n, sizeof *order, by_time_desc);
    kr__buf all = KR__BUF_INIT;
    for (size_t i = 0; i < n && i < MAX_KERNELS; i++) {
        kr__buf one = KR__BUF_INIT;
        bound(&one, order[i]);
        occupancy(&one, order[i]);
        problems(&one, order[i]);
        /* a leading "; " (no bound or occupancy to report, only problems) goes */
        const char *txt = one.len ? one.data + (one.data[0] == ';' ? 2 : 0) : "";
        if (one.len && n > 1) {
            double ns = order[i]->v[KR__CM_DURATION_NS];
            if (s->duration_s > 0 && ns > 0)
                kr__buf_printf(&all, "%skernel %s (launch %zu, %.0f %% of the time): %s",
                               all.len ? "; " : "", order[i]->name, order[i]->launch + 1,
                               100 * ns * 1e-9 / s->duration_s, txt);
            else
                kr__buf_printf(&all, "%skernel %s (launch %zu): %s", all.len ? "; " : "",
                               order[i]->name, order[i]->launch + 1, txt);
        } else if (one.len) {
            kr__buf_printf(&all, "%s", txt);
        }
        kr__buf_free(&one);
    }
    if (all.len)
        snprintf(out, size, "%s", all.data);
    kr__buf_free(&all);
    free(order);
}

/* The robust conditions, from the report's "robust" section. */
static void robust_text(kr__buf *b, const kr_report *r)
{
    double lo, geo;
    json_t *sec = r->details ? json_object_get(r->details, "robust") : NULL;
    if (!sec || kr_report_get(&lo, r, "speedup_robust_min") != KR_OK ||
        kr_report_get(&geo, r, "speedup_robust_geomean") != KR_OK)
        return;
    json_t *list = json_object_get(sec, "conditions"), *c;
    size_t i, shown = 0;
    kr__buf_printf(b, "; under perturbed conditions at least %.2fx (geometric mean %.2fx:", lo, geo);
    json_array_foreach(list, i, c) {
        json_t *s = json_object_get(c, "speedup");
        if (json_is_number(s))
            kr__buf_printf(b, "%s %s %.2fx", shown++ ? "," : "",
                           json_string_value(json_object_get(c, "name")), json_number_value(s));
    }
    kr__buf_printf(b, ")");
}

void kr__bench_feedback(kr_report *r)
{
    kr__buf b = KR__BUF_INIT;
    const char *fb = kr_report_text(r, "feedback");
    kr__buf_printf(&b, "%s", fb ? fb : "");
    size_t before = b.len;
    robust_text(&b, r);
    const char *profile = kr_report_text(r, "counters_feedback");
    if (profile && profile[0])
        kr__buf_printf(&b, "; profile: %s", profile);
    if (b.len > before && !b.oom)
        kr_report_set_text(r, "feedback", b.data + (fb && fb[0] ? 0 : 2));
    kr__buf_free(&b);
}
