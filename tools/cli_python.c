/* Commands the Python package serves: `kreward serve` (kreward.serve),
 * `kreward report` (kreward.pages) and `kreward evaluate` / `kreward suite`
 * on KernelBench problems (kreward.kernelbench: a ModelNew candidate is
 * Python that torch runs); and `kreward suite --html`'s page, made by a
 * child (cli_run_python) once the suite is done.
 *
 * They exec `python3 -m MODULE ARGS...`: exec, not a child, so a signal
 * from a supervisor (SIGTERM drains a server) reaches the Python process
 * itself and its exit code is the command's. The binding must load this
 * same library: KREWARD_LIBRARY is set to the file this process loaded
 * (dladdr on kr_version) unless already set, and the source tree's binding
 * is put first on PYTHONPATH when it exists (a build tree; an installed
 * package is found by Python on its own). $KREWARD_PYTHON names another
 * interpreter. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* dladdr */
#endif
#include "cli.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
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
        snprintf(probe, sizeof probe, "%s/kreward/__init__.py", KR_PYTHON_SOURCE_DIR) >=
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

int cli_exec_python(const char *command, const char *module, const char *first, int argc,
                    char **argv, const char *needs)
{
    const char *python = getenv("KREWARD_PYTHON");
    if (!python || !*python)
        python = "python3";
    char **args = calloc((size_t)argc + 5, sizeof *args);
    if (!args || set_pythonpath() != 0) {
        free(args);
        fprintf(stderr, "kreward %s: out of memory\n", command);
        return EXIT_INTERNAL;
    }
    set_library();
    int n = 0;
    args[n++] = (char *)python;
    args[n++] = "-m";
    args[n++] = (char *)module;
    if (first)
        args[n++] = (char *)first;
    for (int i = 1; i < argc; i++) /* argv[0] is the command's name */
        args[n++] = argv[i];
    execvp(python, args);
    fprintf(stderr, "kreward %s: cannot run %s: %s (set KREWARD_PYTHON to a Python 3 with %s)\n",
            command, python, strerror(errno), needs);
    free(args);
    return EXIT_ENVIRONMENT;
}

int cli_run_python(const char *command, const char *module, const char *const *args,
                   const char *needs)
{
    const char *python = getenv("KREWARD_PYTHON");
    if (!python || !*python)
        python = "python3";
    size_t n = 0;
    while (args[n])
        n++;
    char **argv = calloc(n + 4, sizeof *argv);
    if (!argv) {
        fprintf(stderr, "kreward %s: out of memory\n", command);
        return EXIT_INTERNAL;
    }
    argv[0] = (char *)python;
    argv[1] = "-m";
    argv[2] = (char *)module;
    for (size_t i = 0; i < n; i++)
        argv[3 + i] = (char *)args[i];
    fflush(stdout); /* the child's lines come after this process's */
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
        if (set_pythonpath() == 0) {
            set_library();
            execvp(python, argv);
        }
        fprintf(stderr, "kreward %s: cannot run %s: %s (set KREWARD_PYTHON to a Python 3 with %s)\n",
                command, python, strerror(errno), needs);
        _exit(127);
    }
    free(argv);
    if (pid < 0) {
        fprintf(stderr, "kreward %s: cannot start %s: %s\n", command, python, strerror(errno));
        return EXIT_INTERNAL;
    }
    int status;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR) {
            fprintf(stderr, "kreward %s: lost %s -m %s: %s\n", command, python, module,
                    strerror(errno));
            return EXIT_INTERNAL;
        }
    if (WIFSIGNALED(status)) {
        fprintf(stderr, "kreward %s: %s -m %s was killed by signal %d\n", command, python, module,
                WTERMSIG(status));
        return EXIT_INTERNAL;
    }
    int code = WEXITSTATUS(status);
    return code == 127 ? EXIT_ENVIRONMENT : code;
}

int cli_is_kernelbench_file(const char *path)
{
    size_t n = path ? strlen(path) : 0;
    return n > 3 && strcmp(path + n - 3, ".py") == 0;
}
