/* Binding a plan to a problem and a program, and evaluating it per case
 * against the device's limits. */
#include "driver/context_impl.h"
#include "common/dtype.h"
#include "problem/plan_impl.h"
#include "problem/problem_impl.h"
#include "common/strbuf.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void kr__limits_for(kr_context *ctx, const char *arch, kr__limits *out)
{
    kr__limits l = {1024, {1024, 1024, 64}, {2147483647, 65535, 65535}, 48 * 1024, 48 * 1024};
    int num = 0;
    if (arch && strncmp(arch, "sm_", 3) == 0)
        num = atoi(arch + 3);
    else if (arch && strncmp(arch, "compute_", 8) == 0)
        num = atoi(arch + 8);
    /* opt-in shared memory per block by architecture (CUDA programming guide) */
    l.smem_optin = num >= 100 && num != 120 && num != 121 ? 232448
                 : num == 90 ? 232448 : num == 80 || num == 87 ? 166912
                 : num >= 86 ? 101376 : 65536;
    if (ctx && ctx->has_device) {
        const kr__cuda_api *cu = kr__cuda();
        int v;
        if (cu->cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
                                     ctx->dev) == CUDA_SUCCESS)
            l.smem_optin = v;
        if (cu->cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, ctx->dev) ==
            CUDA_SUCCESS)
            l.max_threads = v;
        if (cu->cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y, ctx->dev) == CUDA_SUCCESS)
            l.max_grid[1] = v;
        if (cu->cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z, ctx->dev) == CUDA_SUCCESS)
            l.max_grid[2] = v;
    }
    *out = l;
}

void kr__plan_unbind(kr__bound_plan *bp)
{
    for (size_t i = 0; i < bp->num_launches; i++) {
        kr__bound_launch *bl = &bp->launches[i];
        for (size_t j = 0; j < 3; j++) {
            kr__expr_free(bl->grid[j]);
            kr__expr_free(bl->block[j]);
        }
        kr__expr_free(bl->smem);
        for (size_t j = 0; j < bl->num_args; j++)
            kr__expr_free(bl->args[j].expr);
        free(bl->args);
    }
    for (size_t i = 0; bp->scratch_bytes && i < bp->plan->num_scratch; i++)
        kr__expr_free(bp->scratch_bytes[i]);
    free(bp->scratch_bytes);
    free(bp->launches);
    memset(bp, 0, sizeof *bp);
}

static int compile_expr(kr_context *ctx, const kr__bound_plan *bp, const char *where,
                        const char *what, const char *text, kr__expr **out)
{
    char why[600];
    const kr_problem *p = bp->problem;
    *out = kr__expr_parse(text, (const char *const *)p->dims, p->num_dims, why, sizeof why);
    if (!*out)
        return kr__fail(ctx, KR_EPLAN, "%s: %s: %s \"%s\": %s", bp->plan->name, where, what, text,
                        why);
    return KR_OK;
}

static size_t find_scratch(const kr_plan *plan, const char *name)
{
    for (size_t i = 0; i < plan->num_scratch; i++)
        if (strcmp(plan->scratch[i].name, name) == 0)
            return i;
    return SIZE_MAX;
}

