/* Shared helpers of the unit tests. */
#ifndef KR_TEST_HELPERS_H
#define KR_TEST_HELPERS_H

#include <kreward/kreward.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A context that never touches a GPU (unit tests run in CI without one),
 * targeting sm_90a; cache_dir may be NULL. */
static inline kr_context *test_context(const char *cache_dir)
{
    kr_context_options o;
    kr_context_options_init(&o, KR_CONTEXT_OPTIONS_VERSION);
    o.flags = KR_CONTEXT_NO_DEVICE;
    o.cache_dir = cache_dir;
    kr_context *ctx = NULL;
    assert_int_equal(kr_context_new(&ctx, &o), KR_OK);
    return ctx;
}

/* A fresh private directory under $TMPDIR; caller removes it with
 * test_rmtree. */
static inline char *test_tempdir(void)
{
    const char *base = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    size_t size = strlen(base) + 32;
    char *path = malloc(size);
    assert_non_null(path);
    snprintf(path, size, "%s/krtest-XXXXXX", base);
    assert_non_null(mkdtemp(path));
    return path;
}

/* Writes text to dir/name (a test's fixture file). */
static inline void test_write_file(const char *dir, const char *name, const char *text)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static inline void test_rmtree(char *path)
{
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", path);
    assert_int_equal(system(cmd), 0);
    free(path);
}

static inline char *kr__strdup_for_test(const char *s)
{
    char *p = malloc(strlen(s) + 1);
    strcpy(p, s);
    return p;
}

/* A new, empty report (the engine verbs write into one). */
static inline kr_report *test_report(void)
{
    kr_report *r = NULL;
    assert_int_equal(kr_report_new(&r), KR_OK);
    return r;
}

/* A program's image (len and kind may be NULL). */
static inline const void *image_of(const kr_program *prog, size_t *len, int *kind)
{
    const void *data = NULL;
    assert_int_equal(kr_program_binary(&data, len, kind, prog), KR_OK);
    return data;
}

static inline int contains(const char *haystack, const char *needle)
{
    return haystack && strstr(haystack, needle) != NULL;
}

#define assert_contains(h, n)                                                   \
    do {                                                                        \
        const char *h_ = (h);                                                   \
        if (!contains(h_, (n)))                                                 \
            fail_msg("expected \"%s\" in:\n%s", (n), h_ ? h_ : "(null)");       \
    } while (0)

#endif
