/* `kreward suite DIR`: every problem x candidate of a suite directory, each
 * evaluated in a process of its own (a candidate that faults or hangs
 * poisons its process, never the suite), against the expectations in each
 * problem's manifest.json. */
#include "cli_eval.h"

#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define WORKER_TIMEOUT_S 600

static void usage(FILE *to)
{
    fprintf(to, "usage: kreward suite DIR [--jsonl OUT] [--filter TEXT] [options]\n\n"
                "Evaluates every candidate listed in DIR/*/manifest.json against its problem\n"
                "(DIR/*/problem.json), each in its own worker process, and prints a table:\n"
                "problem, candidate, verdict, time, speedup with its interval, reward, and\n"
                "whether the verdict is the one the manifest expects. A progress line goes to\n"
                "stderr when it is a terminal.\n\noptions:\n"
                "  --jsonl OUT            also write one JSON line per candidate to OUT\n"
                "  --filter TEXT          only problems whose name contains TEXT\n%s"
                "\nexit: 0 every verdict as expected (or not run without a GPU), 1 otherwise,\n"
                "2 usage or a malformed suite, 3 no GPU with --require-gpu\n",
            eval_options_help());
}

typedef struct {
    char dir[4096];
    char name[256];
} problem_dir;

static int by_name(const void *a, const void *b)
{
    return strcmp(((const problem_dir *)a)->name, ((const problem_dir *)b)->name);
}

static problem_dir *list_problems(const char *root, const char *filter, size_t *count)
{
    DIR *d = opendir(root);
    if (!d) {
        fprintf(stderr, "kreward suite: cannot open %s: %s\n", root, strerror(errno));
        return NULL;
    }
    problem_dir *list = NULL;
    size_t n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.' || (filter && !strstr(e->d_name, filter)))
            continue;
        char probe[4400];
        snprintf(probe, sizeof probe, "%s/%s/problem.json", root, e->d_name);
        if (access(probe, R_OK) != 0)
            continue;
        problem_dir *grown = realloc(list, (n + 1) * sizeof *grown);
        if (!grown)
            break;
        list = grown;
        snprintf(list[n].dir, sizeof list[n].dir, "%s/%s", root, e->d_name);
        snprintf(list[n].name, sizeof list[n].name, "%s", e->d_name);
        n++;
    }
    closedir(d);
    qsort(list, n, sizeof *list, by_name);
    *count = n;
    return list;
}

/* The worker: evaluate one candidate, write its report as JSON, exit. */
static void worker(const eval_args *a, const char *problem_path, const char *cand_path,
                   const char *cand_name, int fd)
{
    kr_context *ctx = cli_context(a->cache_dir, 0);
    kr_problem *p = NULL;
    kr_report *r = NULL;
    eval_setup s;
    size_t len;
    char *src = cli_read_file(cand_path, &len);
    if (kr_report_new(&r) != KR_OK)
        _exit(EXIT_INTERNAL);
    int rc = kr_problem_load(&p, ctx, problem_path);
    if (rc == KR_OK && src && eval_prepare(ctx, a, &s) == 0) {
        s.eval.name = cand_name;
        /* the candidate's device printf must not reach the suite's table */
        fflush(stdout);
        dup2(STDERR_FILENO, STDOUT_FILENO);
        kr_evaluate(r, ctx, p, src, len, &s.eval);
        eval_release(&s);
    } else {
        kr_report_set_verdict(r, KR_VERDICT_ERROR);
        kr_report_set_text(r, "message", src ? kr_context_errmsg(ctx) : "cannot read the candidate");
    }
    char *json = NULL;
    kr_report_json(&json, r);
    size_t n = json ? strlen(json) : 0, off = 0;
    while (off < n) {
        ssize_t w = write(fd, json + off, n - off);
        if (w <= 0)
            break;
        off += (size_t)w;
    }
    _exit(0); /* no teardown: a poisoned context must not block the exit */
}

/* Runs a worker; returns its report as JSON, or a synthesized one when the
 * worker died or ran out of time. */