static int bind_arg(kr_context *ctx, kr__bound_plan *bp, kr__bound_launch *bl, size_t a,
                    const kr__kernel *k)
{
    const char *text = bl->text->args[a];
    const char *where = bl->text->where;
    kr__bound_arg *arg = &bl->args[a];
    arg->size = k->param_size[a];
    arg->offset = k->param_offset[a];
    const kr_problem *p = bp->problem;
    size_t idx;
    char label[200];
    snprintf(label, sizeof label, "%s: %s (launch %s): arg %zu '%s'", bp->plan->name, where,
             bl->text->kernel, a, text);
    if ((idx = kr_problem_find_tensor(p, text)) != SIZE_MAX ||
        (idx = find_scratch(bp->plan, text)) != SIZE_MAX) {
        arg->kind = kr_problem_find_tensor(p, text) != SIZE_MAX ? KR__ARG_TENSOR : KR__ARG_SCRATCH;
        arg->index = idx;
        if (arg->size != 8)
            return kr__fail(ctx, KR_EPLAN, "%s is a pointer (8 bytes), kernel parameter %zu is "
                            "%u bytes", label, a, arg->size);
        return KR_OK;
    }
    if ((idx = kr__problem_find_scalar(p, text)) != SIZE_MAX) {
        arg->kind = KR__ARG_SCALAR;
        arg->index = idx;
        int dt = p->scalars[idx].dtype;
        if ((uint32_t)kr__dtype_size(dt) != arg->size)
            return kr__fail(ctx, KR_EPLAN, "%s is %s (%d bytes), kernel parameter %zu is %u bytes",
                            label, kr__dtype_name(dt), kr__dtype_size(dt), a, arg->size);
        return KR_OK;
    }
    arg->kind = KR__ARG_INT;
    char why[600];
    arg->expr = kr__expr_parse(text, (const char *const *)p->dims, p->num_dims, why, sizeof why);
    if (!arg->expr)
        return kr__fail(ctx, KR_EPLAN, "%s is not a tensor, scratch buffer, scalar or integer "
                        "expression over dims: %s", label, why);
    if (arg->size != 4 && arg->size != 8)
        return kr__fail(ctx, KR_EPLAN, "%s is an integer (passed as 4 or 8 bytes), kernel "
                        "parameter %zu is %u bytes", label, a, arg->size);
    return KR_OK;
}

/* The library's own kernels' names (run/kr_device.cuh): a plan may not
 * launch a kernel of the same name, so nothing a plan launches can be
 * mistaken for the engine's (the engine also recognises its own launches
 * by correlation id, never by name). */
static int reserved_name(const char *name)
{
    static const char *const reserved[] = {"kr_generate",     "kr_compare",      "kr_hash",
                                           "kr_check_bytes",  "kr_bitdiff",      "kr_spin_until",
                                           "kr_spin_cycles",  "kr_fma_peak",     "kr_mma_peak",
                                           "kr_scrub_shared", "kr_device_write"};
    for (size_t i = 0; i < sizeof reserved / sizeof reserved[0]; i++)
        if (strcmp(name, reserved[i]) == 0)
            return 1;
    return strncmp(name, "kreward_", 8) == 0 || strncmp(name, "kr_generate_", 12) == 0;
}

static int bind_launch(kr_context *ctx, kr__bound_plan *bp, size_t i)
{
    kr__bound_launch *bl = &bp->launches[i];
    const kr__launch_text *lt = &bp->plan->launches[i];
    bl->text = lt;
    if (reserved_name(lt->kernel))
        return kr__fail(ctx, KR_EPLAN, "%s: %s: the kernel name '%s' is reserved for the library's "
                        "own kernels: rename it", bp->plan->name, lt->where, lt->kernel);
    bl->kernel = kr_program_find_kernel(bp->program, lt->kernel);
    if (bl->kernel == SIZE_MAX) {
        kr__buf names = KR__BUF_INIT;
        for (size_t k = 0; k < bp->program->num_kernels; k++)
            kr__buf_printf(&names, "%s%s", k ? ", " : "", bp->program->kernels[k].name);
        int rc = kr__fail(ctx, KR_EPLAN, "%s: %s: kernel '%s' is not in the program (it defines: "
                          "%s; kernels must be extern \"C\" __global__ or named by a name "
                          "expression)", bp->plan->name, lt->where, lt->kernel,
                          names.data ? names.data : "no kernel");
        kr__buf_free(&names);
        return rc;
    }
    const kr__kernel *k = &bp->program->kernels[bl->kernel];
    if (!k->params_known)
        return kr__fail(ctx, KR_EPLAN, "%s: %s: the parameters of kernel '%s' are unknown",
                        bp->plan->name, lt->where, lt->kernel);
    if (lt->num_args != k->num_params)
        return kr__fail(ctx, KR_EPLAN, "%s: %s (launch %s): %zu args given, the kernel takes %u "
                        "parameters", bp->plan->name, lt->where, lt->kernel, lt->num_args,
                        k->num_params);
    int rc = KR_OK;
    for (size_t d = 0; d < lt->num_grid && rc == KR_OK; d++)
        rc = compile_expr(ctx, bp, lt->where, "grid", lt->grid[d], &bl->grid[d]);
    for (size_t d = 0; d < lt->num_block && rc == KR_OK; d++)
        rc = compile_expr(ctx, bp, lt->where, "block", lt->block[d], &bl->block[d]);
    if (rc == KR_OK)
        rc = compile_expr(ctx, bp, lt->where, "smem", lt->smem ? lt->smem : "0", &bl->smem);
    if (rc != KR_OK)
        return rc;
    if (!(bl->args = calloc(lt->num_args ? lt->num_args : 1, sizeof *bl->args)))
        return kr__fail(ctx, KR_ENOMEM, "out of memory");
    bl->num_args = lt->num_args;
    for (size_t a = 0; a < lt->num_args && rc == KR_OK; a++)
        rc = bind_arg(ctx, bp, bl, a, k);
    return rc;
}

