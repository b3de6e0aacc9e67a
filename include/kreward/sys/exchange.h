/* libkreward: a request and its reply over a pair of pipes, timed where no
 * thread of the caller's process can delay the clock.
 *
 * Its user is the KernelBench path (docs/kernelbench.md): the caller times a
 * candidate's batch as the round trip of the request that starts it, and in
 * an interpreter with a global lock (CPython) a thread that wakes when the
 * reply arrives must first get that lock back: any other thread of the
 * process busy meanwhile (another candidate's bookkeeping, the trainer's own)
 * added up to its switch interval (5 ms) to the measured time, at random,
 * on either side. Called through ctypes, this call runs without that lock and
 * takes both clock readings itself.
 *
 * An extension call: made for one consumer, not part of the stable API that
 * kreward/kreward.h includes; include <kreward/sys/exchange.h> yourself. Its
 * symbol has the version node KREWARD_SYS_2 of libkreward.sym (a change to
 * it comes with a new node, never under the old one). */
#ifndef KREWARD_SYS_EXCHANGE_H
#define KREWARD_SYS_EXCHANGE_H

#include <stddef.h>
#include <stdint.h>

#include "../common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* times_ns and counts are arrays of two.
 * Writes request_bytes bytes of request to wfd (a non-blocking descriptor is
 * waited for), then reads rfd into reply (reply_cap bytes at most) until the
 * bytes read hold a newline: the end of the reply's first line.
 * times_ns[0] is CLOCK_MONOTONIC just before the first byte was written,
 * times_ns[1] the same clock right after the read that brought the newline
 * (0 until then). counts[0] is the request bytes written, counts[1] the reply
 * bytes read, which may go past the newline (the caller keeps them all).
 * watch_fd (-1: none) is a descriptor that ends the wait when it becomes
 * readable first (a supervisor's events): KR_ESTATE, the caller reads it.
 * KR_ETIMEOUT past timeout_ms from the call; KR_ECANCELED when a signal
 * interrupted a wait, a read or a write (the caller's handlers run, then it
 * goes on by other means); KR_EIO when the reader of wfd is gone (EPIPE: the
 * caller ignores SIGPIPE) or rfd ends (EOF) or fails; KR_ETOOBIG when
 * reply_cap bytes hold no newline; KR_EINVAL for a NULL out pointer, a NULL
 * buffer with a size, a negative descriptor or timeout. Whatever the status,
 * counts say what was written and read. The deadline holds for a
 * non-blocking wfd and rfd (a blocking rfd that another reader of the pipe
 * empties between the wait and the read blocks in that read; a blocking wfd
 * blocks in its write). */
KR_API int kr_exchange_timed(uint64_t *times_ns, size_t *counts, void *reply, size_t reply_cap,
                             int wfd, const void *request, size_t request_bytes, int rfd,
                             int watch_fd, int timeout_ms);

#ifdef __cplusplus
}
#endif
#endif
