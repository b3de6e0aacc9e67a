/* A reward-term plugin for the tests: one exported entry symbol listing two
 * terms. Built three times: as is; with PLUGIN_FORMAT raised to pretend it
 * was built against a newer libkreward (it must be refused); and with the
 * second term named like a built-in (SECOND_NAME), so registering fails
 * after the first term was taken (the library must forget that one before
 * unloading the plugin). */
#include <kreward/reward.h>

#include <stdio.h>

#ifndef PLUGIN_FORMAT
#define PLUGIN_FORMAT KR_PLUGIN_VERSION
#endif
#ifndef SECOND_NAME
#define SECOND_NAME "plugin_nan"
#endif

static int eval_lines(void *state, const kr_report *r, double *v, char *err, size_t n)
{
    (void)state;
    double lines;
    if (kr_report_get(&lines, r, "code_lines") != KR_OK) {
        snprintf(err, n, "no code_lines in the report");
        return 1;
    }
    *v = -lines / 1000;
    return 0;
}

static int eval_nan(void *state, const kr_report *r, double *v, char *err, size_t n)
{
    (void)state;
    (void)r;
    (void)err;
    (void)n;
    *v = 0.0 / 0.0;
    return 0;
}

static const kr_term_def terms[] = {
    {KR_TERM_VERSION, 0, "plugin_lines", "minus lines / 1000", NULL, eval_lines, NULL},
    {KR_TERM_VERSION, 0, SECOND_NAME, "always NaN (for the tests)", NULL, eval_nan, NULL},
};

static const kr_plugin_info info = {PLUGIN_FORMAT, 2, terms, sizeof(kr_term_def), "test plugin"};

__attribute__((visibility("default"))) const kr_plugin_info *kreward_plugin(void)
{
    return &info;
}
