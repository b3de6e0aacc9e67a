/* The pool's wire protocol (protocol.h draws the frame): encoding and
 * decoding frames, sending and receiving them with their descriptors on a
 * stream socket, and sealed memfd blobs.
 *
 * The reader trusts nothing: the header is checked before a byte of payload
 * is read or a byte of memory allocated for it, it never reads past the
 * frame it is on (the next frame's descriptors stay queued for the next
 * call), and every descriptor that came with a frame it refuses is closed. */
#include "pool/protocol.h"
#include "common/clock.h"
#include "kreward/common.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#define MAGIC "KRW1"
#define BLOB_SEALS (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL)

static void say(char *why, size_t why_size, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void say(char *why, size_t why_size, const char *fmt, ...)
{
    if (!why || !why_size)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, why_size, fmt, ap);
    va_end(ap);
}

static void put_u16(unsigned char *p, uint16_t v)
{
    p[0] = (unsigned char)v;
    p[1] = (unsigned char)(v >> 8);
}

static void put_u32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static uint16_t get_u16(const unsigned char *p)
{
    return (uint16_t)(p[0] | (p[1] << 8));
}

static uint32_t get_u32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* ---- frames in memory ---- */

typedef struct header {
    uint16_t type;
    uint32_t len;
    uint32_t sum;
} header;

/* Everything the 16 header bytes can get wrong, before any payload. */
static int parse_header(const unsigned char *h, header *out, char *why, size_t why_size)
{
    if (memcmp(h, MAGIC, 4) != 0) {
        say(why, why_size, "bad magic %02x %02x %02x %02x (a kreward frame begins with \"%s\")",
            h[0], h[1], h[2], h[3], MAGIC);
        return KR_EPARSE;
    }
    uint16_t version = get_u16(h + 4);
    if (version != KR__PROTOCOL_VERSION) {
        say(why, why_size, "protocol version %u, this library speaks %d", version,
            KR__PROTOCOL_VERSION);
        return KR_EPARSE;
    }
    out->type = get_u16(h + 6);
    if (out->type < 1 || out->type > KR__MSG_MAX) {
        say(why, why_size, "message type %u unknown (1 to %d)", out->type, KR__MSG_MAX);
        return KR_EPARSE;
    }
    out->len = get_u32(h + 8);
    if (out->len > KR__FRAME_MAX) {
        say(why, why_size, "payload of %u bytes (%.1f MiB) over the %zu MiB limit", out->len,
            out->len / 1048576.0, KR__FRAME_MAX >> 20);
        return KR_EPARSE;
    }
    out->sum = get_u32(h + 12);
    return KR_OK;
}

/* A parser's message quoted without control or non-ASCII bytes: jansson
 * quotes the peer's bytes near the error. */
static void say_json_error(char *why, size_t why_size, const json_error_t *e)
{
    char text[JSON_ERROR_TEXT_LENGTH];
    size_t i = 0;
    for (; e->text[i] && i + 1 < sizeof text; i++) {
        unsigned char c = (unsigned char)e->text[i];
        text[i] = c < 0x20 || c >= 0x7f ? '?' : (char)c;
    }
    text[i] = '\0';
    say(why, why_size, "payload is not a JSON object: %s (byte %d)", text, e->position);
}

/* The payload against the header's checksum, then as one JSON object. */
static int parse_payload(const unsigned char *p, size_t len, uint32_t sum, json_t **body, char *why,
                         size_t why_size)
{
    uint32_t got = XXH32(p, len, 0);
    if (got != sum) {
        say(why, why_size, "checksum mismatch: the %zu payload bytes hash to %08x, the header "
            "says %08x", len, got, sum);
        return KR_EPARSE;
    }
    json_error_t e;
    /* what jansson writes it reads: "\u0000" in a string included */
    json_t *j = json_loadb((const char *)p, len, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &e);
    if (!j) {
        say_json_error(why, why_size, &e);
        return KR_EPARSE;
    }
    if (!json_is_object(j)) {
        static const char *const kinds[] = {"an object", "an array", "a string", "an integer",
                                            "a real", "true", "false", "null"};
        say(why, why_size, "payload is not a JSON object: it is %s", kinds[json_typeof(j)]);
        json_decref(j);
        return KR_EPARSE;
    }
    *body = j;
    return KR_OK;
}

