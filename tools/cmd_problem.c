/* `kreward problem show|check`: inspect a problem spec. */
#include "cli.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

enum { OPT_JSON = CLI_OPT, OPT_STATIC };

static const struct option show_options[] = {
    {"json", no_argument, NULL, OPT_JSON},
    {NULL, 0, NULL, 0},
};
static const struct option check_options[] = {
    {"static", no_argument, NULL, OPT_STATIC},
    {NULL, 0, NULL, 0},
};

static const struct verb {
    const char *name, *synopsis, *text;
    const struct option *options;
} verbs[] = {
    {"show", "FILE.json [--json]",
     "prints the parsed problem: its description, dims, tensors (dtype, role,\n"
     "shape, input distribution, tolerance), scalars, every case with its\n"
     "sizes and bytes, the timing case, the reference; as JSON with --json.\n",
     show_options},
    {"check", "FILE.json [--static]",
     "checks the problem: the spec parses, every shape evaluates in every\n"
     "case, the reference (and its fast kernel, reference.fast) compiles and\n"
     "its plan fits its kernels, the cases\n"
     "cover non-power-of-two shapes and small and large sizes; and on the GPU\n"
     "its soundness: the reference runs on every case, its outputs are not\n"
     "near-constant, and do-nothing kernels (zeros, a constant, a copy of an\n"
     "input) fail the tolerance, so the problem cannot be passed by doing\n"
     "nothing. --static: the checks that need no GPU only. Exit 0 when every\n"
     "check asked for passed, 1 when the problem is unsound, 2 for a malformed\n"
     "spec, 3 when the soundness checks could not run here (no GPU: add\n"
     "--static to ask for the others only).\n",
     check_options},
};
#define NUM_VERBS (sizeof verbs / sizeof verbs[0])

/* One verb's usage, or (only == NULL) every verb's. */
static void usage(FILE *to, const struct verb *only)
{
    for (size_t i = 0; i < NUM_VERBS; i++)
        if (!only || only == &verbs[i])
            fprintf(to, "%s kreward problem %s %s\n", i && !only ? "      " : "usage:",
                    verbs[i].name, verbs[i].synopsis);
    for (size_t i = 0; i < NUM_VERBS; i++) {
        if (only && only != &verbs[i])
            continue;
        fprintf(to, "\n");
        /* every verb: "show   prints ...", its lines under each other */
        for (const char *line = verbs[i].text; *line;) {
            size_t len = strcspn(line, "\n");
            if (only)
                fprintf(to, "%.*s\n", (int)len, line);
            else
                fprintf(to, "%-6s %.*s\n", line == verbs[i].text ? verbs[i].name : "", (int)len,
                        line);
            line += len + (line[len] == '\n');
        }
    }
    if (!only)
        fprintf(to, "\n'kreward problem VERB --help' describes one verb.\n");
}

static void human_bytes(uint64_t b, char *out, size_t size)
{
    const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = (double)b;
    int u = 0;
    while (v >= 1024 && u < 4) {
        v /= 1024;
        u++;
    }
    snprintf(out, size, u ? "%.1f %s" : "%.0f %s", v, units[u]);
}

static const char *role_text(int role)
{
    return role == KR_ROLE_IN ? "in" : role == KR_ROLE_OUT ? "out" : "inout";
}

/* A JSON scalar as the spec wrote it: "M", 4096, 1e-05. */
static void print_value(const json_t *v)
{
    if (json_is_string(v))
        printf("%s", json_string_value(v));
    else if (json_is_integer(v))
        printf("%lld", (long long)json_integer_value(v));
    else if (json_is_number(v))
        printf("%g", json_number_value(v));
    else if (json_is_boolean(v))
        printf("%s", json_is_true(v) ? "true" : "false");
    else
        printf("?");
}

/* "[M, N]" */
static void print_shape(const json_t *shape)
{
    size_t i;
    json_t *d;
    printf("[");
    json_array_foreach(shape, i, d) {
        printf("%s", i ? ", " : "");
        print_value(d);
    }
    printf("]");
}

/* "uniform low=-100 high=100": the input distribution of an input tensor */
static void print_init(const json_t *init)
{
    const char *key;
    json_t *v;
    const char *dist = json_string_value(json_object_get(init, "dist"));
    printf("init %s", dist ? dist : "default");
    json_object_foreach((json_t *)init, key, v) {
        if (strcmp(key, "dist") == 0)
            continue;
        printf(" %s=", key);
        print_value(v);
    }
}

/* Everything from the problem's JSON (kr_problem_json): shapes as the spec
 * wrote them, input distributions, scalars; sizes from the accessors. */
