/* The environment step from C: one candidate against one problem, scored
 * with a preset. The README's C example is this file.
 *
 *   evaluate_one PROBLEM.json CANDIDATE.cu [PRESET]
 *
 * Prints the verdict, the reward and the feedback; exits 0 when the
 * candidate was judged (or not run for want of a GPU), 1 otherwise. */
#include <kreward/kreward.h>

#include <stdio.h>
#include <stdlib.h>

static char *read_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    rewind(f);
    char *text = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (text && fread(text, 1, (size_t)n, f) == (size_t)n)
        text[n] = '\0';
    else {
        free(text);
        text = NULL;
    }
    fclose(f);
    return text;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: evaluate_one PROBLEM.json CANDIDATE.cu [PRESET]\n");
        return 2;
    }
    char *source = read_file(argv[2]);
    if (!source) {
        fprintf(stderr, "cannot read %s\n", argv[2]);
        return 2;
    }
    kr_context *ctx;
    if (kr_context_new(&ctx, NULL) != KR_OK) /* works without a GPU too */
        return 1;
    kr_problem *problem = NULL;
    kr_reward *reward = NULL;
    kr_report *report = NULL;
    int rc = kr_problem_load(&problem, ctx, argv[1]);
    if (rc == KR_OK)
        rc = kr_reward_preset(&reward, ctx, argc > 3 ? argv[3] : "makora");
    if (rc == KR_OK)
        rc = kr_report_new(&report);
    if (rc != KR_OK) {
        fprintf(stderr, "%s\n", kr_context_errmsg(ctx));
    } else {
        kr_evaluate_options o = KR_EVALUATE_OPTIONS_INIT;
        o.reward = reward;
        o.name = argv[2];
        /* one report through the whole step: compile, plan, verify, time, score */
        rc = kr_evaluate(report, ctx, problem, source, 0, &o);
        printf("%s, reward %g: %s\n", kr_verdict_name(kr_report_verdict(report)),
               kr_report_reward(report), kr_report_text(report, "feedback") ?
               kr_report_text(report, "feedback") : kr_report_text(report, "message"));
    }
    kr_report_free(report);
    kr_reward_free(reward);
    kr_problem_free(problem);
    kr_context_free(ctx);
    free(source);
    return rc == KR_OK || rc == KR_ENODEVICE ? 0 : 1;
}