int kr__frame_decode(const void *buf, size_t len, uint16_t *type, json_t **body, char *why,
                     size_t why_size)
{
    *type = 0;
    *body = NULL;
    if (!buf && len)
        return KR_EINVAL;
    if (len < KR__FRAME_HEADER) {
        say(why, why_size, "a frame of %zu bytes is shorter than its %d-byte header", len,
            KR__FRAME_HEADER);
        return KR_EPARSE;
    }
    header h;
    int rc = parse_header(buf, &h, why, why_size);
    if (rc != KR_OK)
        return rc;
    size_t have = len - KR__FRAME_HEADER;
    if (have < h.len) {
        say(why, why_size, "the header announces %u payload bytes, %zu came (truncated)", h.len,
            have);
        return KR_EPARSE;
    }
    if (have > h.len) {
        say(why, why_size, "%zu byte%s follow%s the frame's %u payload bytes", have - h.len,
            have - h.len == 1 ? "" : "s", have - h.len == 1 ? "s" : "", h.len);
        return KR_EPARSE;
    }
    rc = parse_payload((const unsigned char *)buf + KR__FRAME_HEADER, have, h.sum, body, why,
                       why_size);
    if (rc == KR_OK)
        *type = h.type;
    return rc;
}

/* A growing buffer the JSON is dumped into after the header's room; stops
 * the dump as soon as it passes the limit. */
typedef struct out_buf {
    unsigned char *data;
    size_t len, cap;
    int over, oom;
} out_buf;

static int dump_chunk(const char *s, size_t n, void *data)
{
    out_buf *b = data;
    if (n > KR__FRAME_HEADER + KR__FRAME_MAX - b->len) {
        b->over = 1;
        return -1;
    }
    if (b->len + n > b->cap) {
        size_t cap = b->cap * 2;
        while (cap < b->len + n)
            cap *= 2;
        unsigned char *d = realloc(b->data, cap);
        if (!d) {
            b->oom = 1;
            return -1;
        }
        b->data = d;
        b->cap = cap;
    }
    memcpy(b->data + b->len, s, n);
    b->len += n;
    return 0;
}

int kr__frame_encode(uint16_t type, const json_t *body, void **buf, size_t *len, char *why,
                     size_t why_size)
{
    *buf = NULL;
    *len = 0;
    if (type < 1 || type > KR__MSG_MAX) {
        say(why, why_size, "message type %u unknown (1 to %d)", type, KR__MSG_MAX);
        return KR_EINVAL;
    }
    if (body && !json_is_object(body)) {
        say(why, why_size, "a frame's body must be a JSON object");
        return KR_EINVAL;
    }
    out_buf b = {malloc(256), KR__FRAME_HEADER, 256, 0, 0};
    if (!b.data) {
        say(why, why_size, "out of memory");
        return KR_ENOMEM;
    }
    int dumped = body ? json_dump_callback(body, dump_chunk, &b, JSON_COMPACT)
                      : dump_chunk("{}", 2, &b);
    if (dumped != 0) {
        free(b.data);
        if (b.over) {
            say(why, why_size, "payload over the %zu MiB limit (large data travels as blobs)",
                KR__FRAME_MAX >> 20);
            return KR_ETOOBIG;
        }
        say(why, why_size, b.oom ? "out of memory" : "the body could not be written as JSON");
        return b.oom ? KR_ENOMEM : KR_EINVAL;
    }
    size_t n = b.len - KR__FRAME_HEADER;
    memcpy(b.data, MAGIC, 4);
    put_u16(b.data + 4, KR__PROTOCOL_VERSION);
    put_u16(b.data + 6, type);
    put_u32(b.data + 8, (uint32_t)n);
    put_u32(b.data + 12, XXH32(b.data + KR__FRAME_HEADER, n, 0));
    *buf = b.data;
    *len = b.len;
    return KR_OK;
}

/* ---- frames on a socket ---- */

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
        rc = parse_header(h, &hd, why, why_size);
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
        rc = parse_payload(payload, hd.len, hd.sum, &out->body, why, why_size);
    free(payload);
    if (rc != KR_OK) {
        kr__frame_clear(out);
        return rc;
    }
    out->type = hd.type;
    return KR_OK;
}

/* ---- blobs ---- */

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
