/* `kreward evaluate`: one candidate against one problem, end to end. */
#include "cli_eval.h"

#include <stdlib.h>
#include <string.h>

static void usage(FILE *to)
{
    fprintf(to, "usage: kreward evaluate PROBLEM.json CANDIDATE.cu [options]\n"
                "       kreward evaluate PROBLEM.py CANDIDATE.py [options]  (KernelBench: see\n"
                "       python3 -m kreward.kernelbench evaluate --help)\n\n"
                "Compiles the candidate, reads its launch plan, verifies it against the\n"
                "problem's reference on every case with fresh inputs, times it against the\n"
                "reference, and scores it. Prints a summary (or the JSON report).\n"
                "Without a GPU it compiles and checks the plan, and says that verification\n"
                "and timing need an NVIDIA GPU.\n\noptions:\n%s"
                "\nexit: 0 passed (or not run without a GPU), 1 the candidate failed, 2 usage\n"
                "or unreadable input, 3 no GPU with --require-gpu, 4 internal error\n",
            eval_options_help());
}

/* The candidate in a sandboxed worker process of a pool of one. */
static kr_report *evaluate_in_pool(const eval_args *a, const eval_setup *s, const kr_problem *p,
                                   const char *src, size_t len)
{
    int no_gpu;
    kr_pool *pool = eval_pool(a, &no_gpu);
    if (!pool)
        return NULL;
    kr_job job = eval_job(s, p, src, len, s->eval.name);
    uint64_t ticket;
    kr_report *r = NULL;
    if (kr_pool_submit(&ticket, pool, &job) == KR_OK)
        kr_pool_wait(&r, pool, ticket, -1);
    kr_pool_free(pool);
    return r;
}

int cmd_evaluate(int argc, char **argv)
{
    /* a KernelBench problem (.py): its ModelNew candidate is Python */
    for (int i = 1; i < argc; i++)
        if (argv[i][0] != '-' && cli_is_kernelbench_file(argv[i]))
            return cli_exec_python("evaluate", "kreward.kernelbench", "evaluate", argc, argv,
                                   "torch (ModelNew candidates)");
    eval_args a;
    memset(&a, 0, sizeof a);
    const char *files[2] = {NULL, NULL};
    size_t nfiles = 0;
    cli_parser parser;
    cli_parser_init(&parser, "kreward evaluate", "", NULL, eval_options);
    const char *v;
    for (int c; (c = eval_next(&parser, argc, argv, &v, &a)) != CLI_END;) {
        if (c == CLI_HELP) {
            usage(stdout);
            return EXIT_OK;
        }
        if (c != CLI_ARG)
            return EXIT_USAGE;
        if (nfiles == 2) {
            cli_bad(&parser, "one PROBLEM and one CANDIDATE only ('%s' is extra)", v);
            return EXIT_USAGE;
        }
        files[nfiles++] = v;
    }
    if (nfiles != 2) {
        usage(stderr);
        return EXIT_USAGE;
    }
    size_t len;
    char *src = cli_read_file(files[1], &len);
    if (!src)
        return EXIT_USAGE;
    /* the problem and the reward live here; the candidate runs in a worker
     * (this process needs no GPU), or here with --in-process */
    kr_context *ctx = cli_context(a.cache_dir, !a.in_process);
    kr_problem *p = NULL;
    eval_setup s;
    int rc = kr_problem_load(&p, ctx, files[0]);
    int exit_code = EXIT_OK;
    if (rc != KR_OK) {
        cli_report_error(ctx, "problem", rc);
        exit_code = cli_exit_for(rc);
    } else if (eval_prepare(ctx, &a, &s) != 0) {
        exit_code = EXIT_USAGE;
    } else {
        const char *base = strrchr(files[1], '/');
        s.eval.name = base ? base + 1 : files[1];
        kr_report *r = NULL;
        if (a.in_process) { /* trusted code: the candidate runs here */
            if (kr_report_new(&r) != KR_OK) {
                fprintf(stderr, "kreward evaluate: out of memory\n");
                exit(EXIT_INTERNAL);
            }
            int saved = cli_quiet_stdout(); /* the candidate's printf never mixes with the report */
            rc = kr_evaluate(r, ctx, p, src, len, &s.eval);
            cli_restore_stdout(saved);
        } else {
            r = evaluate_in_pool(&a, &s, p, src, len);
            if (!r) {
                eval_release(&s);
                kr_problem_free(p);
                kr_context_free(ctx);
                free(src);
                return a.require_gpu ? EXIT_ENVIRONMENT : EXIT_INTERNAL;
            }
        }
        if (a.json) {
            char *json = NULL;
            kr_report_json(&json, r);
            printf("%s\n", json ? json : "{}");
            kr_free(json);
        } else {
            eval_print(stdout, r, s.reward_name);
        }
        exit_code = eval_exit_code(r, a.require_gpu);
        kr_report_free(r);
        eval_release(&s);
    }
    kr_problem_free(p);
    kr_context_free(ctx);
    free(src);
    return exit_code;
}
