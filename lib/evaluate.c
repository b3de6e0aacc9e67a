/* kr_evaluate: compile, read the plan, verify, benchmark, score. */
#include "kreward/evaluate.h"
#include "context_impl.h"
#include "program_impl.h"
#include "report_impl.h"
#include "strbuf.h"

#include <stdio.h>
#include <string.h>

int kr_evaluate_options_init(kr_evaluate_options *o, uint32_t version)
{
    if (!o)
        return KR_EINVAL;
    if (version != KR_EVALUATE_OPTIONS_VERSION)
        return KR_EVERSION;
    kr_evaluate_options d = KR_EVALUATE_OPTIONS_INIT;
    *o = d;
    return KR_OK;
}

/* Lines that hold code: not blank, not only a comment (a crude measure,
 * enough for code-size penalties). */
static size_t code_lines(const char *src, size_t len)
{
    size_t lines = 0;
    int in_block = 0;
    for (size_t i = 0; i < len;) {
        size_t end = i;
        while (end < len && src[end] != '\n')
            end++;
        int code = 0;
        for (size_t j = i; j < end; j++) {
            if (in_block) {
                if (src[j] == '*' && j + 1 < end && src[j + 1] == '/') {
                    in_block = 0;
                    j++;
                }
            } else if (src[j] == '/' && j + 1 < end && src[j + 1] == '/') {
                break;
            } else if (src[j] == '/' && j + 1 < end && src[j + 1] == '*') {
                in_block = 1;
                j++;
            } else if (src[j] != ' ' && src[j] != '\t' && src[j] != '\r') {
                code = 1;
            }
        }
        lines += code;
        i = end + 1;
    }
    return lines;
}

static void compile_metrics(kr_report *r, const kr_program *p)
{
    kr_report_set(r, "compiled", 1);
    kr_report_set(r, "compile_seconds", kr_program_compile_seconds(p));
    kr_report_set(r, "kernels", (double)kr_program_kernel_count(p));
    int64_t regs = -1, local = 0;
    for (size_t k = 0; k < kr_program_kernel_count(p); k++) {
        int64_t v = kr_program_kernel_attr(p, k, KR_KERNEL_REGISTERS);
        regs = v > regs ? v : regs;
        v = kr_program_kernel_attr(p, k, KR_KERNEL_LOCAL_BYTES);
        local = v > local ? v : local;
    }
    if (regs >= 0) {
        kr_report_set(r, "registers", (double)regs);
        kr_report_set(r, "local_bytes", (double)local);
    }
    if (kr_program_log(p)[0])
        kr_report_set_text(r, "compile_log", kr_program_log(p));
}

/* The compile log for a model: the error lines first, bounded. */
static void compile_feedback(kr_context *ctx, kr_report *r)
{
    const char *log = kr_context_errdetail(ctx);
    kr__buf b = KR__BUF_INIT;
    kr__buf_printf(&b, "%s", kr_context_errmsg(ctx));
    if (log[0]) {
        size_t n = strlen(log);
        kr__buf_printf(&b, "\n%.*s%s", (int)(n < 3000 ? n : 3000), log, n > 3000 ? "\n[log cut]" : "");
    }
    kr_report_set_text(r, "feedback", b.data);
    kr_report_set_text(r, "compile_log", log);
    kr__buf_free(&b);
}

static int judged(kr_context *ctx, kr_report *r, int verdict, const char *what)
{
    kr_report_set_verdict(r, verdict);
    kr_report_set_text(r, "message", kr_context_errmsg(ctx));
    if (!kr_report_text(r, "feedback"))
        kr__report_printf(r, "feedback", "%s: %s", what, kr_context_errmsg(ctx));
    kr_report_set(r, "correct", 0);
    return KR_OK;
}

static int score(kr_context *ctx, const kr_evaluate_options *o, kr_report *r, int rc)
{
    if (rc == KR_OK && o->reward) {
        rc = kr_reward_score(o->reward, r, NULL);
        if (rc != KR_OK)
            kr_report_set_text(r, "message", kr_context_errmsg(ctx));
    }
    return rc;
}

