/* Shared helpers of the `kreward` command line. */
#ifndef KREWARD_CLI_H
#define KREWARD_CLI_H

#include <kreward/kreward.h>
#include <stdio.h>

/* Exit codes (documented in docs/cli.md). */
enum {
    EXIT_OK = 0,
    EXIT_CANDIDATE = 1,   /* the candidate failed: compile error, incorrect, fault */
    EXIT_USAGE = 2,       /* bad command line, unreadable or malformed input file */
    EXIT_ENVIRONMENT = 3, /* what was asked needs something this machine lacks (GPU, NVRTC) */
    EXIT_INTERNAL = 4,    /* anything else: out of memory, driver error */
};

/* Reads a whole file; NULL with a message on stderr on failure. */
char *cli_read_file(const char *path, size_t *len);
/* Maps a library status to an exit code. */
int cli_exit_for(int status);
/* Prints "kreward: <what>: <errmsg>" and the detail (e.g. a compile log). */
void cli_report_error(kr_context *ctx, const char *what, int status);
/* Creates a context from common options; exits on failure. */
kr_context *cli_context(const char *cache_dir, int no_device);
/* A growable list of strings for repeated options (-D, -I). */
typedef struct {
    const char **items;
    size_t count;
} cli_list;
void cli_list_add(cli_list *l, const char *s);

int cmd_info(int argc, char **argv);
int cmd_compile(int argc, char **argv);
int cmd_problem(int argc, char **argv);
int cmd_evaluate(int argc, char **argv);
int cmd_suite(int argc, char **argv);

#endif
