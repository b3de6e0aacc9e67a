/* On-disk compile cache: one file per key under DIR/xx/<key>.krc.
 *
 * Writers create a temporary file in the same folder and rename it over the
 * final name, so a reader in another process sees either no file or a whole
 * one. Every read checks that the folders and the file are this user's and
 * writable by no one else (cache_disk_dir.c: another user cannot plant an
 * entry), then magic, format, key, length and an XXH3-128 checksum of the
 * payload: a truncated, corrupted or foreign entry is reported, never used.
 * The checksum catches damage, not forgery: forgery is kept out by the
 * ownership checks. */
#include "common/cache.h"
#include "common/cache_disk_impl.h"
#include "common/strbuf.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define MAGIC "KRCACHE1"
#define FORMAT 1u
#define HEADER_SIZE 64u
#define MAX_PAYLOAD ((uint64_t)1 << 30)

static void put_u64(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static uint64_t get_u64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

void kr__disk_cache_path(const char *dir, kr__hash128 key, char *out, size_t size)
{
    char hex[33];
    kr__hash128_hex(key, hex);
    snprintf(out, size, "%s/%.2s/%s.krc", dir, hex, hex);
}

static void encode_header(unsigned char h[HEADER_SIZE], kr__hash128 key, const void *blob,
                          size_t len)
{
    memset(h, 0, HEADER_SIZE);
    memcpy(h, MAGIC, 8);
    h[8] = (unsigned char)FORMAT;
    put_u64(h + 16, key.lo);
    put_u64(h + 24, key.hi);
    put_u64(h + 32, len);
    kr__hash128 sum = kr__hash128_of(blob, len);
    put_u64(h + 40, sum.lo);
    put_u64(h + 48, sum.hi);
}

static int read_whole(int fd, unsigned char *buf, size_t len)
{
    size_t got = 0;
    while (got < len) {
        ssize_t n = read(fd, buf + got, len - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        got += (size_t)n;
    }
    return 0;
}

static int write_whole(int fd, const void *data, size_t len)
{
    const unsigned char *p = data;
    while (len) {
        ssize_t n = write(fd, p, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

static int check_entry(const unsigned char *file, size_t size, kr__hash128 key, char *why,
                       size_t why_size)
{
    if (size < HEADER_SIZE) {
        snprintf(why, why_size, "truncated header (%zu bytes)", size);
        return -1;
    }
    if (memcmp(file, MAGIC, 8) != 0 || get_u64(file + 8) != FORMAT) {
        snprintf(why, why_size, "bad magic or format");
        return -1;
    }
    if (get_u64(file + 16) != key.lo || get_u64(file + 24) != key.hi) {
        snprintf(why, why_size, "entry holds another key");
        return -1;
    }
    uint64_t len = get_u64(file + 32);
    if (len != size - HEADER_SIZE) {
        snprintf(why, why_size, "payload is %zu bytes, header says %llu", size - HEADER_SIZE,
                 (unsigned long long)len);
        return -1;
    }
    kr__hash128 sum = kr__hash128_of(file + HEADER_SIZE, len);
    if (sum.lo != get_u64(file + 40) || sum.hi != get_u64(file + 48)) {
        snprintf(why, why_size, "checksum mismatch");
        return -1;
    }
    return 0;
}

/* The shard folder (DIR/xx) of a key, its file name, and a descriptor of
 * the shard opened through the trusted cache folder. */
static int open_shard(const char *dir, kr__hash128 key, int create, char name[40], char *why,
                      size_t why_size)
{
    char hex[33];
    kr__hash128_hex(key, hex);
    snprintf(name, 40, "%s.krc", hex);
    char shard[3] = {hex[0], hex[1], '\0'};
    int dirfd = kr__cache_dir_open(dir, create, why, why_size);
    if (dirfd < 0)
        return dirfd;
    int fd = kr__cache_subdir_open(dirfd, dir, shard, create, why, why_size);
    close(dirfd);
    return fd;
}

/* A hit makes its entry the most recently used (eviction goes by mtime); at
 * most once a minute, to keep hits free of metadata writes. */
static void touch(int fd, const struct stat *st)
{
    if (time(NULL) - st->st_mtime > 60)
        futimens(fd, NULL);
}

int kr__disk_cache_get(const char *dir, kr__hash128 key, void **blob, size_t *len, char *why,
                       size_t why_size)
{
    char path[4096], name[40];
    kr__disk_cache_path(dir, key, path, sizeof path);
    int shard = open_shard(dir, key, 0, name, why, why_size);
    if (shard == KR__CACHE_DIR_MISSING)
        return KR__DISK_MISS;
    if (shard < 0)
        return KR__DISK_ERROR;
    int fd = openat(shard, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    int err = errno;
    close(shard);
    if (fd < 0) {
        if (err == ENOENT)
            return KR__DISK_MISS;
        snprintf(why, why_size, "%s: %s", path, strerror(err));
        return KR__DISK_CORRUPT; /* a link or an unreadable file: replaced by the next write */
    }
    char what[4200];
    snprintf(what, sizeof what, "cache entry %s", path);
    if (kr__cache_trusted(fd, what, 0, why, why_size) != 0) {
        close(fd);
        return KR__DISK_CORRUPT;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || (uint64_t)st.st_size > MAX_PAYLOAD + HEADER_SIZE) {
        close(fd);
        snprintf(why, why_size, "%s: unreadable or oversized", path);
        return KR__DISK_CORRUPT;
    }
    size_t size = (size_t)st.st_size;
    unsigned char *file = malloc(size ? size : 1);
    if (!file) {
        close(fd);
        return KR__DISK_ERROR;
    }
    int rd = read_whole(fd, file, size);
    char reason[200] = "short read";
    if (rd != 0 || check_entry(file, size, key, reason, sizeof reason) != 0) {
        close(fd);
        free(file);
        snprintf(why, why_size, "%s: %s", path, reason);
        return KR__DISK_CORRUPT;
    }
    touch(fd, &st);
    close(fd);
    memmove(file, file + HEADER_SIZE, size - HEADER_SIZE);
    *blob = file;
    *len = size - HEADER_SIZE;
    return KR__DISK_HIT;
}

/* A fresh name for a temporary file ("O_EXCL" decides; a few tries). */
static int create_temp(int shard, char tmp[64])
{
    static unsigned counter;
    for (int attempt = 0; attempt < 16; attempt++) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        snprintf(tmp, 64, ".tmp-%ld-%u-%ld", (long)getpid(),
                 __atomic_fetch_add(&counter, 1u, __ATOMIC_RELAXED), (long)ts.tv_nsec);
        int fd = openat(shard, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd >= 0 || errno != EEXIST)
            return fd;
    }
    return -1;
}

int kr__disk_cache_put(const char *dir, kr__hash128 key, const void *blob, size_t len, char *why,
                       size_t why_size)
{
    char path[4096], name[40], tmp[64];
    kr__disk_cache_path(dir, key, path, sizeof path);
    int shard = open_shard(dir, key, 1, name, why, why_size);
    if (shard < 0) {
        if (shard == KR__CACHE_DIR_MISSING)
            snprintf(why, why_size, "%s vanished while it was being created", dir);
        return -1;
    }
    int fd = create_temp(shard, tmp);
    if (fd < 0) {
        snprintf(why, why_size, "cannot create a file beside %s: %s", path, strerror(errno));
        close(shard);
        return -1;
    }
    unsigned char header[HEADER_SIZE];
    encode_header(header, key, blob, len);
    int ok = write_whole(fd, header, sizeof header) == 0 && write_whole(fd, blob, len) == 0;
    ok = (close(fd) == 0) && ok;
    if (!ok || renameat(shard, tmp, shard, name) != 0) {
        snprintf(why, why_size, "cannot write %s: %s", path, strerror(errno));
        unlinkat(shard, tmp, 0);
        close(shard);
        return -1;
    }
    close(shard);
    kr__cache_after_write(dir, HEADER_SIZE + (uint64_t)len);
    return 0;
}
