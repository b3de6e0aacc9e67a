/* The disk cache's size cap: least recently used entries go first (a hit
 * refreshes its entry's mtime, cache_disk.c). Several processes may trim
 * one folder at once: an entry already gone is no error, and a reader that
 * opened an entry before it was removed still reads it whole. */
#include "common/cache.h"
#include "common/cache_disk_impl.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define STALE_TEMP_S 3600 /* a temporary file this old is a killed writer's */

uint64_t kr__disk_cache_max_bytes(void)
{
    const char *env = getenv("KREWARD_CACHE_MAX_BYTES");
    if (!env || !*env)
        return KR__DISK_CACHE_DEFAULT_MAX;
    char *end = NULL;
    errno = 0;
    unsigned long long v = strtoull(env, &end, 10);
    if (errno != 0 || end == env || env[0] == '-')
        return KR__DISK_CACHE_DEFAULT_MAX; /* unreadable: the default, never "no cap" */
    int shift = 0;
    switch (toupper((unsigned char)*end)) {
    case 'K': shift = 10; end++; break;
    case 'M': shift = 20; end++; break;
    case 'G': shift = 30; end++; break;
    default: break;
    }
    if (*end == 'i' || *end == 'I')
        end++;
    if (*end == 'B' || *end == 'b')
        end++;
    if (*end != '\0' || (shift && v > (UINT64_MAX >> shift)))
        return KR__DISK_CACHE_DEFAULT_MAX;
    return (uint64_t)v << shift;
}

typedef struct {
    char shard[3];
    char name[40];
    uint64_t bytes;
    struct timespec mtime;
} entry;

typedef struct {
    entry *items;
    size_t n, cap;
    uint64_t bytes;
} entries;

static int is_hex2(const char *s)
{
    return isxdigit((unsigned char)s[0]) && isxdigit((unsigned char)s[1]) && s[2] == '\0';
}

static int add(entries *e, const char *shard, const char *name, const struct stat *st)
{
    if (e->n == e->cap) {
        size_t cap = e->cap ? e->cap * 2 : 256;
        entry *grown = realloc(e->items, cap * sizeof *grown);
        if (!grown)
            return -1;
        e->items = grown;
        e->cap = cap;
    }
    entry *x = &e->items[e->n++];
    snprintf(x->shard, sizeof x->shard, "%s", shard);
    snprintf(x->name, sizeof x->name, "%s", name);
    x->bytes = (uint64_t)st->st_size;
    x->mtime = st->st_mtim;
    e->bytes += x->bytes;
    return 0;
}

/* The entries of one shard folder; stale temporary files are removed. */
static int scan_shard(int dirfd, const char *dir, const char *shard, entries *e)
{
    char why[512];
    int fd = kr__cache_subdir_open(dirfd, dir, shard, 0, why, sizeof why);
    if (fd < 0)
        return 0; /* gone, or not trusted: neither counted nor touched */
    DIR *d = fdopendir(fd);
    if (!d) {
        close(fd);
        return 0;
    }
    time_t now = time(NULL);
    int rc = 0;
    for (struct dirent *de; rc == 0 && (de = readdir(d)) != NULL;) {
        struct stat st;
        const char *n = de->d_name;
        size_t len = strlen(n);
        if (fstatat(fd, n, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode))
            continue;
        if (strncmp(n, ".tmp-", 5) == 0) {
            if (now - st.st_mtime > STALE_TEMP_S)
                unlinkat(fd, n, 0);
        } else if (len == 36 && strcmp(n + 32, ".krc") == 0) {
            rc = add(e, shard, n, &st);
        }
    }
    closedir(d);
    return rc;
}

static int older_first(const void *a, const void *b)
{
    const struct timespec *x = &((const entry *)a)->mtime, *y = &((const entry *)b)->mtime;
    if (x->tv_sec != y->tv_sec)
        return x->tv_sec < y->tv_sec ? -1 : 1;
    return (x->tv_nsec > y->tv_nsec) - (x->tv_nsec < y->tv_nsec);
}

int kr__disk_cache_evict(const char *dir, uint64_t max_bytes, uint64_t *bytes_after, char *why,
                         size_t why_size)
{
    int dirfd = kr__cache_dir_open(dir, 0, why, why_size);
    if (dirfd == KR__CACHE_DIR_MISSING) {
        if (bytes_after)
            *bytes_after = 0;
        return 0;
    }
    if (dirfd < 0)
        return -1;
    int listfd = dup(dirfd);
    DIR *d = listfd >= 0 ? fdopendir(listfd) : NULL;
    if (!d) {
        snprintf(why, why_size, "cannot list %s: %s", dir, strerror(errno));
        if (listfd >= 0)
            close(listfd);
        close(dirfd);
        return -1;
    }
    entries e = {NULL, 0, 0, 0};
    int rc = 0;
    for (struct dirent *de; rc == 0 && (de = readdir(d)) != NULL;)
        if (is_hex2(de->d_name))
            rc = scan_shard(dirfd, dir, de->d_name, &e);
    closedir(d);
    int removed = 0;
    if (rc != 0) {
        snprintf(why, why_size, "out of memory listing %s", dir);
        removed = -1;
    } else if (max_bytes > 0 && e.bytes > max_bytes) {
        /* down to 7/8 of the cap, so the next writes do not trim again at once */
        uint64_t target = max_bytes - max_bytes / 8;
        qsort(e.items, e.n, sizeof *e.items, older_first);
        for (size_t i = 0; i < e.n && e.bytes > target; i++) {
            char rel[64];
            snprintf(rel, sizeof rel, "%s/%s", e.items[i].shard, e.items[i].name);
            if (unlinkat(dirfd, rel, 0) == 0 || errno == ENOENT) {
                e.bytes -= e.items[i].bytes;
                removed++;
            }
        }
    }
    if (bytes_after)
        *bytes_after = e.bytes;
    free(e.items);
    close(dirfd);
    return removed;
}

/* Bytes this process wrote since it last trimmed; a process trims on its
 * first write (what others left may be over the cap) and then every 1/16 of
 * the cap, so a folder grows at most that much past it per writing process
 * between two scans. */
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t g_written;
static int g_scanned;

void kr__cache_after_write(const char *dir, uint64_t bytes)
{
    uint64_t cap = kr__disk_cache_max_bytes();
    if (cap == 0)
        return;
    pthread_mutex_lock(&g_lock);
    g_written += bytes;
    int due = !g_scanned || g_written >= cap / 16;
    if (due) {
        g_scanned = 1;
        g_written = 0;
    }
    pthread_mutex_unlock(&g_lock);
    char why[512];
    if (due)
        kr__disk_cache_evict(dir, cap, NULL, why, sizeof why); /* best effort: the entry is written */
}
