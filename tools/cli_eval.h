/* Options shared by `kreward evaluate` and `kreward suite`, and the
 * human-readable summary of a report. */
#ifndef KREWARD_CLI_EVAL_H
#define KREWARD_CLI_EVAL_H

#include "cli.h"

typedef struct {
    const char *preset;      /* fast | precise */
    const char *reward;      /* preset name or JSON file */
    const char *cache_dir;
    uint64_t seed;
    int no_bench;
    int json;
    int require_gpu;
    int in_process;          /* trusted code only: no worker processes */
    const char *gpus;        /* the pool's GPUs, "0,1" (default: every visible GPU) */
    unsigned jobs;           /* compile workers (default: one per two CPUs) */
    uint32_t bench_flags;    /* KR_BENCH_COUNTERS, KR_BENCH_ROBUST */
} eval_args;

/* The evaluation options, one table for every command that evaluates:
 * pass it to cli_parser_init as the shared table, then read options with
 * eval_next, which keeps these in *a and returns the rest (the command's own
 * options, CLI_ARG, CLI_HELP, CLI_BAD for a value refused, CLI_END). */
extern const struct option eval_options[];
int eval_next(cli_parser *p, int argc, char **argv, const char **value, eval_args *a);
const char *eval_options_help(void);

/* Builds the options (and reward) for kr_evaluate; -1 with a message. */
typedef struct {
    kr_evaluate_options eval;
    kr_verify_options verify;
    kr_bench_options bench;
    kr_reward *reward;
    char reward_name[256];
} eval_setup;
int eval_prepare(kr_context *ctx, const eval_args *a, eval_setup *s);
void eval_release(eval_setup *s);

/* The pool that runs candidates (worker processes, sandboxed). Without a
 * GPU it says so on stderr and makes a pool that compiles and checks plans
 * only (reports not_run), unless --require-gpu (then NULL, exit 3). NULL
 * with a message on stderr when it cannot start. */
kr_pool *eval_pool(const eval_args *a, int *no_gpu);
/* The job for one candidate source with the options of s. */
kr_job eval_job(const eval_setup *s, const kr_problem *p, const char *src, size_t len,
                const char *name);

/* Multi-line summary for people. */
void eval_print(FILE *to, const kr_report *r, const char *reward_name);
/* Exit code for a report: 0 passed, 1 the candidate failed, 0/3 not run. */
int eval_exit_code(const kr_report *r, int require_gpu);

#endif
