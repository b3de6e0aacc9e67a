/* The compile cache: memory LRU, disk entries, corruption, several
 * processes, trust (owners, modes, planted entries) and the size cap. */
#include "helpers.h"

#include "common/cache.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
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

static mode_t mode_of(const char *path)
{
    struct stat st;
    assert_int_equal(lstat(path, &st), 0);
    return st.st_mode & 07777;
}

/* Compiles SRC with a context on `dir`; returns its cache result and
 * leaves the program's log (notes) in log. */
static int compile_in(const char *dir, char *log, size_t size)
{
    kr_context *c = test_context(dir);
    kr_program *p = compile(c, NULL, 0);
    int result = kr_program_cache_result(p);
    snprintf(log, size, "%s", kr_program_log(p) ? kr_program_log(p) : "");
    kr_program_free(p);
    kr_context_free(c);
    return result;
}

static void disk_dirs_created_private(void **state)
{
    (void)state;
    char *base = test_tempdir();
    char dir[4200], log[8192];
    snprintf(dir, sizeof dir, "%s/a/b/cache", base);
    umask(022);
    assert_int_equal(compile_in(dir, log, sizeof log), KR_CACHE_MISS);
    char path[4400];
    snprintf(path, sizeof path, "%s/a", base);
    assert_int_equal(mode_of(path), 0700); /* the parents it made too */
    assert_int_equal(mode_of(dir), 0700);
    kr_context *c = test_context(dir);
    kr_program *p = compile(c, NULL, 0);
    assert_int_equal(kr_program_cache_result(p), KR_CACHE_DISK);
    entry_path(dir, p, path, sizeof path);
    assert_int_equal(mode_of(path), 0600);
    *strrchr(path, '/') = '\0';
    assert_int_equal(mode_of(path), 0700); /* the shard folder */
    kr_program_free(p);
    kr_context_free(c);
    test_rmtree(base);
}

/* A folder anyone may write: neither read nor written, even with a valid
 * entry planted in it, and the compile still succeeds. */
static void disk_world_writable_dir_refused(void **state)
{
    (void)state;
    char *good = test_tempdir(), *open_dir = test_tempdir();
    char log[8192], cmd[9000];
    assert_int_equal(compile_in(good, log, sizeof log), KR_CACHE_MISS);
    snprintf(cmd, sizeof cmd, "cp -a '%s'/. '%s'/", good, open_dir);
    assert_int_equal(system(cmd), 0); /* a whole valid entry, planted */
    assert_int_equal(chmod(open_dir, 0777), 0);
    assert_int_equal(compile_in(open_dir, log, sizeof log), KR_CACHE_MISS);
    assert_contains(log, "writable by everyone");
    assert_int_equal(chmod(open_dir, 0770), 0);
    assert_int_equal(compile_in(open_dir, log, sizeof log), KR_CACHE_MISS);
    assert_contains(log, "writable by its group");
    /* once private again it is used */
    assert_int_equal(chmod(open_dir, 0700), 0);
    assert_int_equal(compile_in(open_dir, log, sizeof log), KR_CACHE_DISK);
    test_rmtree(good);
    test_rmtree(open_dir);
}

/* A folder of another user is refused: as root, a temporary folder given to
 * nobody (65534); otherwise "/", which is root's. */
static void disk_foreign_owner_refused(void **state)
{
    (void)state;
    char *dir = test_tempdir();
    char log[8192];
    const char *foreign = "/";
    if (geteuid() == 0) {
        assert_int_equal(chown(dir, 65534, 65534), 0);
        foreign = dir;
    }
    char why[512] = "";
    void *blob = NULL;
    size_t len = 0;
    kr__hash128 key = {1, 2};
    assert_int_equal(kr__disk_cache_get(foreign, key, &blob, &len, why, sizeof why),
                     KR__DISK_ERROR);
    assert_contains(why, "belongs to uid");
    assert_int_not_equal(kr__disk_cache_put(foreign, key, "x", 1, why, sizeof why), 0);
    assert_contains(why, "belongs to uid");
    assert_int_equal(compile_in(foreign, log, sizeof log), KR_CACHE_MISS);
    assert_contains(log, "belongs to uid");
    if (geteuid() == 0) {
        char cmd[4300];
        snprintf(cmd, sizeof cmd, "test -z \"$(ls -A '%s')\"", dir);
        assert_int_equal(system(cmd), 0); /* nothing was written there */
    }
    test_rmtree(dir);
}

