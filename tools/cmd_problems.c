/* `kreward problems vet PATH...`: vets a task set of KernelBench files and
 * kreward problems (docs/vetting.md). Python (kreward.vet): it imports the
 * files through torch, so cli_python.c hands the arguments to
 * `python3 -m kreward.vet`. */
#include "cli.h"

#include <string.h>

int cmd_problems(int argc, char **argv)
{
    if (argc < 2 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0) {
        fprintf(argc < 2 ? stderr : stdout,
                "usage: kreward problems vet PATH... [--out DIR] [options]\n\n"
                "  vet   which problems of a task set are fit to train on: import,\n"
                "        determinism, the reference's time, launch-bound sizes, trivial\n"
                "        answers, tolerance headroom, duplicates; kept/ and refused/\n"
                "        folders and vet.jsonl in --out ('kreward problems vet --help')\n");
        return argc < 2 ? EXIT_USAGE : EXIT_OK;
    }
    if (strcmp(argv[1], "vet") != 0) {
        fprintf(stderr, "kreward problems: '%s' is not a verb: vet (see 'kreward problems "
                "--help'); 'kreward problem' shows or checks one problem\n", argv[1]);
        return EXIT_USAGE;
    }
    return cli_exec_python("problems vet", "kreward.vet", NULL, argc - 1, argv + 1,
                           "torch for KernelBench files");
}
