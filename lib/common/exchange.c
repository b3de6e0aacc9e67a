/* kr_exchange_timed (kreward/sys/exchange.h): a request written, the reply's
 * first line read, both clock readings taken here, never after a caller's
 * interpreter lock is taken back. */
#include "kreward/sys/exchange.h"

#include <errno.h>
#include <poll.h>
#include <string.h>
#include <time.h>
#include <unistd.h>


static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Until fd has `events`: KR_OK; KR_ESTATE when watch_fd is readable first
 * (or hung up: its writer gone), KR_ETIMEOUT at the deadline. A hang-up or
 * an error on fd counts as ready: the read or write then says what. */
static int wait_for(int fd, short events, int watch_fd, uint64_t deadline)
{
    for (;;) {
        uint64_t now = now_ns();
        if (now >= deadline)
            return KR_ETIMEOUT;
        uint64_t left_ms = (deadline - now + 999999u) / 1000000u;
        struct pollfd p[2] = {{.fd = fd, .events = events}, {.fd = watch_fd, .events = POLLIN}};
        int rc = poll(p, watch_fd >= 0 ? 2 : 1, left_ms > 1000000u ? 1000000 : (int)left_ms);
        if (rc < 0 && errno == EINTR)
            return KR_ECANCELED; /* a signal: the caller's handlers run before it waits again */
        if (rc < 0)
            return KR_EIO;
        if (p[0].revents)
            return KR_OK;
        if (watch_fd >= 0 && p[1].revents)
            return KR_ESTATE;
    }
}

KR_API int kr_exchange_timed(uint64_t *times_ns, size_t *counts, void *reply, size_t reply_cap,
                             int wfd, const void *request, size_t request_bytes, int rfd,
                             int watch_fd, int timeout_ms)
{
    if (!times_ns || !counts)
        return KR_EINVAL;
    times_ns[0] = times_ns[1] = 0;
    counts[0] = counts[1] = 0;
    if ((!reply && reply_cap) || (!request && request_bytes) || wfd < 0 || rfd < 0 || timeout_ms < 0)
        return KR_EINVAL;
    const char *req = request;
    char *rep = reply;
    times_ns[0] = now_ns();
    uint64_t deadline = times_ns[0] + (uint64_t)timeout_ms * 1000000u;
    while (counts[0] < request_bytes) {
        ssize_t n = write(wfd, req + counts[0], request_bytes - counts[0]);
        if (n > 0) {
            counts[0] += (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR)
            return KR_ECANCELED;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            int rc = wait_for(wfd, POLLOUT, watch_fd, deadline);
            if (rc != KR_OK)
                return rc;
            continue;
        }
        return KR_EIO;
    }
    for (;;) {
        if (counts[1] == reply_cap)
            return KR_ETOOBIG;
        int rc = wait_for(rfd, POLLIN, watch_fd, deadline);
        if (rc != KR_OK)
            return rc;
        ssize_t n = read(rfd, rep + counts[1], reply_cap - counts[1]);
        if (n < 0 && errno == EINTR)
            return KR_ECANCELED;
        /* (another reader of the pipe took what poll saw: a non-blocking
         * rfd waits again, under the deadline) */
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            continue;
        if (n <= 0)
            return KR_EIO;
        uint64_t t = now_ns();
        int has_end = memchr(rep + counts[1], '\n', (size_t)n) != NULL;
        counts[1] += (size_t)n;
        if (has_end) {
            times_ns[1] = t;
            return KR_OK;
        }
    }
}
