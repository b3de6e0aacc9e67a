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

int kr__blob_create(const char *name, const void *data, size_t len, int *fd_out, char *why,
                    size_t why_size)
{
    *fd_out = -1;
    if (!data && len)
        return KR_EINVAL;
    char nm[200]; /* memfd names stop at 249 bytes */
    snprintf(nm, sizeof nm, "%s", name && *name ? name : "kreward-blob");
    int fd = memfd_create(nm, MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0) {
        int e = errno;
        say(why, why_size, "memfd_create: %s", strerror(e));
        return e == ENOSYS ? KR_EUNSUPPORTED : e == ENOMEM ? KR_ENOMEM : KR_EIO;
    }
    size_t done = 0;
    while (done < len) {
        ssize_t n = write(fd, (const char *)data + done, len - done);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            int e = n < 0 ? errno : ENOSPC;
            say(why, why_size, "writing a blob of %zu bytes: %s", len, strerror(e));
            close(fd);
            return e == ENOSPC || e == ENOMEM ? KR_ENOMEM : KR_EIO;
        }
        done += (size_t)n;
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

void kr__blob_unmap(const void *data, size_t len)
{
    if (data && len && data != empty_blob)
        munmap((void *)data, len);
}
