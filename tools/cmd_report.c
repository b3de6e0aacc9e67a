/* `kreward report FILE [--html OUT]`: a JSONL of reports (a batch, a
 * suite's --jsonl), a vetting run's JSONL or a tuning run's JSON, summed up
 * and, with --html, written as one HTML page that works offline. The pages
 * are Python (kreward.pages: the charts are matplotlib's): cli_python.c
 * hands the arguments to `python3 -m kreward.pages`. */
#include "cli.h"

int cmd_report(int argc, char **argv)
{
    return cli_exec_python("report", "kreward.pages", NULL, argc, argv,
                           "the kreward package (matplotlib for the charts)");
}