/* Damages the entry at `path` with `plant` (a shell command, %s the path),
 * checks the next compile does not load it and says why (`expect`), and that
 * the entry written over it is then a hit. */
static void check_planted(const char *dir, const char *path, const char *plant, const char *expect)
{
    char cmd[9000], log[8192];
    snprintf(cmd, sizeof cmd, plant, path, path);
    assert_int_equal(system(cmd), 0);
    assert_int_equal(compile_in(dir, log, sizeof log), KR_CACHE_MISS);
    assert_contains(log, "disk cache entry ignored");
    assert_contains(log, expect);
    assert_int_equal(compile_in(dir, log, sizeof log), KR_CACHE_DISK);
    assert_int_equal(mode_of(path), 0600);
}

static void disk_planted_entry_refused(void **state)
{
    (void)state;
    char *dir = test_tempdir();
    kr_context *c = test_context(dir);
    kr_program *p = compile(c, NULL, 0);
    const char *defs[] = {"OTHER=1"};
    kr_program *q = compile(c, defs, 1);
    char path[4200], other[4200];
    entry_path(dir, p, path, sizeof path);
    entry_path(dir, q, other, sizeof other);
    kr_program_free(p);
    kr_program_free(q);
    kr_context_free(c);
    /* a whole, valid entry of another program under this key's name: its
     * checksum is right, the key it holds is not */
    char plant[8800];
    snprintf(plant, sizeof plant, "cp '%s' '%%s'; : '%%s'", other);
    check_planted(dir, path, plant, "entry holds another key");
    /* a valid entry that others may write */
    check_planted(dir, path, "chmod 0666 '%s'; : '%s'", "writable by everyone");
    check_planted(dir, path, "chmod 0620 '%s'; : '%s'", "writable by its group");
    /* a link to a valid entry elsewhere (opened with O_NOFOLLOW) */
    snprintf(plant, sizeof plant, "cp '%s' '%s.elsewhere' && ln -sf '%s.elsewhere' '%%s'; : '%%s'",
             path, dir, dir);
    check_planted(dir, path, plant, "Too many levels of symbolic links");
    if (geteuid() == 0)
        check_planted(dir, path, "chown 65534:65534 '%s'; : '%s'", "belongs to uid 65534");
    test_rmtree(dir);
}

/* Puts n entries of `size` bytes with keys {i, 7}, the i-th modified i
 * minutes after a fixed day, so the LRU order is known. */
static void put_aged(const char *dir, int n, size_t size)
{
    char *payload = calloc(1, size);
    assert_non_null(payload);
    for (int i = 0; i < n; i++) {
        kr__hash128 key = {(uint64_t)i, 7};
        char why[512], path[4200];
        payload[0] = (char)i;
        assert_int_equal(kr__disk_cache_put(dir, key, payload, size, why, sizeof why), 0);
        kr__disk_cache_path(dir, key, path, sizeof path);
        struct timespec t[2] = {{1700000000 + 60 * i, 0}, {1700000000 + 60 * i, 0}};
        assert_int_equal(utimensat(AT_FDCWD, path, t, 0), 0);
    }
    free(payload);
}

static int has_entry(const char *dir, uint64_t i)
{
    kr__hash128 key = {i, 7};
    char path[4200];
    kr__disk_cache_path(dir, key, path, sizeof path);
    return access(path, F_OK) == 0;
}

static void disk_cap_evicts_least_recently_used(void **state)
{
    (void)state;
    unsetenv("KREWARD_CACHE_MAX_BYTES"); /* puts trim to the default 1 GiB: nothing */
    char *dir = test_tempdir();
    const size_t size = 10000 - 64; /* 10000 bytes with the header */
    put_aged(dir, 20, size);
    /* entry 2 is read: a hit makes it the most recently used */
    kr__hash128 key = {2, 7};
    void *blob = NULL;
    size_t len = 0;
    char why[512];
    assert_int_equal(kr__disk_cache_get(dir, key, &blob, &len, why, sizeof why), KR__DISK_HIT);
    free(blob);
    uint64_t left = 0;
    /* under the cap: nothing goes */
    assert_int_equal(kr__disk_cache_evict(dir, 200000, &left, why, sizeof why), 0);
    assert_int_equal(left, 200000);
    /* a cap of 100000: down to 7/8 of it, 8 entries (80000 bytes) */
    assert_int_equal(kr__disk_cache_evict(dir, 100000, &left, why, sizeof why), 12);
    assert_int_equal(left, 80000);
    for (uint64_t i = 0; i < 20; i++) {
        int kept = i == 2 || i >= 13; /* the hit and the 7 newest */
        if (has_entry(dir, i) != kept)
            fail_msg("entry %llu %s", (unsigned long long)i, kept ? "evicted" : "kept");
    }
    /* a cap of 0 is no cap */
    assert_int_equal(kr__disk_cache_evict(dir, 0, &left, why, sizeof why), 0);
    assert_int_equal(left, 80000);
    test_rmtree(dir);
}