static void show_text(const kr_problem *p)
{
    char *text = NULL;
    kr_problem_json(&text, p);
    json_t *spec = text ? json_loads(text, 0, NULL) : NULL;
    kr_free(text);
    printf("%s (hash %s)\n", kr_problem_name(p), kr_problem_hash(p));
    const char *description = json_string_value(json_object_get(spec, "description"));
    if (description && *description)
        printf("  %s\n", description);
    printf("  dims:");
    for (size_t d = 0; d < kr_problem_dim_count(p); d++)
        printf(" %s", kr_problem_dim_name(p, d));
    printf("\n  tensors:\n");
    json_t *tensors = json_object_get(spec, "tensors");
    for (size_t t = 0; t < kr_problem_tensor_count(p); t++) {
        json_t *tj = json_array_get(tensors, t);
        printf("    %-12s %-8s %-5s ", kr_problem_tensor_name(p, t),
               kr_dtype_name(kr_problem_tensor_dtype(p, t)), role_text(kr_problem_tensor_role(p, t)));
        print_shape(json_object_get(tj, "shape"));
        if (json_object_get(tj, "init")) {
            printf("  ");
            print_init(json_object_get(tj, "init"));
        }
        if (kr_problem_tensor_role(p, t) != KR_ROLE_IN) {
            double rtol, atol;
            kr_problem_tensor_tolerance(&rtol, &atol, p, t);
            printf("  rtol %g atol %g", rtol, atol);
        }
        printf("\n");
    }
    json_t *scalars = json_object_get(spec, "scalars");
    if (json_array_size(scalars)) {
        printf("  scalars:\n");
        size_t i;
        json_t *sc;
        json_array_foreach(scalars, i, sc) {
            const char *name = json_string_value(json_object_get(sc, "name"));
            const char *dtype = json_string_value(json_object_get(sc, "dtype"));
            printf("    %-12s %-8s ", name ? name : "?", dtype ? dtype : "?");
            print_value(json_object_get(sc, "value"));
            printf("\n");
        }
    }
    printf("  cases (* = timing):\n");
    for (size_t c = 0; c < kr_problem_case_count(p); c++) {
        printf("   %c %-12s", c == kr_problem_timing_case(p) ? '*' : ' ', kr_problem_case_name(p, c));
        for (size_t d = 0; d < kr_problem_dim_count(p); d++)
            printf(" %s=%lld", kr_problem_dim_name(p, d), (long long)kr_problem_case_dim(p, c, d));
        uint64_t total = 0;
        for (size_t t = 0; t < kr_problem_tensor_count(p); t++)
            total += kr_problem_tensor_bytes(p, t, c);
        char hb[32];
        human_bytes(total, hb, sizeof hb);
        printf("   (%s in all)\n", hb);
    }
    const char *ref = json_string_value(json_object_get(json_object_get(spec, "reference"),
                                                        "source"));
    if (kr_problem_reference_kind(p) == KR_REFERENCE_GOLDEN)
        printf("  reference: golden outputs from the caller\n");
    else
        printf("  reference: CUDA source + plan%s%s%s\n", ref ? " (" : "", ref ? ref : "",
               ref ? ")" : "");
    json_t *fast = json_object_get(json_object_get(spec, "reference"), "fast");
    if (fast)
        printf("  fast reference: %s (expected outputs once it agrees; the reference stays the "
               "baseline)\n", json_string_value(fast) ? json_string_value(fast) : "?");
    json_decref(spec);
}

static int is_pow2(int64_t v)
{
    return v > 0 && (v & (v - 1)) == 0;
}

/* Static soundness: a problem that only has power-of-two shapes, or one
 * size, lets shape-specific shortcuts pass. */
static int coverage_warnings(const kr_problem *p)
{
    int warnings = 0, odd = 0;
    uint64_t smallest = UINT64_MAX, largest = 0;
    for (size_t c = 0; c < kr_problem_case_count(p); c++) {
        uint64_t total = 0;
        for (size_t t = 0; t < kr_problem_tensor_count(p); t++)
            total += kr_problem_tensor_bytes(p, t, c);
        smallest = total < smallest ? total : smallest;
        largest = total > largest ? total : largest;
        for (size_t d = 0; d < kr_problem_dim_count(p); d++)
            odd |= !is_pow2(kr_problem_case_dim(p, c, d));
    }
    if (kr_problem_case_count(p) < 2) {
        printf("warning: only one case; use several shapes so no kernel can overfit one\n");
        warnings++;
    }
    if (!odd) {
        printf("warning: every dim of every case is a power of two; add a case with odd sizes\n");
        warnings++;
    }
    if (largest < 4 * smallest) {
        printf("warning: the cases are all about the same size; add a small and a large one\n");
        warnings++;
    }
    return warnings;
}

