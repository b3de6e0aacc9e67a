/* The pool's wire protocol: what the pool (in the caller's process) and its
 * kreward-worker processes say to each other over a socket pair.
 *
 * A frame is a 16-byte header and a payload:
 *   bytes 0..3   magic "KRW1"
 *   bytes 4..5   protocol version (KR__PROTOCOL_VERSION), little endian
 *   bytes 6..7   message type (enum kr__msg), little endian
 *   bytes 8..11  payload length in bytes, little endian, at most KR__FRAME_MAX
 *   bytes 12..15 XXH32 of the payload (a garbled frame is refused, not misread)
 * The payload is one JSON object (UTF-8). Large data (problem tensors,
 * golden outputs, reports with large details) never rides in the payload:
 * it travels as sealed memfd blobs passed with SCM_RIGHTS, at most
 * KR__FRAME_MAX_FDS per frame, and the payload names them by index.
 *
 * Reading never trusts the peer: a wrong magic, an unknown version or type,
 * an oversized or truncated frame, a bad checksum or a payload that is not
 * a JSON object is an error naming what was wrong (the pool then treats the
 * worker as broken: kill, respawn, retry the job). */
#ifndef KR_PROTOCOL_H
#define KR_PROTOCOL_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#define KR__PROTOCOL_VERSION 1
#define KR__FRAME_HEADER 16
#define KR__FRAME_MAX ((size_t)64 << 20)
#define KR__FRAME_MAX_FDS 8

enum kr__msg {
    KR__MSG_HELLO = 1,        /* worker -> pool, once: {"pid", "kind": "gpu"|"compile", "device", "arch", "sandbox": {...}} */
    KR__MSG_JOB = 2,          /* pool -> worker: {"id", "problem": spec, "source"|"binary": blob, "plan"?, "options": {...}} */
    KR__MSG_RESULT = 3,       /* worker -> pool: {"id", "status", "report": report JSON or blob} */
    KR__MSG_GOLDEN = 4,       /* worker -> pool: {"id", "case", "seed", "tensors": n}: golden outputs wanted; every tensor's host buffer in one blob, in the problem's order */
    KR__MSG_GOLDEN_REPLY = 5, /* pool -> worker: {"id", "status", "message"?}; every tensor in one blob, the same layout */
    KR__MSG_BYE = 6,          /* pool -> worker: finish and exit */
    KR__MSG_MAX = 6,
};

/* A received frame: its type, its payload (owned), and the descriptors that
 * came with it (owned: closed by kr__frame_clear). */
typedef struct kr__frame {
    uint16_t type;
    json_t *body;
    int fds[KR__FRAME_MAX_FDS];
    size_t num_fds;
} kr__frame;

/* Encodes a frame: header + JSON payload into a malloc'd buffer. */
int kr__frame_encode(uint16_t type, const json_t *body, void **buf, size_t *len, char *why,
                     size_t why_size);
/* Decodes one whole frame from memory (header and payload): the part of
 * kr__frame_recv that reads bytes, also the fuzz target's entry. On
 * success *body is a new JSON object. KR_EPARSE with why on any defect. */
int kr__frame_decode(const void *buf, size_t len, uint16_t *type, json_t **body, char *why,
                     size_t why_size);

/* Sends one frame and its descriptors on a connected stream socket. Retries
 * short writes and EINTR; KR_EIO with why when the peer is gone. */
int kr__frame_send(int sock, uint16_t type, const json_t *body, const int *fds, size_t num_fds,
                   char *why, size_t why_size);
/* The same, only when the encoded frame is at most max_len bytes (KR_ETOOBIG
 * otherwise, nothing sent): a frame that fits the socket's buffer is sent
 * without waiting for the peer to read. */
int kr__frame_send_capped(int sock, uint16_t type, const json_t *body, const int *fds,
                          size_t num_fds, size_t max_len, char *why, size_t why_size);
/* Receives one frame, waiting at most timeout_s (< 0: forever). KR_OK,
 * KR_ETIMEOUT (nothing complete in time), KR_EIO (peer closed or read
 * error), KR_EPARSE (a defective frame). Descriptors beyond
 * KR__FRAME_MAX_FDS are closed and make the frame defective. */
int kr__frame_recv(int sock, kr__frame *out, double timeout_s, char *why, size_t why_size);
void kr__frame_clear(kr__frame *f);

/* Blobs: a sealed, read-only memfd holding len bytes (a copy of data). */
int kr__blob_create(const char *name, const void *data, size_t len, int *fd_out, char *why,
                    size_t why_size);
/* Several buffers in one blob, one after another: a golden request or
 * reply carries every tensor of a problem (up to 1024) in one descriptor,
 * where a frame carries at most KR__FRAME_MAX_FDS. */
int kr__blob_create_parts(const char *name, const void *const *parts, const uint64_t *lens,
                          size_t n, int *fd_out, char *why, size_t why_size);
/* Maps a blob that must be exactly the parts of lens[0..n) one after
 * another (KR_EPARSE otherwise); parts[i] points into the mapping, which
 * data and len describe for kr__blob_unmap. */
int kr__blob_map_parts(int fd, const uint64_t *lens, size_t n, const void **data, size_t *len,
                       const void **parts, char *why, size_t why_size);
/* Maps a blob read-only; KR_EPARSE when fd is not a sealed memfd of the
 * expected length (expect_len SIZE_MAX: any), so a peer cannot hand over a
 * file it can still change. Unmap with kr__blob_unmap. */
int kr__blob_map(int fd, size_t expect_len, const void **data, size_t *len, char *why,
                 size_t why_size);
void kr__blob_unmap(const void *data, size_t len);

#endif