static void disk_cap_from_environment(void **state)
{
    (void)state;
    const struct {
        const char *env;
        uint64_t want;
    } cases[] = {
        {NULL, KR__DISK_CACHE_DEFAULT_MAX}, {"", KR__DISK_CACHE_DEFAULT_MAX},
        {"0", 0}, {"123456", 123456}, {"64K", 64 << 10}, {"512MiB", 512ull << 20},
        {"2G", 2ull << 30}, {"3gb", 3ull << 30}, {"lots", KR__DISK_CACHE_DEFAULT_MAX},
        {"-5", KR__DISK_CACHE_DEFAULT_MAX}, {"10X", KR__DISK_CACHE_DEFAULT_MAX},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        if (cases[i].env)
            setenv("KREWARD_CACHE_MAX_BYTES", cases[i].env, 1);
        else
            unsetenv("KREWARD_CACHE_MAX_BYTES");
        if (kr__disk_cache_max_bytes() != cases[i].want)
            fail_msg("KREWARD_CACHE_MAX_BYTES=%s: %llu", cases[i].env ? cases[i].env : "(unset)",
                     (unsigned long long)kr__disk_cache_max_bytes());
    }
    /* writes keep a folder within the cap: each of these is over 1/16 of it */
    char *dir = test_tempdir();
    setenv("KREWARD_CACHE_MAX_BYTES", "50000", 1);
    put_aged(dir, 20, 10000 - 64);
    uint64_t left = 0;
    char why[512];
    assert_int_equal(kr__disk_cache_evict(dir, 1ull << 40, &left, why, sizeof why), 0);
    assert_true(left <= 50000);
    assert_true(left >= 40000);
    assert_true(has_entry(dir, 19)); /* the newest stays */
    unsetenv("KREWARD_CACHE_MAX_BYTES");
    test_rmtree(dir);
}

/* A killed writer's temporary file goes after an hour; a fresh one (a
 * writer at work) stays. */
static void disk_stale_temporaries_removed(void **state)
{
    (void)state;
    char *dir = test_tempdir();
    put_aged(dir, 1, 100);
    kr__hash128 key = {0, 7};
    char path[4200], old_tmp[4300], new_tmp[4300], why[512];
    kr__disk_cache_path(dir, key, path, sizeof path);
    *strrchr(path, '/') = '\0';
    snprintf(old_tmp, sizeof old_tmp, "%s/.tmp-1-1-1", path);
    snprintf(new_tmp, sizeof new_tmp, "%s/.tmp-2-2-2", path);
    for (int i = 0; i < 2; i++) {
        int fd = open(i ? new_tmp : old_tmp, O_WRONLY | O_CREAT, 0600);
        assert_true(fd >= 0);
        close(fd);
    }
    struct timespec t[2] = {{time(NULL) - 7200, 0}, {time(NULL) - 7200, 0}};
    assert_int_equal(utimensat(AT_FDCWD, old_tmp, t, 0), 0);
    uint64_t left = 0;
    assert_int_equal(kr__disk_cache_evict(dir, 1ull << 30, &left, why, sizeof why), 0);
    assert_int_equal(left, 164);
    assert_int_not_equal(access(old_tmp, F_OK), 0);
    assert_int_equal(access(new_tmp, F_OK), 0);
    test_rmtree(dir);
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
        cmocka_unit_test(disk_dirs_created_private),
        cmocka_unit_test(disk_world_writable_dir_refused),
        cmocka_unit_test(disk_foreign_owner_refused),
        cmocka_unit_test(disk_planted_entry_refused),
        cmocka_unit_test(disk_cap_evicts_least_recently_used),
        cmocka_unit_test(disk_cap_from_environment),
        cmocka_unit_test(disk_stale_temporaries_removed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