/* Whether the problem names a fast kernel (reference.fast). */
static int has_fast(const kr_problem *p)
{
    char *text = NULL;
    kr_problem_json(&text, p);
    json_t *spec = text ? json_loads(text, 0, NULL) : NULL;
    int fast = json_object_get(json_object_get(spec, "reference"), "fast") != NULL;
    json_decref(spec);
    kr_free(text);
    return fast;
}

static int check_reference(kr_context *ctx, const char *path, int static_only)
{
    kr_problem *p = NULL;
    int rc = kr_problem_load(&p, ctx, path);
    if (rc != KR_OK) {
        cli_report_error(ctx, "problem", rc);
        return cli_exit_for(rc);
    }
    printf("ok: %s parses; %zu cases, %zu tensors; every shape evaluates\n", path,
           kr_problem_case_count(p), kr_problem_tensor_count(p));
    int exit_code = EXIT_OK;
    if (kr_problem_reference_kind(p) == KR_REFERENCE_SOURCE) {
        rc = kr_problem_check_reference(ctx, p);
        if (rc != KR_OK) {
            cli_report_error(ctx, "reference", rc);
            exit_code = EXIT_CANDIDATE;
        } else {
            printf("%s\n", has_fast(p) ? "ok: the reference and its fast kernel compile, and their "
                                          "plans fit their kernels in every case"
                                        : "ok: the reference compiles and its plan fits its "
                                          "kernels in every case");
        }
    }
    coverage_warnings(p);
    if (exit_code == EXIT_OK && static_only) {
        printf("not asked for (--static): the soundness checks on the GPU\n");
    } else if (exit_code == EXIT_OK) {
        char *summary = NULL;
        rc = kr_problem_sanity(&summary, ctx, p);
        if (summary)
            printf("%s", summary);
        kr_free(summary);
        if (rc == KR_ENODEVICE) {
            /* asked for and not done: not a pass (exit 3, what this
             * machine lacks); --static asks for what can be done here */
            fprintf(stderr, "kreward problem check: the soundness checks could not run: running "
                    "the reference and the do-nothing kernels needs an NVIDIA GPU (%s); "
                    "--static checks the rest only\n", kr_context_errmsg(ctx));
            exit_code = EXIT_ENVIRONMENT;
        } else if (rc != KR_OK) {
            cli_report_error(ctx, "problem", rc);
            exit_code = rc == KR_EUNSOUND ? EXIT_CANDIDATE : cli_exit_for(rc);
        }
    }
    kr_problem_free(p);
    return exit_code;
}

static int show_problem(kr_context *ctx, const char *path, int json)
{
    kr_problem *p = NULL;
    int rc = kr_problem_load(&p, ctx, path);
    if (rc != KR_OK) {
        cli_report_error(ctx, "problem", rc);
        return cli_exit_for(rc);
    }
    if (json) {
        char *text = NULL;
        kr_problem_json(&text, p);
        printf("%s\n", text ? text : "{}");
        kr_free(text);
    } else {
        show_text(p);
    }
    kr_problem_free(p);
    return EXIT_OK;
}

int cmd_problem(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr, NULL);
        return EXIT_USAGE;
    }
    if (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0) {
        usage(stdout, NULL);
        return EXIT_OK;
    }
    const struct verb *verb = NULL;
    for (size_t i = 0; i < NUM_VERBS; i++)
        if (strcmp(argv[1], verbs[i].name) == 0)
            verb = &verbs[i];
    if (!verb) {
        fprintf(stderr, "kreward problem: '%s' is not a verb: show or check, then options "
                "(see 'kreward problem --help')\n", argv[1]);
        return EXIT_USAGE;
    }
    char cmd[64];
    snprintf(cmd, sizeof cmd, "kreward problem %s", verb->name);
    cli_parser parser;
    cli_parser_init(&parser, cmd, "", verb->options, NULL);
    const char *file = NULL, *v;
    int json = 0, static_only = 0;
    for (int c; (c = cli_next(&parser, argc - 1, argv + 1, &v)) != CLI_END;) {
        if (c == CLI_HELP) {
            usage(stdout, verb);
            return EXIT_OK;
        } else if (c == OPT_JSON) {
            json = 1;
        } else if (c == OPT_STATIC) {
            static_only = 1;
        } else if (c == CLI_ARG && !file) {
            file = v;
        } else {
            if (c == CLI_ARG)
                cli_bad(&parser, "one FILE only ('%s' is extra)", v);
            return EXIT_USAGE;
        }
    }
    if (!file) {
        usage(stderr, verb);
        return EXIT_USAGE;
    }
    kr_context *ctx = cli_context(NULL, 0);
    int exit_code = verb == &verbs[0] ? show_problem(ctx, file, json)
                                      : check_reference(ctx, file, static_only);
    kr_context_free(ctx);
    return exit_code;
}
