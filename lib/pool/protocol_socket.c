/* Frames on a stream socket (protocol.h): sending a frame with its
 * descriptors, receiving one within a deadline. The reader never reads past
 * the frame it is on and closes every descriptor of a frame it refuses. */
#include "pool/protocol_impl.h"
#include "common/clock.h"
#include "kreward/common.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <poll.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* Milliseconds for poll until the deadline (< 0: none), 0 once it passed. */
static int poll_ms(double deadline)
{
    if (deadline < 0)
        return -1;
    double left = ceil((deadline - kr__now()) * 1e3);
    return left <= 0 ? 0 : left >= INT_MAX ? INT_MAX : (int)left;
}

/* Waits until sock is ready for events; 1 when ready, 0 at the deadline. */
static int wait_for(int sock, short events, double deadline)
{
    for (;;) {
        int ms = poll_ms(deadline);
        struct pollfd p = {sock, events, 0};
        int n = poll(&p, 1, ms);
        if (n > 0)
            return 1; /* readable, writable, hung up or in error: the call says which */
        if (n == 0 && ms >= 0 && poll_ms(deadline) == 0)
            return 0;
        if (n < 0 && errno != EINTR)
            return 1; /* let the call itself fail with the reason */
    }
}

int kr__frame_send(int sock, uint16_t type, const json_t *body, const int *fds, size_t num_fds,
                   char *why, size_t why_size)
{
    return kr__frame_send_capped(sock, type, body, fds, num_fds, SIZE_MAX, why, why_size);
}

int kr__frame_send_capped(int sock, uint16_t type, const json_t *body, const int *fds,
                          size_t num_fds, size_t max_len, char *why, size_t why_size)
{
    if (num_fds > KR__FRAME_MAX_FDS || (num_fds && !fds)) {
        say(why, why_size, "%zu descriptors, at most %d per frame", num_fds, KR__FRAME_MAX_FDS);
        return KR_EINVAL;
    }
    for (size_t i = 0; i < num_fds; i++)
        if (fds[i] < 0 || fcntl(fds[i], F_GETFD) < 0) {
            say(why, why_size, "descriptor %zu of the frame (%d) is not open", i, fds[i]);
            return KR_EINVAL;
        }
    void *buf;
    size_t len;
    int rc = kr__frame_encode(type, body, &buf, &len, why, why_size);
    if (rc != KR_OK)
        return rc;
    if (len > max_len) {
        say(why, why_size, "a frame of %zu bytes, over the %zu allowed here", len, max_len);
        free(buf);
        return KR_ETOOBIG;
    }
    union {
        struct cmsghdr align;
        char bytes[CMSG_SPACE(sizeof(int) * KR__FRAME_MAX_FDS)];
    } control;
    size_t sent = 0;
    while (sent < len) {
        struct iovec iov = {(char *)buf + sent, len - sent};
        struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
        if (sent == 0 && num_fds) { /* the descriptors ride on the first byte */
            memset(&control, 0, sizeof control);
            m.msg_control = control.bytes;
            m.msg_controllen = CMSG_SPACE(sizeof(int) * num_fds);
            struct cmsghdr *c = CMSG_FIRSTHDR(&m);
            c->cmsg_level = SOL_SOCKET;
            c->cmsg_type = SCM_RIGHTS;
            c->cmsg_len = CMSG_LEN(sizeof(int) * num_fds);
            memcpy(CMSG_DATA(c), fds, sizeof(int) * num_fds);
        }
        ssize_t n = sendmsg(sock, &m, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n > 0) {
            sent += (size_t)n;
        } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            wait_for(sock, POLLOUT, -1);
        } else if (n < 0 && errno != EINTR) {
            int e = errno;
            if (e == EPIPE || e == ECONNRESET)
                say(why, why_size, "the peer closed the connection after %zu of %zu bytes of "
                    "a frame", sent, len);
            else
                say(why, why_size, "sending a frame: %s", strerror(e));
            free(buf);
            return KR_EIO;
        }
    }
    free(buf);
    return KR_OK;
}

