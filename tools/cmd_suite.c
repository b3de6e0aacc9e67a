/* `kreward suite DIR`: every problem x candidate of a suite directory,
 * evaluated through a worker pool (sandboxed processes: a candidate that
 * faults or hangs costs a worker, never the suite or a report), against the
 * expectations in each problem's manifest.json. With --html OUT, the JSONL
 * (--jsonl's, or a temporary one) becomes a page once the suite is done:
 * `python3 -m kreward.pages`, run as a child (cli_run_python). */
#include "cli_eval.h"

#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void usage(FILE *to)
{
    fprintf(to, "usage: kreward suite DIR [--jsonl OUT] [--html OUT] [--filter TEXT] [options]\n"
                "       (a KernelBench folder, DIR/candidates/manifest.json, or --reference:\n"
                "       python3 -m kreward.kernelbench suite --help)\n\n"
                "Evaluates every candidate listed in DIR/*/manifest.json against its problem\n"
                "(DIR/*/problem.json), each in its own worker process, and prints a table:\n"
                "problem, candidate, verdict, time, speedup with its interval, reward, and\n"
                "whether the verdict is the one the manifest expects. A progress line goes to\n"
                "stderr when it is a terminal.\n\noptions:\n"
                "  --jsonl OUT            also write one JSON line per candidate to OUT\n"
                "  --html OUT             also write the run as an HTML page to OUT (python3 -m\n"
                "                         kreward.pages; works offline; docs/pages.md)\n"
                "  --filter TEXT          only problems whose name contains TEXT\n%s"
                "\nexit: 0 every verdict as expected (or not run without a GPU), 1 otherwise,\n"
                "2 usage or a malformed suite, 3 no GPU with --require-gpu; a page that could\n"
                "not be written says so, and exits non-zero (the suite's code when it has one)\n",
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
    /* never NULL once the directory opened: NULL means it could not be read */
    problem_dir *list = malloc(sizeof *list);
    size_t n = 0;
    struct dirent *e;
    while (list && (e = readdir(d))) {
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
    if (!list) {
        fprintf(stderr, "kreward suite: out of memory\n");
        return NULL;
    }
    qsort(list, n, sizeof *list, by_name);
    *count = n;
    return list;
}

/* Says why no problem was found: none there, or none the filter matches. */
static void no_problem(const char *dir, const char *filter)
{
    size_t all = 0;
    problem_dir *every = filter ? list_problems(dir, NULL, &all) : NULL;
    free(every);
    if (all)
        fprintf(stderr, "kreward suite: no problem under %s matches the filter '%s' (none of its "
                "%zu problems has '%s' in its name)\n", dir, filter, all, filter);
    else
        fprintf(stderr, "kreward suite: no DIR/*/problem.json under %s\n", dir);
}

/* One candidate of the suite: where it is, what it must get, its ticket. */
typedef struct {
    char problem[256];
    char file[512];
    char expect[32];
    int faster;
    uint64_t ticket;
    int submitted;
} entry;

typedef struct {
    entry *items;
    size_t count, cap;
    kr_problem **problems;
    size_t num_problems;
} suite;

/* The report of a candidate, as JSON, from the pool (every candidate gets
 * one, whatever happened to its worker). */
static json_t *collect(kr_pool *pool, const entry *e)
{
    kr_report *r = NULL;
    if (!e->submitted || kr_pool_wait(&r, pool, e->ticket, -1) != KR_OK || !r)
        return NULL;
    char *text = NULL;
    kr_report_json(&text, r);
    json_t *report = text ? json_loads(text, 0, NULL) : NULL;
    kr_free(text);
    kr_report_free(r);
    return report;
}

static double metric(json_t *report, const char *key)
{
    json_t *v = json_object_get(json_object_get(report, "metrics"), key);
    return json_is_number(v) ? json_number_value(v) : NAN;
}

typedef struct {
    size_t total, as_expected, unexpected, not_run;
} tally;

/* A candidate's outcome against its manifest. NOT_RUN: compiled and plan
 * checked, as much as can be known without a GPU: neither as expected nor
 * not. */
enum { MATCH, UNEXPECTED, NOT_RUN };

static const char *outcome_text(int outcome)
{
    return outcome == MATCH ? "ok" : outcome == NOT_RUN ? "not run" : "UNEXPECTED";
}

static void print_row(const char *problem, const char *cand, json_t *report, int outcome)
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
           sbuf, rbuf, outcome_text(outcome));
}

