/* Shared helpers of the `kreward` command line. */
#ifndef KREWARD_CLI_H
#define KREWARD_CLI_H

#include <getopt.h>
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

/* While a candidate runs, its device printf output goes wherever the
 * process's stdout goes: cli_quiet_stdout points stdout at stderr (what is
 * printed there is never the report), cli_restore_stdout puts it back
 * before the report is printed. */
int cli_quiet_stdout(void);
void cli_restore_stdout(int saved);

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

/* Option parsing: getopt_long with this command line's conventions. Long
 * options take "--opt value" and "--opt=value" (and unique prefixes, as GNU
 * tools do); every command has -h/--help; arguments that are not options
 * come back in order as CLI_ARG (also those after "--"). An unknown or
 * ambiguous option, a missing value, or a value given to a flag prints one
 * line naming the option and pointing to --help, and comes back as CLI_BAD:
 * the command exits with EXIT_USAGE. */
enum {
    CLI_END = -1,
    CLI_BAD = -2,
    CLI_ARG = 1,
    CLI_HELP = 'h',
    CLI_OPT = 0x100,        /* first id of a command's options with no short form */
    CLI_OPT_SHARED = 0x200, /* first id of a shared table's (cli_eval.c) */
};
#define CLI_MAX_OPTIONS 32
typedef struct {
    const char *cmd; /* "kreward compile": how messages begin */
    char shorts[40];
    struct option longs[CLI_MAX_OPTIONS];
    int ended; /* getopt is done; what is left is positional */
} cli_parser;
/* Joins the command's own long options and a shared table (or NULL), adds
 * --help, and restarts getopt. `shorts` is getopt's letters, e.g. "D:I:o:". */
void cli_parser_init(cli_parser *p, const char *cmd, const char *shorts, const struct option *own,
                     const struct option *shared);
/* The next option's id (its short letter or its long table's val), CLI_ARG,
 * CLI_BAD or CLI_END; *value is the option's value or the argument. */
int cli_next(cli_parser *p, int argc, char **argv, const char **value);
/* Prints "kreward CMD: <what> (see 'kreward CMD --help')" on stderr; returns
 * CLI_BAD. Also for values an option refuses. */
int cli_bad(const cli_parser *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

int cmd_info(int argc, char **argv);
int cmd_compile(int argc, char **argv);
int cmd_problem(int argc, char **argv);
int cmd_evaluate(int argc, char **argv);
int cmd_suite(int argc, char **argv);
int cmd_serve(int argc, char **argv);
int cmd_problems(int argc, char **argv);
int cmd_report(int argc, char **argv);

/* Hands a command to the Python package (cli_python.c): execs `python3 -m
 * MODULE [FIRST] argv[1..]`; returns only when that fails (saying so, with
 * what the interpreter needs). */
int cli_exec_python(const char *command, const char *module, const char *first, int argc,
                    char **argv, const char *needs);
/* Runs `python3 -m MODULE ARGS...` (args NULL-terminated) as a child, set
 * up as cli_exec_python does, and waits for it: its exit code, or
 * EXIT_ENVIRONMENT when Python could not be run (said on stderr, with what
 * the interpreter needs), EXIT_INTERNAL when it was killed. */
int cli_run_python(const char *command, const char *module, const char *const *args,
                   const char *needs);
/* Whether a path names a KernelBench problem or ModelNew file (.py): those
 * commands are the Python package's (kreward.kernelbench). */
int cli_is_kernelbench_file(const char *path);

#endif
