/* On-disk compile cache: one file per key under DIR/xx/<key>.krc.
 *
 * Writers create a temporary file in the same folder and rename it over the
 * final name, so a reader in another process sees either no file or a whole
 * one. Every read checks magic, format, key, length and an XXH3-128 checksum
 * of the payload: a truncated or corrupted entry is reported, never used. */
#include "common/cache.h"
#include "common/strbuf.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
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

int kr__disk_cache_get(const char *dir, kr__hash128 key, void **blob, size_t *len, char *why,
                       size_t why_size)
{
    char path[4096];
    kr__disk_cache_path(dir, key, path, sizeof path);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT ? KR__DISK_MISS : KR__DISK_ERROR;
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
    close(fd);
    char reason[200] = "short read";
    if (rd != 0 || check_entry(file, size, key, reason, sizeof reason) != 0) {
        free(file);
        snprintf(why, why_size, "%s: %s", path, reason);
        return KR__DISK_CORRUPT;
    }
    memmove(file, file + HEADER_SIZE, size - HEADER_SIZE);
    *blob = file;
    *len = size - HEADER_SIZE;
    return KR__DISK_HIT;
}

static int make_dirs(const char *path)
{
    char tmp[4096];
    kr__strlcpy(tmp, path, sizeof tmp);
    for (char *p = tmp + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(tmp, 0755) != 0 && errno != EEXIST)
            return -1;
        *p = '/';
    }
    return (mkdir(tmp, 0755) != 0 && errno != EEXIST) ? -1 : 0;
}

int kr__disk_cache_put(const char *dir, kr__hash128 key, const void *blob, size_t len, char *why,
                       size_t why_size)
{
    char path[4096], folder[4096], tmp[4200];
    kr__disk_cache_path(dir, key, path, sizeof path);
    kr__strlcpy(folder, path, sizeof folder);
    *strrchr(folder, '/') = '\0';
    if (make_dirs(folder) != 0) {
        snprintf(why, why_size, "cannot create %s: %s", folder, strerror(errno));
        return -1;
    }
    snprintf(tmp, sizeof tmp, "%s/.tmp-XXXXXX", folder);
    int fd = mkstemp(tmp);
    if (fd < 0) {
        snprintf(why, why_size, "cannot create a file in %s: %s", folder, strerror(errno));
        return -1;
    }
    unsigned char header[HEADER_SIZE];
    encode_header(header, key, blob, len);
    int ok = write_whole(fd, header, sizeof header) == 0 && write_whole(fd, blob, len) == 0;
    ok = ok && fchmod(fd, 0644) == 0;
    ok = (close(fd) == 0) && ok;
    if (!ok || rename(tmp, path) != 0) {
        snprintf(why, why_size, "cannot write %s: %s", path, strerror(errno));
        unlink(tmp);
        return -1;
    }
    return 0;
}