static int check(json_t *report, const char *expect, int faster)
{
    const char *verdict = json_string_value(json_object_get(report, "verdict"));
    /* not run: it compiled and its plan fits; a candidate expected to fail
     * there (compile_error, invalid_plan) did not, and that is known here */
    if (verdict && !strcmp(verdict, "not_run"))
        return !strcmp(expect, "compile_error") || !strcmp(expect, "invalid_plan") ? UNEXPECTED
                                                                                  : NOT_RUN;
    int ok = verdict && expect && !strcmp(verdict, expect);
    if (ok && faster)
        ok = metric(report, "speedup") > 1.0;
    return ok ? MATCH : UNEXPECTED;
}

static entry *add_entry(suite *st)
{
    if (st->count == st->cap) {
        size_t cap = st->cap ? st->cap * 2 : 64;
        entry *grown = realloc(st->items, cap * sizeof *grown);
        if (!grown)
            return NULL;
        st->items = grown;
        st->cap = cap;
    }
    entry *e = &st->items[st->count++];
    memset(e, 0, sizeof *e);
    return e;
}

/* Loads a problem and queues every candidate its manifest lists. */
static int submit_problem(kr_context *ctx, kr_pool *pool, const eval_setup *s,
                          const problem_dir *pd, suite *st)
{
    char manifest_path[4200], problem_path[4200];
    snprintf(manifest_path, sizeof manifest_path, "%s/manifest.json", pd->dir);
    snprintf(problem_path, sizeof problem_path, "%s/problem.json", pd->dir);
    json_error_t err;
    json_t *manifest = json_load_file(manifest_path, 0, &err);
    json_t *cands = json_object_get(manifest, "candidates");
    kr_problem *p = NULL;
    if (!json_is_array(cands) || kr_problem_load(&p, ctx, problem_path) != KR_OK) {
        fprintf(stderr, "kreward suite: %s: %s\n", json_is_array(cands) ? problem_path : manifest_path,
                json_is_array(cands) ? kr_context_errmsg(ctx)
                : manifest ? "needs a \"candidates\" array" : err.text);
        json_decref(manifest);
        return -1;
    }
    st->problems[st->num_problems++] = p; /* lives until the suite is collected */
    for (size_t i = 0; i < json_array_size(cands); i++) {
        json_t *c = json_array_get(cands, i);
        const char *file = json_string_value(json_object_get(c, "file"));
        const char *expect = json_string_value(json_object_get(c, "expect"));
        if (!file || !expect || !kr_verdict_from_name(expect)) {
            fprintf(stderr, "kreward suite: %s: candidates[%zu] needs \"file\" and a verdict in "
                    "\"expect\"\n", manifest_path, i);
            json_decref(manifest);
            return -1;
        }
        entry *e = add_entry(st);
        if (!e)
            return -1;
        snprintf(e->problem, sizeof e->problem, "%s", pd->name);
        snprintf(e->file, sizeof e->file, "%s", file);
        snprintf(e->expect, sizeof e->expect, "%s", expect);
        e->faster = json_is_true(json_object_get(c, "faster"));
        char cand_path[4400];
        snprintf(cand_path, sizeof cand_path, "%s/%s", pd->dir, file);
        const char *base = strrchr(file, '/') ? strrchr(file, '/') + 1 : file;
        size_t len;
        char *src = cli_read_file(cand_path, &len);
        if (src) {
            kr_job job = eval_job(s, p, src, len, base);
            e->submitted = kr_pool_submit(&e->ticket, pool, &job) == KR_OK;
            free(src);
        }
    }
    json_decref(manifest);
    return 0;
}