/* A frame being read: where it stands, and the descriptors so far. */
typedef struct reader {
    int sock;
    double deadline;
    kr__frame *out;
    int started;   /* a byte of the frame came */
    int defective; /* descriptors beyond the limit or cut short */
    size_t extra_fds;
} reader;

static void take_fds(reader *r, struct msghdr *m)
{
    if (m->msg_flags & MSG_CTRUNC)
        r->defective = 1;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(m); c; c = CMSG_NXTHDR(m, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
            continue;
        size_t n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < n; i++) {
            int fd;
            memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
            if (r->out->num_fds < KR__FRAME_MAX_FDS) {
                r->out->fds[r->out->num_fds++] = fd;
            } else {
                close(fd);
                r->extra_fds++;
                r->defective = 1;
            }
        }
    }
}

/* Reads exactly len bytes of the frame (what names the part for messages). */
static int read_exact(reader *r, unsigned char *dst, size_t len, const char *what, char *why,
                      size_t why_size)
{
    size_t got = 0;
    while (got < len) {
        if (!wait_for(r->sock, POLLIN, r->deadline)) {
            say(why, why_size, "timed out with %zu of %zu %s bytes", got, len, what);
            return KR_ETIMEOUT;
        }
        union {
            struct cmsghdr align;
            char bytes[CMSG_SPACE(sizeof(int) * (KR__FRAME_MAX_FDS + 1))];
        } control;
        struct iovec iov = {dst + got, len - got};
        struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = control.bytes,
                           .msg_controllen = sizeof control.bytes};
        ssize_t n = recvmsg(r->sock, &m, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
        if (n < 0) {
            if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)
                continue;
            say(why, why_size, "reading a frame: %s", strerror(errno));
            return KR_EIO;
        }
        take_fds(r, &m);
        if (n == 0) {
            if (r->started)
                say(why, why_size, "the peer closed the connection after %zu of %zu %s bytes",
                    got, len, what);
            else
                say(why, why_size, "the peer closed the connection");
            return KR_EIO;
        }
        r->started = 1;
        got += (size_t)n;
    }
    return KR_OK;
}

void kr__frame_clear(kr__frame *f)
{
    if (!f)
        return;
    json_decref(f->body);
    f->body = NULL;
    for (size_t i = 0; i < f->num_fds && i < KR__FRAME_MAX_FDS; i++)
        if (f->fds[i] >= 0)
            close(f->fds[i]);
    for (size_t i = 0; i < KR__FRAME_MAX_FDS; i++)
        f->fds[i] = -1;
    f->num_fds = 0;
    f->type = 0;
}

int kr__frame_recv(int sock, kr__frame *out, double timeout_s, char *why, size_t why_size)
{
    out->body = NULL;
    out->num_fds = 0;
    kr__frame_clear(out);
    reader r = {sock, timeout_s < 0 || isnan(timeout_s) ? -1 : kr__now() + timeout_s, out, 0, 0,
                0};
    unsigned char h[KR__FRAME_HEADER];
    unsigned char *payload = NULL;
    header hd;
    int rc = read_exact(&r, h, sizeof h, "header", why, why_size);
    if (rc == KR_OK)
        rc = kr__frame_parse_header(h, &hd, why, why_size);
    if (rc == KR_OK && !(payload = malloc(hd.len ? hd.len : 1))) {
        say(why, why_size, "out of memory for a payload of %u bytes", hd.len);
        rc = KR_ENOMEM;
    }
    if (rc == KR_OK)
        rc = read_exact(&r, payload, hd.len, "payload", why, why_size);
    if (rc == KR_OK && r.defective) {
        if (r.extra_fds)
            say(why, why_size, "%zu descriptors came with the frame, at most %d",
                KR__FRAME_MAX_FDS + r.extra_fds, KR__FRAME_MAX_FDS);
        else
            say(why, why_size, "the frame's descriptors were cut short (more than %d)",
                KR__FRAME_MAX_FDS);
        rc = KR_EPARSE;
    }
    if (rc == KR_OK)
        rc = kr__frame_parse_payload(payload, hd.len, hd.sum, &out->body, why, why_size);
    free(payload);
    if (rc != KR_OK) {
        kr__frame_clear(out);
        return rc;
    }
    out->type = hd.type;
    return KR_OK;
}
