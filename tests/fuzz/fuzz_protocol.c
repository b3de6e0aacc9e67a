/* libFuzzer: any bytes a peer sends are a frame or an error, never a
 * crash, a leak (memory or descriptor) or a hang. The first byte picks the
 * mode, the rest is what the peer says:
 *   0x00-0x7f  kr__frame_decode on the bytes; a frame that decodes encodes
 *              back to one that decodes to the same type and body, and
 *              encoding is stable from then on
 *   0x80-0xff  the bytes through a socket pair into kr__frame_recv, frame
 *              after frame until one fails; bits 0-3: descriptors sent
 *              along (0-15, more than a frame may carry), bit 6: they are
 *              sealed memfd blobs (else /dev/null), bit 5: the bytes go in
 *              two writes split at the second byte, descriptors with the
 *              second. Every descriptor received is mapped as a blob, and
 *              none may be left open afterwards.
 * Bit 4 of either mode sets the first frame's checksum right before it is
 * read, so that mutated payloads reach the JSON parser. */
#include "kreward/common.h"
#include "pool/protocol.h"

#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <xxhash.h>

#define CHECK(c) ((c) ? (void)0 : abort())
#define FD_SCAN 256

static void decode_mode(const uint8_t *data, size_t size)
{
    uint16_t type;
    json_t *body = NULL;
    char why[256];
    if (kr__frame_decode(data, size, &type, &body, why, sizeof why) != KR_OK) {
        CHECK(body == NULL && type == 0 && why[0]);
        return;
    }
    void *a, *b;
    size_t alen, blen;
    CHECK(kr__frame_encode(type, body, &a, &alen, why, sizeof why) == KR_OK);
    uint16_t type2;
    json_t *body2 = NULL;
    CHECK(kr__frame_decode(a, alen, &type2, &body2, why, sizeof why) == KR_OK);
    CHECK(type2 == type && json_equal(body, body2));
    CHECK(kr__frame_encode(type2, body2, &b, &blen, why, sizeof why) == KR_OK);
    CHECK(alen == blen && memcmp(a, b, alen) == 0);
    free(a);
    free(b);
    json_decref(body);
    json_decref(body2);
}

static void send_bytes(int sock, const uint8_t *data, size_t size, const int *fds, int nfds)
{
    union {
        struct cmsghdr align;
        char bytes[CMSG_SPACE(sizeof(int) * 16)];
    } control;
    memset(&control, 0, sizeof control);
    struct iovec iov = {(void *)data, size};
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
    if (nfds) {
        m.msg_control = control.bytes;
        m.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)nfds);
        struct cmsghdr *c = CMSG_FIRSTHDR(&m);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)nfds);
        memcpy(CMSG_DATA(c), fds, sizeof(int) * (size_t)nfds);
    }
    /* never block: what does not fit in the socket is not sent */
    sendmsg(sock, &m, MSG_DONTWAIT | MSG_NOSIGNAL);
}

static void open_set(unsigned char open[FD_SCAN])
{
    for (int fd = 0; fd < FD_SCAN; fd++)
        open[fd] = fcntl(fd, F_GETFD) >= 0;
}

static void socket_mode(uint8_t mode, const uint8_t *data, size_t size)
{
    static int blob = -1, null_fd = -1;
    if (blob < 0) {
        char why[256];
        CHECK(kr__blob_create("fuzz", "blob", 4, &blob, why, sizeof why) == KR_OK);
        null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
        CHECK(null_fd >= 0);
    }
    int nfds = mode & 0x0f;
    int fds[16];
    for (int i = 0; i < nfds; i++)
        fds[i] = mode & 0x40 ? blob : null_fd;
    size_t split = 0;
    if (mode & 0x20 && size) {
        split = data[0] % size;
        data++;
        size--;
    }

    unsigned char before[FD_SCAN], after[FD_SCAN];
    open_set(before);
    int sv[2];
    CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
    if (split) {
        send_bytes(sv[0], data, split, NULL, 0);
        send_bytes(sv[0], data + split, size - split, fds, nfds);
    } else {
        send_bytes(sv[0], data, size, fds, nfds);
    }
    close(sv[0]); /* the reader meets the end of the stream, never a wait */

    for (int frames = 0; frames < 64; frames++) {
        kr__frame f;
        char why[256] = "";
        int rc = kr__frame_recv(sv[1], &f, 0, why, sizeof why);
        if (rc != KR_OK) {
            CHECK(f.body == NULL && f.num_fds == 0 && why[0]);
            CHECK(rc == KR_EPARSE || rc == KR_EIO || rc == KR_ETIMEOUT || rc == KR_ENOMEM);
            break;
        }
        CHECK(json_is_object(f.body) && f.type >= 1 && f.type <= KR__MSG_MAX);
        CHECK(f.num_fds <= KR__FRAME_MAX_FDS);
        for (size_t i = 0; i < f.num_fds; i++) {
            CHECK(fcntl(f.fds[i], F_GETFD) & FD_CLOEXEC);
            const void *m;
            size_t n;
            int ok = kr__blob_map(f.fds[i], SIZE_MAX, &m, &n, why, sizeof why) == KR_OK;
            CHECK(ok == (mode & 0x40 ? 1 : 0));
            if (ok) {
                CHECK(n == 4 && memcmp(m, "blob", 4) == 0);
                kr__blob_unmap(m, n);
            }
        }
        kr__frame_clear(&f);
    }
    close(sv[1]);
    open_set(after);
    CHECK(memcmp(before, after, sizeof before) == 0);
}

/* The first frame's checksum made right over the payload its header
 * announces (or what there is of it). */
static void fix_checksum(uint8_t *f, size_t size)
{
    if (size < KR__FRAME_HEADER)
        return;
    size_t len = (size_t)f[8] | (size_t)f[9] << 8 | (size_t)f[10] << 16 | (size_t)f[11] << 24;
    if (len > size - KR__FRAME_HEADER)
        len = size - KR__FRAME_HEADER;
    uint32_t sum = XXH32(f + KR__FRAME_HEADER, len, 0);
    for (int i = 0; i < 4; i++)
        f[12 + i] = (uint8_t)(sum >> (8 * i));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    uint8_t mode = data[0];
    uint8_t *copy = malloc(size);
    CHECK(copy != NULL);
    memcpy(copy, data + 1, size - 1);
    /* in socket mode with a split the frame starts after the split byte */
    size_t skip = (mode & 0xa0) == 0xa0 && size > 1 ? 1 : 0;
    if (mode & 0x10)
        fix_checksum(copy + skip, size - 1 - skip);
    if (mode & 0x80)
        socket_mode(mode, copy, size - 1);
    else
        decode_mode(copy, size - 1);
    free(copy);
    return 0;
}