static void print_entry(const entry *e, json_t *report, FILE *jsonl, tally *t)
{
    const char *base = strrchr(e->file, '/') ? strrchr(e->file, '/') + 1 : e->file;
    int outcome = report ? check(report, e->expect, e->faster) : UNEXPECTED;
    t->total++;
    t->as_expected += outcome == MATCH;
    t->unexpected += outcome == UNEXPECTED;
    t->not_run += outcome == NOT_RUN;
    print_row(e->problem, base, report, outcome);
    fflush(stdout);
    if (jsonl) {
        /* a candidate without a report (unreadable, or its evaluation lost)
         * has a line too: the page shows every row of the table */
        json_t *lost = report ? NULL
                              : json_pack("{s:i, s:s, s:[], s:{}, s:{s:s}}", "format", 1, "verdict",
                                          "error", "flags", "metrics", "texts", "message",
                                          "no report: the candidate could not be read, or its "
                                          "evaluation was lost (see the suite's stderr)");
        json_t *line = json_object();
        json_object_set_new(line, "problem", json_string(e->problem));
        json_object_set_new(line, "candidate", json_string(e->file));
        json_object_set_new(line, "expect", json_string(e->expect));
        json_object_set_new(line, "as_expected", json_boolean(outcome == MATCH));
        json_object_set_new(line, "not_run", json_boolean(outcome == NOT_RUN));
        json_object_set(line, "report", report ? report : lost);
        char *text = json_dumps(line, JSON_COMPACT);
        fprintf(jsonl, "%s\n", text ? text : "{}");
        free(text);
        json_decref(line);
        json_decref(lost);
    }
}

/* A KernelBench suite folder (examples/kernelbench's layout:
 * DIR/candidates/manifest.json naming .py problems and ModelNew candidates),
 * or --reference (each KernelBench problem's Model as its own candidate):
 * kreward.kernelbench's. */
static int kernelbench_suite(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--reference") == 0)
            return 1;
        char probe[4400];
        if (argv[i][0] == '-' ||
            snprintf(probe, sizeof probe, "%s/candidates/manifest.json", argv[i]) >=
                (int)sizeof probe)
            continue;
        if (access(probe, R_OK) == 0)
            return 1;
    }
    return 0;
}

/* Before the suite runs: can the page be written at the end (a Python with
 * kreward.pages, a folder that takes OUT)? */
static int page_preflight(const char *html)
{
    const char *args[] = {"--preflight", html, NULL};
    return cli_run_python("suite", "kreward.pages", args, "the kreward package");
}

/* A temporary JSONL for --html without --jsonl; its path in `path`. */
static FILE *temp_jsonl(char *path, size_t size)
{
    const char *dir = getenv("TMPDIR");
    snprintf(path, size, "%s/kreward-suite-XXXXXX.jsonl", dir && *dir ? dir : "/tmp");
    int fd = mkstemps(path, 6);
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (!f) {
        fprintf(stderr, "kreward suite: cannot make a temporary file for the page: %s\n",
                strerror(errno));
        if (fd >= 0) {
            close(fd);
            unlink(path);
        }
    }
    return f;
}

/* The page of the suite's JSONL; returns the exit code the suite ends
 * with: its own, or the page's failure when the suite had none. */
static int write_page(const char *jsonl_path, const char *html, const char *dir, int suite_rc)
{
    char title[4400];
    snprintf(title, sizeof title, "kreward suite %s", dir);
    const char *args[] = {jsonl_path, "--html", html, "--title", title, "--source", title,
                          "--quiet", NULL};
    int rc = cli_run_python("suite", "kreward.pages", args, "the kreward package");
    if (rc == EXIT_OK)
        return suite_rc;
    fprintf(stderr, "kreward suite: the page %s was not written (kreward.pages exited %d)%s\n",
            html, rc, suite_rc ? "; the suite's own exit code stands" : "");
    return suite_rc ? suite_rc : rc;
}

