/* `kreward serve`: the reward service over HTTP (docs/serve.md).
 *
 * The server is Python (kreward.serve: Starlette + uvicorn, and Ray for the
 * cluster pool), so this execs `python3 -m kreward.serve` with the
 * arguments: exec, not a child, so SIGTERM from a supervisor reaches the
 * server itself and drains it, and its pid is the one to signal. The
 * binding must load this same library: KREWARD_LIBRARY is set to the file
 * this process loaded (dladdr on kr_version) unless already set, and the
 * source tree's binding is put first on PYTHONPATH when it exists (a build
 * tree; an installed package is found by Python on its own). $KREWARD_PYTHON
 * names another interpreter. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* dladdr */
#endif
#include "cli.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef KR_PYTHON_SOURCE_DIR
#define KR_PYTHON_SOURCE_DIR ""
#endif

static void set_library(void)
{
    Dl_info info;
    if (getenv("KREWARD_LIBRARY") || !dladdr((void *)kr_version, &info) || !info.dli_fname)
        return;
    char *real = realpath(info.dli_fname, NULL);
    if (real) {
        setenv("KREWARD_LIBRARY", real, 1);
        free(real);
    }
}

static int set_pythonpath(void)
{
    char probe[4096];
    struct stat st;
    if (!KR_PYTHON_SOURCE_DIR[0] ||
        snprintf(probe, sizeof probe, "%s/kreward/serve/__main__.py", KR_PYTHON_SOURCE_DIR) >=
            (int)sizeof probe ||
        stat(probe, &st) != 0)
        return 0;
    const char *old = getenv("PYTHONPATH");
    size_t n = strlen(KR_PYTHON_SOURCE_DIR) + (old ? strlen(old) + 1 : 0) + 1;
    char *path = malloc(n);
    if (!path)
        return -1;
    snprintf(path, n, "%s%s%s", KR_PYTHON_SOURCE_DIR, old && *old ? ":" : "", old ? old : "");
    setenv("PYTHONPATH", path, 1);
    free(path);
    return 0;
}

int cmd_serve(int argc, char **argv)
{
    const char *python = getenv("KREWARD_PYTHON");
    if (!python || !*python)
        python = "python3";
    char **args = calloc((size_t)argc + 3, sizeof *args);
    if (!args || set_pythonpath() != 0) {
        fprintf(stderr, "kreward serve: out of memory\n");
        return EXIT_INTERNAL;
    }
    set_library();
    args[0] = (char *)python;
    args[1] = "-m";
    args[2] = "kreward.serve";
    for (int i = 1; i < argc; i++) /* argv[0] is "serve" */
        args[i + 2] = argv[i];
    execvp(python, args);
    fprintf(stderr, "kreward serve: cannot run %s: %s (set KREWARD_PYTHON to a Python 3 with "
                    "starlette and uvicorn)\n", python, strerror(errno));
    free(args);
    return EXIT_ENVIRONMENT;
}