static json_t *run_worker(const eval_args *a, const char *problem_path, const char *cand_path,
                          const char *cand_name)
{
    int fds[2];
    if (pipe(fds) != 0)
        return NULL;
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        close(fds[0]);
        worker(a, problem_path, cand_path, cand_name, fds[1]);
    }
    close(fds[1]);
    char *buf = NULL;
    size_t len = 0, cap = 0;
    time_t deadline = time(NULL) + WORKER_TIMEOUT_S;
    int timed_out = 0;
    for (;;) {
        struct pollfd pfd = {fds[0], POLLIN, 0};
        int left = (int)(deadline - time(NULL));
        if (left <= 0 || poll(&pfd, 1, left * 1000) == 0) {
            timed_out = 1;
            kill(pid, SIGKILL);
            break;
        }
        if (len + 65536 > cap) {
            char *grown = realloc(buf, cap = cap * 2 + 65536);
            if (!grown)
                break;
            buf = grown;
        }
        ssize_t got = read(fds[0], buf + len, cap - len - 1);
        if (got <= 0)
            break;
        len += (size_t)got;
    }
    close(fds[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    json_t *report = buf && len ? json_loadb(buf, len, 0, NULL) : NULL;
    free(buf);
    if (report)
        return report;
    report = json_object();
    json_object_set_new(report, "verdict", json_string(timed_out ? "timeout" : "error"));
    char msg[200];
    if (timed_out)
        snprintf(msg, sizeof msg, "the worker ran past %d s and was killed", WORKER_TIMEOUT_S);
    else if (WIFSIGNALED(status))
        snprintf(msg, sizeof msg, "the worker died of signal %d", WTERMSIG(status));
    else
        snprintf(msg, sizeof msg, "the worker exited with %d without a report", WEXITSTATUS(status));
    json_t *texts = json_object();
    json_object_set_new(texts, "message", json_string(msg));
    json_object_set_new(report, "texts", texts);
    json_object_set_new(report, "metrics", json_object());
    return report;
}

static double metric(json_t *report, const char *key)
{
    json_t *v = json_object_get(json_object_get(report, "metrics"), key);
    return json_is_number(v) ? json_number_value(v) : NAN;
}

typedef struct {
    size_t total, as_expected, not_run;
    int no_gpu;
} tally;

static void print_row(const char *problem, const char *cand, json_t *report, const char *expect,
                      int match)
{
    const char *verdict = json_string_value(json_object_get(report, "verdict"));
    double t = metric(report, "time_us"), s = metric(report, "speedup");
    double lo = metric(report, "speedup_low"), hi = metric(report, "speedup_high");
    json_t *reward = json_object_get(json_object_get(report, "reward"), "total");
    char tbuf[32] = "-", sbuf[48] = "-", rbuf[32] = "-";
    if (!isnan(t))
        snprintf(tbuf, sizeof tbuf, "%.1f us", t);
    if (!isnan(s))
        snprintf(sbuf, sizeof sbuf, "%.2fx [%.2f, %.2f]", s, lo, hi);
    if (json_is_number(reward))
        snprintf(rbuf, sizeof rbuf, "%.3g", json_number_value(reward));
    printf("%-22s %-16s %-14s %-12s %-22s %-8s %s\n", problem, cand, verdict ? verdict : "?", tbuf,
           sbuf, rbuf, match ? "ok" : expect ? "UNEXPECTED" : "");
}

static int check(json_t *report, const char *expect, int faster, tally *t)
{
    const char *verdict = json_string_value(json_object_get(report, "verdict"));
    if (verdict && !strcmp(verdict, "not_run")) {
        t->not_run++;
        t->no_gpu = 1;
        return 1; /* compiled and checked: as much as can be known here */
    }
    int ok = verdict && expect && !strcmp(verdict, expect);
    if (ok && faster)
        ok = metric(report, "speedup") > 1.0;
    return ok;
}

static int run_problem(const eval_args *a, const problem_dir *pd, FILE *jsonl, size_t *done,
                       size_t total, tally *t)
{
    char manifest_path[4200], problem_path[4200];
    snprintf(manifest_path, sizeof manifest_path, "%s/manifest.json", pd->dir);
    snprintf(problem_path, sizeof problem_path, "%s/problem.json", pd->dir);
    json_error_t err;
    json_t *manifest = json_load_file(manifest_path, 0, &err);
    json_t *cands = json_object_get(manifest, "candidates");
    if (!json_is_array(cands)) {
        fprintf(stderr, "kreward suite: %s: %s\n", manifest_path,
                manifest ? "needs a \"candidates\" array" : err.text);
        json_decref(manifest);
        return -1;
    }
    for (size_t i = 0; i < json_array_size(cands); i++) {
        json_t *c = json_array_get(cands, i);
        const char *file = json_string_value(json_object_get(c, "file"));
        const char *expect = json_string_value(json_object_get(c, "expect"));
        int faster = json_is_true(json_object_get(c, "faster"));
        if (!file || !expect || !kr_verdict_from_name(expect)) {
            fprintf(stderr, "kreward suite: %s: candidates[%zu] needs \"file\" and a verdict in "
                    "\"expect\"\n", manifest_path, i);
            json_decref(manifest);
            return -1;
        }
        char cand_path[4400];
        snprintf(cand_path, sizeof cand_path, "%s/%s", pd->dir, file);
        const char *base = strrchr(file, '/') ? strrchr(file, '/') + 1 : file;
        if (isatty(2))
            fprintf(stderr, "\r[%zu/%zu] %s / %s ...\033[K", *done + 1, total, pd->name, base);
        json_t *report = run_worker(a, problem_path, cand_path, base);
        if (isatty(2))
            fprintf(stderr, "\r\033[K");
        int match = report && check(report, expect, faster, t);
        t->total++;
        t->as_expected += match;
        print_row(pd->name, base, report, expect, match);
        fflush(stdout);
        if (jsonl && report) {
            json_t *line = json_object();
            json_object_set_new(line, "problem", json_string(pd->name));
            json_object_set_new(line, "candidate", json_string(file));
            json_object_set_new(line, "expect", json_string(expect));
            json_object_set_new(line, "as_expected", json_boolean(match));
            json_object_set(line, "report", report);
            char *text = json_dumps(line, JSON_COMPACT);
            fprintf(jsonl, "%s\n", text ? text : "{}");
            free(text);
            json_decref(line);
        }
        json_decref(report);
        (*done)++;
    }
    json_decref(manifest);
    return 0;
}

static size_t count_candidates(const problem_dir *list, size_t n)
{
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        char path[4200];
        snprintf(path, sizeof path, "%s/manifest.json", list[i].dir);
        json_t *m = json_load_file(path, 0, NULL);
        total += json_array_size(json_object_get(m, "candidates"));
        json_decref(m);
    }
    return total;
}