int cmd_suite(int argc, char **argv)
{
    if (kernelbench_suite(argc, argv))
        return cli_exec_python("suite", "kreward.kernelbench", "suite", argc, argv,
                               "torch (ModelNew candidates)");
    eval_args a;
    memset(&a, 0, sizeof a);
    const char *dir = NULL, *jsonl_path = NULL, *filter = NULL, *html = NULL;
    enum { OPT_JSONL = CLI_OPT, OPT_FILTER, OPT_HTML };
    static const struct option own[] = {
        {"jsonl", required_argument, NULL, OPT_JSONL},
        {"html", required_argument, NULL, OPT_HTML},
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
        case OPT_HTML:
            html = v;
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
    size_t n = 0;
    problem_dir *list = list_problems(dir, filter, &n);
    if (list && n == 0)
        no_problem(dir, filter);
    if (!list || n == 0) {
        free(list);
        return EXIT_USAGE;
    }
    if (html) {
        int rc = page_preflight(html);
        if (rc != EXIT_OK) {
            fprintf(stderr, "kreward suite: not run: the page %s could not be written\n", html);
            free(list);
            return rc;
        }
    }
    char temp_path[4200] = "";
    FILE *jsonl = jsonl_path ? fopen(jsonl_path, "w") : NULL;
    if (jsonl_path && !jsonl) {
        fprintf(stderr, "kreward suite: cannot write %s\n", jsonl_path);
        free(list);
        return EXIT_USAGE;
    }
    if (html && !jsonl) {
        jsonl = temp_jsonl(temp_path, sizeof temp_path);
        if (!jsonl) {
            free(list);
            return EXIT_INTERNAL;
        }
        jsonl_path = temp_path;
    }
    /* every candidate runs in a sandboxed worker process of one pool (a
     * GPU worker per GPU, compile workers on the CPUs); this process holds
     * the problems and the reward */
    kr_context *ctx = cli_context(a.cache_dir, 1);
    eval_setup s;
    int no_gpu = 0;
    kr_pool *pool = eval_prepare(ctx, &a, &s) == 0 ? eval_pool(&a, &no_gpu) : NULL;
    if (!pool) {
        kr_context_free(ctx);
        free(list);
        if (jsonl)
            fclose(jsonl);
        if (temp_path[0])
            unlink(temp_path);
        if (html)
            fprintf(stderr, "kreward suite: no page written: nothing was evaluated\n");
        return a.require_gpu ? EXIT_ENVIRONMENT : EXIT_INTERNAL;
    }
    suite st = {NULL, 0, 0, calloc(n, sizeof(kr_problem *)), 0};
    int bad = !st.problems;
    for (size_t i = 0; i < n && !bad; i++)
        bad |= submit_problem(ctx, pool, &s, &list[i], &st) != 0;
    printf("%-22s %-16s %-14s %-12s %-22s %-8s %s\n", "problem", "candidate", "verdict", "time",
           "speedup [95% CI]", "reward", "expected?");
    tally t = {0, 0, 0, 0};
    for (size_t i = 0; i < st.count; i++) {
        if (isatty(2))
            fprintf(stderr, "\r[%zu/%zu] %s / %s ...\033[K", i + 1, st.count, st.items[i].problem,
                    st.items[i].file);
        json_t *report = collect(pool, &st.items[i]);
        if (isatty(2))
            fprintf(stderr, "\r\033[K");
        print_entry(&st.items[i], report, jsonl, &t);
        json_decref(report);
    }
    kr_pool_free(pool);
    eval_release(&s);
    for (size_t i = 0; i < st.num_problems; i++)
        kr_problem_free(st.problems[i]);
    free(st.problems);
    free(st.items);
    kr_context_free(ctx);
    if (jsonl)
        fclose(jsonl);
    printf("\n%zu candidates in %zu problems: %zu as expected", t.total, n, t.as_expected);
    if (t.unexpected)
        printf(", %zu NOT", t.unexpected);
    if (t.not_run)
        printf(", %zu not run", t.not_run);
    printf("\n");
    if (t.not_run)
        printf("No usable NVIDIA GPU here: %zu candidates were compiled and their launch plans "
               "checked; verification and timing need an NVIDIA GPU ('kreward info' says why).\n",
               t.not_run);
    free(list);
    int rc = bad                          ? EXIT_USAGE
             : t.not_run && a.require_gpu ? EXIT_ENVIRONMENT
             : t.unexpected               ? EXIT_CANDIDATE
                                          : EXIT_OK;
    if (html) {
        rc = write_page(jsonl_path, html, dir, rc);
        if (temp_path[0])
            unlink(temp_path);
    }
    return rc;
}