static int run(kr_context *ctx, const kr_problem *problem, const char *source, size_t len,
               const kr_evaluate_options *o, kr_report *r)
{
    kr_report_set(r, "code_lines", (double)code_lines(source, len));
    kr_compile_options co = KR_COMPILE_OPTIONS_INIT;
    if (o->compile)
        co = *o->compile;
    if (!co.name)
        co.name = o->name ? o->name : "candidate.cu";
    kr_program *prog = NULL;
    kr_plan *plan = NULL;
    int rc = kr_compile(ctx, &prog, source, len, &co);
    if (rc == KR_ECOMPILE || rc == KR_ETIMEOUT || rc == KR_EPARSE || rc == KR_ETOOBIG) {
        kr_report_set(r, "compiled", 0);
        compile_feedback(ctx, r);
        return judged(ctx, r, KR_VERDICT_COMPILE_ERROR, "compile error");
    }
    if (rc != KR_OK) {
        kr_report_set_verdict(r, KR_VERDICT_ERROR);
        kr_report_set_text(r, "message", kr_context_errmsg(ctx));
        return rc;
    }
    compile_metrics(r, prog);
    rc = kr_plan_from_source(ctx, &plan, source, len, co.name);
    if (rc == KR_OK)
        rc = kr_plan_check(ctx, plan, problem, prog);
    if (rc == KR_EPLAN || rc == KR_ENOTFOUND) {
        rc = judged(ctx, r, KR_VERDICT_INVALID_PLAN, "launch plan");
        goto out;
    }
    if (rc != KR_OK)
        goto out;
    if (!kr_context_has_device(ctx)) {
        /* what can still be checked here: the problem's own reference */
        if ((rc = kr_problem_check_reference(ctx, problem)) != KR_OK) {
            char msg[1100];
            snprintf(msg, sizeof msg, "the problem's reference is broken: %s", kr_context_errmsg(ctx));
            kr_report_set_verdict(r, KR_VERDICT_ERROR);
            kr_report_set_text(r, "message", msg);
            goto out;
        }
        rc = kr__fail(ctx, KR_ENODEVICE, "compiled and checked; verification and timing need an "
                      "NVIDIA GPU (%s)", ctx->device_why);
        kr_report_set_verdict(r, KR_VERDICT_NOT_RUN);
        kr_report_set_text(r, "message", kr_context_errmsg(ctx));
        goto out;
    }
    kr_report *vr = NULL;
    rc = kr_verify(ctx, problem, prog, plan, o->verify, &vr);
    /* verify writes its own report: move its contents into ours */
    kr_report_set_verdict(r, kr_report_verdict(vr));
    kr_report_set_flags(r, kr_report_flags(r) | kr_report_flags(vr));
    for (size_t i = 0; i < kr_report_metric_count(vr); i++) {
        double v;
        kr_report_get(vr, kr_report_metric_name(vr, i), &v);
        kr_report_set(r, kr_report_metric_name(vr, i), v);
    }
    const char *texts[] = {"message", "feedback"};
    for (size_t i = 0; i < 2; i++)
        if (kr_report_text(vr, texts[i]))
            kr_report_set_text(r, texts[i], kr_report_text(vr, texts[i]));
    json_object_set(r->details, "verify", kr__report_section(vr, "verify"));
    kr_report_free(vr);
    if (rc != KR_OK || kr_report_verdict(r) != KR_VERDICT_PASSED || (o->flags & KR_EVALUATE_NO_BENCH))
        goto out;
    rc = kr_benchmark(ctx, problem, prog, plan, o->bench, o->baseline, &r);
    if (rc == KR_OK && kr_report_verdict(r) == KR_VERDICT_PASSED) {
        double s;
        if (kr_report_get(r, "speedup", &s) == KR_OK) {
            char text[1200];
            snprintf(text, sizeof text, "%s; %.2fx the baseline's speed", kr_report_text(r, "feedback"), s);
            kr_report_set_text(r, "feedback", text);
        }
    }
out:
    kr_plan_free(plan);
    kr_program_free(prog);
    return rc;
}

int kr_evaluate(kr_context *ctx, const kr_problem *problem, const char *source, size_t len,
                const kr_evaluate_options *opts, kr_report **out)
{
    if (!out)
        return KR_EINVAL;
    *out = NULL;
    if (kr_report_new(out) != KR_OK)
        return KR_ENOMEM;
    kr_report *r = *out;
    if (!ctx || !problem || !source) {
        kr_report_set_verdict(r, KR_VERDICT_ERROR);
        kr_report_set_text(r, "message", "kr_evaluate needs a context, a problem and a source");
        return KR_EINVAL;
    }
    kr__clear_error(ctx);
    kr_evaluate_options d = KR_EVALUATE_OPTIONS_INIT;
    const kr_evaluate_options *o = opts ? opts : &d;
    if (o->version == 0 || o->version > KR_EVALUATE_OPTIONS_VERSION) {
        kr_report_set_verdict(r, KR_VERDICT_ERROR);
        return kr__fail(ctx, KR_EVERSION, "kr_evaluate_options version %u is newer than this "
                        "library", o->version);
    }
    kr_report_set_text(r, "problem", kr_problem_name(problem));
    if (o->name)
        kr_report_set_text(r, "candidate", o->name);
    int rc = run(ctx, problem, source, len ? len : strlen(source), o, r);
    return score(ctx, o, r, rc);
}