int kr__plan_bind(kr_context *ctx, const kr_plan *plan, const kr_problem *problem,
                  const kr_program *program, kr__bound_plan *out)
{
    memset(out, 0, sizeof *out);
    out->plan = plan;
    out->problem = problem;
    out->program = program;
    out->launches = calloc(plan->num_launches ? plan->num_launches : 1, sizeof *out->launches);
    out->scratch_bytes = calloc(plan->num_scratch ? plan->num_scratch : 1, sizeof *out->scratch_bytes);
    if (!out->launches || !out->scratch_bytes)
        return kr__fail(ctx, KR_ENOMEM, "out of memory");
    int rc = KR_OK;
    for (size_t s = 0; s < plan->num_scratch && rc == KR_OK; s++) {
        const kr__scratch_text *st = &plan->scratch[s];
        if (kr_problem_find_tensor(problem, st->name) != SIZE_MAX || find_scratch(plan, st->name) != s)
            rc = kr__fail(ctx, KR_EPLAN, "%s: %s: scratch name '%s' is already used",
                          plan->name, st->where, st->name);
        else
            rc = compile_expr(ctx, out, st->where, "scratch bytes", st->bytes, &out->scratch_bytes[s]);
    }
    for (size_t i = 0; i < plan->num_launches && rc == KR_OK; i++) {
        out->num_launches++;
        rc = bind_launch(ctx, out, i);
    }
    return rc;
}

static int eval(kr_context *ctx, const kr__bound_plan *bp, const kr__bound_launch *bl, size_t c,
                const char *what, const kr__expr *e, int64_t *v)
{
    char why[600];
    if (kr__expr_eval(e, bp->problem->cases[c].dims, v, why, sizeof why) != 0)
        return kr__fail(ctx, KR_EPLAN, "%s: %s (launch %s), case '%s': %s: %s", bp->plan->name,
                        bl->text->where, bl->text->kernel, bp->problem->cases[c].name, what, why);
    return KR_OK;
}

static int eval_dims(kr_context *ctx, const kr__bound_plan *bp, const kr__bound_launch *bl,
                     size_t c, const char *what, kr__expr *const *exprs, const int64_t *max,
                     unsigned *out)
{
    static const char axis[] = "xyz";
    for (size_t d = 0; d < 3; d++) {
        int64_t v = 1;
        char label[32];
        snprintf(label, sizeof label, "%s.%c", what, axis[d]);
        if (exprs[d] && eval(ctx, bp, bl, c, label, exprs[d], &v) != KR_OK)
            return KR_EPLAN;
        if (v < 1 || v > max[d])
            return kr__fail(ctx, KR_EPLAN, "%s: %s (launch %s), case '%s': %s = %lld, must be in "
                            "[1, %lld]", bp->plan->name, bl->text->where, bl->text->kernel,
                            bp->problem->cases[c].name, label, (long long)v, (long long)max[d]);
        out[d] = (unsigned)v;
    }
    return KR_OK;
}

