/* A problem's reference: compiled program and launch plan. */
#include "context_impl.h"
#include "plan_impl.h"
#include "problem_impl.h"
#include "reference.h"

#include <string.h>

/* Compiles the reference source and reads its plan (JSON from the problem,
 * else the source's annotations), checked for every case. */
static int reference_build(kr_context *ctx, const kr_problem *p, kr_program **prog, kr_plan **plan)
{
    *prog = NULL;
    *plan = NULL;
    if (p->reference_kind != KR_REFERENCE_SOURCE)
        return kr__fail(ctx, KR_EINVAL, "%s: the reference is golden outputs, not source", p->name);
    kr_compile_options o = KR_COMPILE_OPTIONS_INIT;
    o.name = p->reference_name;
    int rc = kr_compile(ctx, prog, p->reference_source, strlen(p->reference_source), &o);
    if (rc != KR_OK)
        return rc;
    if (p->reference_plan_json)
        rc = kr_plan_parse_json(ctx, plan, p->reference_plan_json, strlen(p->reference_plan_json),
                                p->reference_name);
    else
        rc = kr_plan_from_source(ctx, plan, p->reference_source, strlen(p->reference_source),
                                 p->reference_name);
    if (rc == KR_OK)
        rc = kr_plan_check(ctx, *plan, p, *prog);
    if (rc != KR_OK) {
        kr_plan_free(*plan);
        kr_program_free(*prog);
        *plan = NULL;
        *prog = NULL;
    }
    return rc;
}

int kr_problem_check_reference(kr_context *ctx, const kr_problem *p)
{
    if (!ctx || !p)
        return KR_EINVAL;
    kr__clear_error(ctx);
    if (p->reference_kind == KR_REFERENCE_GOLDEN)
        return KR_OK;
    kr_program *prog;
    kr_plan *plan;
    int rc = reference_build(ctx, p, &prog, &plan);
    kr_plan_free(plan);
    kr_program_free(prog);
    return rc;
}

int kr__reference_bind(kr_context *ctx, const kr_problem *p, kr__bound_plan *out)
{
    kr_program *prog;
    kr_plan *plan;
    memset(out, 0, sizeof *out);
    int rc = reference_build(ctx, p, &prog, &plan);
    if (rc != KR_OK)
        return rc;
    rc = kr__plan_bind(ctx, plan, p, prog, out);
    /* set even on failure, so unbind frees them */
    out->program = prog;
    out->plan = plan;
    return rc;
}

void kr__reference_unbind(kr__bound_plan *bp)
{
    kr_program *prog = (kr_program *)bp->program;
    kr_plan *plan = (kr_plan *)bp->plan;
    if (!prog && !plan)
        return;
    if (plan)
        kr__plan_unbind(bp);
    kr_plan_free(plan);
    kr_program_free(prog);
    memset(bp, 0, sizeof *bp);
}
