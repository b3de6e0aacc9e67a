/* `kreward`: the command line of libkreward. Dispatches to one file per
 * subcommand (cmd_*.c). */
#include "cli.h"

#include <string.h>

static const struct {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
} commands[] = {
    {"info", cmd_info, "what this machine offers: driver, GPUs, NVRTC, CUPTI"},
    {"compile", cmd_compile, "compile a candidate and show its kernels and resources"},
    {"problem", cmd_problem, "show or check a problem spec"},
    {"problems", cmd_problems, "vet a task set: which problems are fit to train on"},
    {"evaluate", cmd_evaluate, "compile, verify, time and score one candidate"},
    {"suite", cmd_suite, "evaluate every candidate of a suite directory"},
    {"report", cmd_report, "a JSONL of reports (or a vetting or tuning run) as an HTML page"},
    {"serve", cmd_serve, "serve rewards over HTTP (python3 -m kreward.serve; docs/serve.md)"},
};

static void usage(FILE *to)
{
    fprintf(to, "usage: kreward COMMAND [ARGS]\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(to, "  %-10s %s\n", commands[i].name, commands[i].summary);
    fprintf(to, "\n'kreward COMMAND --help' describes a command. libkreward %s\n", kr_version());
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return EXIT_USAGE;
    }
    if (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0 ||
        strcmp(argv[1], "help") == 0) {
        usage(stdout);
        return EXIT_OK;
    }
    if (strcmp(argv[1], "--version") == 0) {
        printf("kreward %s\n", kr_version());
        return EXIT_OK;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (strcmp(argv[1], commands[i].name) == 0)
            return commands[i].run(argc - 1, argv + 1);
    if (argv[1][0] == '-')
        fprintf(stderr, "kreward: unknown option '%s' (see 'kreward --help')\n", argv[1]);
    else
        fprintf(stderr, "kreward: unknown command '%s' (see 'kreward --help')\n", argv[1]);
    return EXIT_USAGE;
}