int kr__plan_dims(kr_context *ctx, const kr__bound_plan *bp, size_t l, size_t c,
                  const kr__limits *lim, kr__launch_dims *out)
{
    const kr__bound_launch *bl = &bp->launches[l];
    const kr__kernel *k = &bp->program->kernels[bl->kernel];
    if (eval_dims(ctx, bp, bl, c, "grid", bl->grid, lim->max_grid, out->grid) != KR_OK ||
        eval_dims(ctx, bp, bl, c, "block", bl->block, lim->max_block, out->block) != KR_OK)
        return KR_EPLAN;
    int64_t threads = (int64_t)out->block[0] * out->block[1] * out->block[2];
    int64_t kmax = k->attrs[KR_KERNEL_MAX_THREADS] > 0 ? k->attrs[KR_KERNEL_MAX_THREADS]
                                                      : lim->max_threads;
    if (threads > lim->max_threads || threads > kmax)
        return kr__fail(ctx, KR_EPLAN, "%s: %s (launch %s), case '%s': block has %lld threads, "
                        "the kernel allows at most %lld", bp->plan->name, bl->text->where,
                        bl->text->kernel, bp->problem->cases[c].name, (long long)threads,
                        (long long)(kmax < lim->max_threads ? kmax : lim->max_threads));
    int64_t smem;
    if (eval(ctx, bp, bl, c, "smem", bl->smem, &smem) != KR_OK)
        return KR_EPLAN;
    int64_t static_smem = k->attrs[KR_KERNEL_SHARED_STATIC] > 0 ? k->attrs[KR_KERNEL_SHARED_STATIC] : 0;
    if (smem < 0 || smem + static_smem > lim->smem_optin)
        return kr__fail(ctx, KR_EPLAN, "%s: %s (launch %s), case '%s': smem = %lld bytes (+%lld "
                        "static), the device allows at most %lld per block", bp->plan->name,
                        bl->text->where, bl->text->kernel, bp->problem->cases[c].name,
                        (long long)smem, (long long)static_smem, (long long)lim->smem_optin);
    out->smem = (unsigned)smem;
    return KR_OK;
}

int kr__plan_scratch_bytes(kr_context *ctx, const kr__bound_plan *bp, size_t s, size_t c,
                           uint64_t *out)
{
    char why[600];
    int64_t v;
    const kr__scratch_text *st = &bp->plan->scratch[s];
    if (kr__expr_eval(bp->scratch_bytes[s], bp->problem->cases[c].dims, &v, why, sizeof why) != 0)
        return kr__fail(ctx, KR_EPLAN, "%s: %s (scratch %s), case '%s': %s", bp->plan->name,
                        st->where, st->name, bp->problem->cases[c].name, why);
    if (v < 1 || (uint64_t)v > ((uint64_t)64 << 30))
        return kr__fail(ctx, KR_EPLAN, "%s: %s (scratch %s), case '%s': %lld bytes, must be in "
                        "[1, 64 GiB]", bp->plan->name, st->where, st->name,
                        bp->problem->cases[c].name, (long long)v);
    *out = (uint64_t)v;
    return KR_OK;
}

static void store_le(unsigned char *dst, uint64_t v, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++)
        dst[i] = (unsigned char)(v >> (8 * i));
}

int kr__plan_arg_value(kr_context *ctx, const kr__bound_plan *bp, size_t l, size_t a, size_t c,
                       unsigned char *dst)
{
    const kr__bound_launch *bl = &bp->launches[l];
    const kr__bound_arg *arg = &bl->args[a];
    if (arg->kind == KR__ARG_SCALAR) {
        const kr__scalar *s = &bp->problem->scalars[arg->index];
        if (s->dtype == KR_DTYPE_F32) {
            float f = (float)s->value;
            memcpy(dst, &f, 4);
        } else if (s->dtype == KR_DTYPE_F64) {
            memcpy(dst, &s->value, 8);
        } else {
            store_le(dst, (uint64_t)s->ivalue, arg->size);
        }
        return KR_OK;
    }
    if (arg->kind != KR__ARG_INT)
        return KR_OK;
    int64_t v;
    char what[32];
    snprintf(what, sizeof what, "arg %zu", a);
    if (eval(ctx, bp, bl, c, what, arg->expr, &v) != KR_OK)
        return KR_EPLAN;
    if (arg->size == 4 && (v > INT32_MAX || v < INT32_MIN))
        return kr__fail(ctx, KR_EPLAN, "%s: %s (launch %s), case '%s': arg %zu '%s' = %lld does "
                        "not fit the kernel's 4-byte parameter", bp->plan->name, bl->text->where,
                        bl->text->kernel, bp->problem->cases[c].name, a, bl->text->args[a],
                        (long long)v);
    store_le(dst, (uint64_t)v, arg->size);
    return KR_OK;
}

/* A plan's scratch in one case may not exceed max(1 GiB, 8 x the case's
 * tensors): more is the plan's fault (invalid_plan), never an environment
 * error a candidate could provoke on purpose. */