int cmd_suite(int argc, char **argv)
{
    eval_args a;
    memset(&a, 0, sizeof a);
    const char *dir = NULL, *jsonl_path = NULL, *filter = NULL;
    enum { OPT_JSONL = CLI_OPT, OPT_FILTER };
    static const struct option own[] = {
        {"jsonl", required_argument, NULL, OPT_JSONL},
        {"filter", required_argument, NULL, OPT_FILTER},
        {NULL, 0, NULL, 0},
    };
    cli_parser p;
    cli_parser_init(&p, "kreward suite", "", own, eval_options);
    const char *v;
    for (int c; (c = eval_next(&p, argc, argv, &v, &a)) != CLI_END;) {
        switch (c) {
        case CLI_HELP:
            usage(stdout);
            return EXIT_OK;
        case OPT_JSONL:
            jsonl_path = v;
            break;
        case OPT_FILTER:
            filter = v;
            break;
        case CLI_ARG:
            if (dir) {
                cli_bad(&p, "one DIR only ('%s' is extra)", v);
                return EXIT_USAGE;
            }
            dir = v;
            break;
        default:
            return EXIT_USAGE;
        }
    }
    if (!dir) {
        usage(stderr);
        return EXIT_USAGE;
    }
    if (a.json)
        fprintf(stderr, "kreward suite: --json is for evaluate; use --jsonl OUT\n");
    /* workers share compiles through the disk cache */
    char cache[256];
    if (!a.cache_dir && !getenv("KREWARD_CACHE_DIR")) {
        snprintf(cache, sizeof cache, "/tmp/kreward-cache-%u", (unsigned)getuid());
        a.cache_dir = cache;
    }
    size_t n = 0;
    problem_dir *list = list_problems(dir, filter, &n);
    if (!list || n == 0) {
        fprintf(stderr, "kreward suite: no DIR/*/problem.json under %s\n", dir);
        free(list);
        return EXIT_USAGE;
    }
    FILE *jsonl = jsonl_path ? fopen(jsonl_path, "w") : NULL;
    if (jsonl_path && !jsonl) {
        fprintf(stderr, "kreward suite: cannot write %s\n", jsonl_path);
        free(list);
        return EXIT_USAGE;
    }
    printf("%-22s %-16s %-14s %-12s %-22s %-8s %s\n", "problem", "candidate", "verdict", "time",
           "speedup [95% CI]", "reward", "expected?");
    size_t total = count_candidates(list, n), done = 0;
    tally t = {0, 0, 0, 0};
    int bad = 0;
    for (size_t i = 0; i < n; i++)
        bad |= run_problem(&a, &list[i], jsonl, &done, total, &t) != 0;
    if (jsonl)
        fclose(jsonl);
    printf("\n%zu candidates in %zu problems: %zu as expected", t.total, n, t.as_expected);
    if (t.total > t.as_expected)
        printf(", %zu NOT", t.total - t.as_expected);
    printf("\n");
    if (t.no_gpu)
        printf("No usable NVIDIA GPU here: %zu candidates were compiled and their launch plans "
               "checked; verification and timing need an NVIDIA GPU ('kreward info' says why).\n",
               t.not_run);
    free(list);
    if (bad)
        return EXIT_USAGE;
    if (t.no_gpu && a.require_gpu)
        return EXIT_ENVIRONMENT;
    return t.as_expected == t.total ? EXIT_OK : EXIT_CANDIDATE;
}
