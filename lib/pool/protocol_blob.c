/* Blobs (protocol.h): sealed, read-only memfds that carry large data
 * beside a frame, so a peer cannot hand over a file it can still change. */
#include "pool/protocol_impl.h"
#include "kreward/common.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define BLOB_SEALS (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL)

static int write_all(int fd, const void *data, size_t len, char *why, size_t why_size)
{
    size_t done = 0;
    while (done < len) {
        ssize_t n = write(fd, (const char *)data + done, len - done);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            int e = n < 0 ? errno : ENOSPC;
            say(why, why_size, "writing a blob of %zu bytes: %s", len, strerror(e));
            return e == ENOSPC || e == ENOMEM ? KR_ENOMEM : KR_EIO;
        }
        done += (size_t)n;
    }
    return KR_OK;
}

int kr__blob_create(const char *name, const void *data, size_t len, int *fd_out, char *why,
                    size_t why_size)
{
    uint64_t n = len;
    return kr__blob_create_parts(name, &data, &n, 1, fd_out, why, why_size);
}

int kr__blob_create_parts(const char *name, const void *const *parts, const uint64_t *lens,
                          size_t n, int *fd_out, char *why, size_t why_size)
{
    *fd_out = -1;
    for (size_t i = 0; i < n; i++)
        if ((!parts[i] && lens[i]) || lens[i] > SIZE_MAX)
            return KR_EINVAL;
    char nm[200]; /* memfd names stop at 249 bytes */
    snprintf(nm, sizeof nm, "%s", name && *name ? name : "kreward-blob");
    int fd = memfd_create(nm, MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0) {
        int e = errno;
        say(why, why_size, "memfd_create: %s", strerror(e));
        return e == ENOSYS ? KR_EUNSUPPORTED : e == ENOMEM ? KR_ENOMEM : KR_EIO;
    }
    for (size_t i = 0; i < n; i++) {
        int rc = write_all(fd, parts[i], (size_t)lens[i], why, why_size);
        if (rc != KR_OK) {
            close(fd);
            return rc;
        }
    }
    if (fcntl(fd, F_ADD_SEALS, BLOB_SEALS) < 0) {
        say(why, why_size, "sealing a blob: %s", strerror(errno));
        close(fd);
        return KR_EIO;
    }
    *fd_out = fd;
    return KR_OK;
}

/* What a zero-length blob maps to: not NULL, so memcpy(dst, data, 0) is
 * defined; kr__blob_unmap knows it. */
static const unsigned char empty_blob[1];

int kr__blob_map(int fd, size_t expect_len, const void **data, size_t *len, char *why,
                 size_t why_size)
{
    *data = NULL;
    *len = 0;
    int seals = fcntl(fd, F_GET_SEALS);
    if (seals < 0) {
        say(why, why_size, "the blob is not a memfd (%s)", strerror(errno));
        return KR_EPARSE;
    }
    if ((seals & BLOB_SEALS) != BLOB_SEALS) {
        say(why, why_size, "the blob is not sealed (seals %#x, %#x wanted): its sender could "
            "still change it", (unsigned)seals, (unsigned)BLOB_SEALS);
        return KR_EPARSE;
    }
    struct stat st;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size < 0) {
        say(why, why_size, "the blob is not a regular memfd");
        return KR_EPARSE;
    }
    if ((uintmax_t)st.st_size > SIZE_MAX ||
        (expect_len != SIZE_MAX && (size_t)st.st_size != expect_len)) {
        say(why, why_size, "a blob of %jd bytes, %zu expected", (intmax_t)st.st_size, expect_len);
        return KR_EPARSE;
    }
    size_t n = (size_t)st.st_size;
    if (n == 0) {
        *data = empty_blob;
        return KR_OK;
    }
    void *p = mmap(NULL, n, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
        int e = errno;
        say(why, why_size, "mapping a blob of %zu bytes: %s", n, strerror(e));
        return e == ENOMEM ? KR_ENOMEM : KR_EIO;
    }
    *data = p;
    *len = n;
    return KR_OK;
}

int kr__blob_map_parts(int fd, const uint64_t *lens, size_t n, const void **data, size_t *len,
                       const void **parts, char *why, size_t why_size)
{
    uint64_t total = 0;
    for (size_t i = 0; i < n; i++) {
        if (lens[i] > UINT64_MAX - total) {
            say(why, why_size, "parts of more than 2^64 bytes");
            return KR_EPARSE;
        }
        total += lens[i];
    }
    if (total >= SIZE_MAX) {
        say(why, why_size, "a blob of %llu bytes does not fit this address space",
            (unsigned long long)total);
        return KR_ETOOBIG;
    }
    int rc = kr__blob_map(fd, (size_t)total, data, len, why, why_size);
    for (size_t i = 0, off = 0; rc == KR_OK && i < n; off += (size_t)lens[i], i++)
        parts[i] = (const unsigned char *)*data + off;
    return rc;
}

void kr__blob_unmap(const void *data, size_t len)
{
    if (data && len && data != empty_blob)
        munmap((void *)data, len);
}