static int check_scratch_total(kr_context *ctx, const kr__bound_plan *bp, size_t c)
{
    const kr_problem *p = bp->problem;
    uint64_t tensors = 0, total = 0, bytes = 0;
    for (size_t t = 0; t < p->num_tensors; t++)
        tensors += p->cases[c].bytes[t];
    uint64_t limit = tensors > ((uint64_t)1 << 27) ? tensors * 8 : (uint64_t)1 << 30;
    for (size_t s = 0; s < bp->plan->num_scratch; s++) {
        int rc = kr__plan_scratch_bytes(ctx, bp, s, c, &bytes);
        if (rc != KR_OK)
            return rc;
        total += bytes;
    }
    if (total > limit)
        return kr__fail(ctx, KR_EPLAN, "%s: case '%s': the scratch buffers take %.2f GB; a plan may "
                        "use at most %.2f GB (max(1 GiB, 8 x the case's tensors))", bp->plan->name,
                        p->cases[c].name, (double)total / 1e9, (double)limit / 1e9);
    return KR_OK;
}

int kr_plan_check(kr_context *ctx, const kr_plan *plan, const kr_problem *problem,
                  const kr_program *program)
{
    if (!ctx || !plan || !problem || !program)
        return KR_EINVAL;
    kr__clear_error(ctx);
    if (kr__program_check_owner(ctx, program, "the program") != KR_OK)
        return KR_EINVAL;
    kr__bound_plan bp;
    int rc = kr__plan_bind(ctx, plan, problem, program, &bp);
    kr__limits lim;
    kr__limits_for(ctx, program->arch, &lim);
    unsigned char scratch_value[8];
    for (size_t c = 0; c < problem->num_cases && rc == KR_OK; c++) {
        for (size_t l = 0; l < bp.num_launches && rc == KR_OK; l++) {
            kr__launch_dims dims;
            rc = kr__plan_dims(ctx, &bp, l, c, &lim, &dims);
            for (size_t a = 0; a < bp.launches[l].num_args && rc == KR_OK; a++)
                rc = kr__plan_arg_value(ctx, &bp, l, a, c, scratch_value);
        }
        if (rc == KR_OK)
            rc = check_scratch_total(ctx, &bp, c);
    }
    kr__plan_unbind(&bp);
    return rc;
}

int kr_plan_json(char **json_out, const kr_plan *plan)
{
    if (!plan || !json_out)
        return KR_EINVAL;
    json_t *o = json_object(), *launches = json_array();
    for (size_t i = 0; i < plan->num_launches; i++) {
        const kr__launch_text *l = &plan->launches[i];
        json_t *lj = json_object(), *grid = json_array(), *block = json_array(), *args = json_array();
        json_object_set_new(lj, "where", json_string(l->where));
        json_object_set_new(lj, "kernel", json_string(l->kernel));
        for (size_t d = 0; d < l->num_grid; d++)
            json_array_append_new(grid, json_string(l->grid[d]));
        for (size_t d = 0; d < l->num_block; d++)
            json_array_append_new(block, json_string(l->block[d]));
        for (size_t a = 0; a < l->num_args; a++)
            json_array_append_new(args, json_string(l->args[a]));
        json_object_set_new(lj, "grid", grid);
        json_object_set_new(lj, "block", block);
        json_object_set_new(lj, "smem", json_string(l->smem ? l->smem : "0"));
        json_object_set_new(lj, "args", args);
        json_array_append_new(launches, lj);
    }
    json_object_set_new(o, "launches", launches);
    json_t *scratch = json_array();
    for (size_t s = 0; s < plan->num_scratch; s++) {
        json_t *sj = json_object();
        json_object_set_new(sj, "name", json_string(plan->scratch[s].name));
        json_object_set_new(sj, "bytes", json_string(plan->scratch[s].bytes));
        json_object_set_new(sj, "init", json_string(plan->scratch[s].zero ? "zero" : "poison"));
        json_array_append_new(scratch, sj);
    }
    json_object_set_new(o, "scratch", scratch);
    *json_out = json_dumps(o, JSON_INDENT(2));
    json_decref(o);
    return *json_out ? KR_OK : KR_ENOMEM;
}
