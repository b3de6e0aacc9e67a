/* The compile cache: memory LRU, disk entries, corruption, several processes. */
#include "helpers.h"

#include "common/cache.h"

#include <sys/wait.h>
#include <unistd.h>

static const char *SRC =
    "extern \"C\" __global__ void inc(int* x, int n) { if (threadIdx.x < n) x[threadIdx.x]++; }\n";

static kr_program *compile(kr_context *ctx, const char *const *defines, size_t ndef)
{
    kr_compile_options o;
    kr_compile_options_init(&o, KR_COMPILE_OPTIONS_VERSION);
    o.defines = defines;
    o.num_defines = ndef;
    kr_program *p = NULL;
    int rc = kr_compile(&p, ctx, SRC, 0, &o);
    if (rc != KR_OK)
        fail_msg("compile: %s", kr_context_errmsg(ctx));
    return p;
}

static void memory_hit_and_miss(void **state)
{
    (void)state;
    kr_context *ctx = test_context(NULL);
    kr_program *a = compile(ctx, NULL, 0);
    kr_program *b = compile(ctx, NULL, 0);
    const char *def[] = {"X=1"};
    kr_program *c = compile(ctx, def, 1);
    assert_int_equal(kr_program_cache_result(a), KR_CACHE_MISS);
    assert_int_equal(kr_program_cache_result(b), KR_CACHE_MEMORY);
    assert_int_equal(kr_program_cache_result(c), KR_CACHE_MISS);
    assert_string_equal(kr_program_hash(a), kr_program_hash(b));
    assert_string_not_equal(kr_program_hash(a), kr_program_hash(c));
    size_t la, lb;
    const void *ia = image_of(a, &la, NULL), *ib = image_of(b, &lb, NULL);
    assert_int_equal(la, lb);
    assert_memory_equal(ia, ib, la);
    assert_int_equal(kr_program_kernel_count(b), 1);
    /* a hit keeps the original compile time, not the lookup time */
    assert_true(kr_program_compile_seconds(b) == kr_program_compile_seconds(a));
    kr_program_free(a);
    kr_program_free(b);
    kr_program_free(c);
    kr_context_free(ctx);
}

static void no_cache_flag(void **state)
{
    (void)state;
    kr_context *ctx = test_context(NULL);
    kr_program_free(compile(ctx, NULL, 0));
    kr_compile_options o;
    kr_compile_options_init(&o, KR_COMPILE_OPTIONS_VERSION);
    o.flags = KR_COMPILE_NO_CACHE;
    kr_program *p = NULL;
    assert_int_equal(kr_compile(&p, ctx, SRC, 0, &o), KR_OK);
    assert_int_equal(kr_program_cache_result(p), KR_CACHE_SKIPPED);
    kr_program_free(p);
    kr_context_free(ctx);
}

static void lru_eviction(void **state)
{
    (void)state;
    struct kr__mem_cache *c = kr__mem_cache_new(100);
    kr__hash128 k1 = {1, 0}, k2 = {2, 0}, k3 = {3, 0}, k4 = {4, 0};
    char data[60];
    memset(data, 'x', sizeof data);
    assert_int_equal(kr__mem_cache_put(c, k1, data, 40), 0);
    assert_int_equal(kr__mem_cache_put(c, k2, data, 40), 0);
    void *blob;
    size_t len;
    /* touching k1 makes k2 the least recently used */
    assert_int_equal(kr__mem_cache_get(c, k1, &blob, &len), 1);
    free(blob);
    assert_int_equal(kr__mem_cache_put(c, k3, data, 40), 0);
    assert_int_equal(kr__mem_cache_get(c, k2, &blob, &len), 0);
    assert_int_equal(kr__mem_cache_get(c, k1, &blob, &len), 1);
    free(blob);
    assert_int_equal(kr__mem_cache_get(c, k3, &blob, &len), 1);
    assert_int_equal(len, 40);
    free(blob);
    uint64_t used, entries, budget;
    kr__mem_cache_stats(c, &used, &entries, &budget);
    assert_int_equal(used, 80);
    assert_int_equal(entries, 2);
    /* larger than the whole budget: not kept, nothing evicted */
    char big[200] = {0};
    assert_int_equal(kr__mem_cache_put(c, k4, big, sizeof big), 0);
    assert_int_equal(kr__mem_cache_get(c, k4, &blob, &len), 0);
    kr__mem_cache_stats(c, &used, &entries, &budget);
    assert_int_equal(entries, 2);
    kr__mem_cache_free(c);
}

static void disk_hit_across_contexts(void **state)
{
    (void)state;
    char *dir = test_tempdir();
    kr_context *a = test_context(dir);
    kr_program *p1 = compile(a, NULL, 0);
    assert_int_equal(kr_program_cache_result(p1), KR_CACHE_MISS);
    kr_context *b = test_context(dir);
    kr_program *p2 = compile(b, NULL, 0);
    assert_int_equal(kr_program_cache_result(p2), KR_CACHE_DISK);
    assert_string_equal(kr_program_kernel_name(p2, 0), "inc");
    kr_program *p3 = compile(b, NULL, 0);
    assert_int_equal(kr_program_cache_result(p3), KR_CACHE_MEMORY);
    kr_program_free(p1);
    kr_program_free(p2);
    kr_program_free(p3);
    kr_context_free(a);
    kr_context_free(b);
    test_rmtree(dir);
}

static void entry_path(const char *dir, const kr_program *p, char *out, size_t size)
{
    const char *hex = kr_program_hash(p);
    snprintf(out, size, "%s/%.2s/%s.krc", dir, hex, hex);
}

/* Damages the entry with `how` then checks a fresh context recompiles,
 * notes why, and leaves a valid entry behind. */
static void check_recovery(const char *dir, const char *path, const char *how)
{
    char cmd[8400];
    snprintf(cmd, sizeof cmd, how, path, path);
    assert_int_equal(system(cmd), 0);
    kr_context *c = test_context(dir);
    kr_program *p = compile(c, NULL, 0);
    assert_int_equal(kr_program_cache_result(p), KR_CACHE_MISS);
    assert_contains(kr_program_log(p), "disk cache entry ignored");
    kr_program_free(p);
    kr_context_free(c);
    kr_context *d = test_context(dir);
    p = compile(d, NULL, 0);
    assert_int_equal(kr_program_cache_result(p), KR_CACHE_DISK);
    kr_program_free(p);
    kr_context_free(d);
}

static void disk_corruption_detected(void **state)
{
    (void)state;
    char *dir = test_tempdir();
    kr_context *a = test_context(dir);
    kr_program *p = compile(a, NULL, 0);
    char path[4200];
    entry_path(dir, p, path, sizeof path);
    kr_program_free(p);
    kr_context_free(a);
    assert_int_equal(access(path, R_OK), 0);
    /* one flipped payload byte (checksum) */
    check_recovery(dir, path,
                   "printf '\\377' | dd of='%s' bs=1 seek=200 conv=notrunc status=none; : '%s'");
    /* truncated */
    check_recovery(dir, path, "truncate -s 100 '%s'; : '%s'");
    /* empty */
    check_recovery(dir, path, ": > '%s'; : '%s'");
    /* garbage header */
    check_recovery(dir, path, "printf 'JUNKJUNKJUNK' | dd of='%s' conv=notrunc status=none; : '%s'");
    test_rmtree(dir);
}

static void disk_shared_by_processes(void **state)
{
    (void)state;
    char *dir = test_tempdir();
    enum { WRITERS = 6, ROUNDS = 30 };
    kr__hash128 key = {0x1234, 0x5678};
    char payload[3000];
    for (size_t i = 0; i < sizeof payload; i++)
        payload[i] = (char)(i * 7);
    pid_t pids[WRITERS];
    for (int w = 0; w < WRITERS; w++) {
        pids[w] = fork();
        assert_true(pids[w] >= 0);
        if (pids[w] == 0) {
            int bad = 0;
            for (int r = 0; r < ROUNDS; r++) {
                char why[512];
                if (kr__disk_cache_put(dir, key, payload, sizeof payload, why, sizeof why) != 0)
                    bad = 1;
                void *blob = NULL;
                size_t len = 0;
                int g = kr__disk_cache_get(dir, key, &blob, &len, why, sizeof why);
                /* every read sees a whole, valid entry */
                if (g != KR__DISK_HIT || len != sizeof payload || memcmp(blob, payload, len) != 0)
                    bad = 1;
                free(blob);
            }
            _exit(bad);
        }
    }
    for (int w = 0; w < WRITERS; w++) {
        int status = 0;
        waitpid(pids[w], &status, 0);
        assert_true(WIFEXITED(status));
        assert_int_equal(WEXITSTATUS(status), 0);
    }
    char cmd[4300];
    snprintf(cmd, sizeof cmd, "test -z \"$(find '%s' -name '.tmp-*')\"", dir);
    assert_int_equal(system(cmd), 0); /* no temporary files left behind */
    test_rmtree(dir);
}

static void unwritable_dir_still_compiles(void **state)
{
    (void)state;
    kr_context *ctx = test_context("/proc/definitely/not/writable");
    kr_program *p = compile(ctx, NULL, 0);
    assert_int_equal(kr_program_cache_result(p), KR_CACHE_MISS);
    assert_contains(kr_program_log(p), "could not write the disk cache");
    kr_program_free(p);
    kr_context_free(ctx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(memory_hit_and_miss),
        cmocka_unit_test(no_cache_flag),
        cmocka_unit_test(lru_eviction),
        cmocka_unit_test(disk_hit_across_contexts),
        cmocka_unit_test(disk_corruption_detected),
        cmocka_unit_test(disk_shared_by_processes),
        cmocka_unit_test(unwritable_dir_still_compiles),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
