/* Shared by the protocol's files (protocol.h): protocol.c (frames in
 * memory), protocol_socket.c (frames on a socket) and protocol_blob.c
 * (sealed memfd blobs). */
#ifndef KR_PROTOCOL_IMPL_H
#define KR_PROTOCOL_IMPL_H

#include "pool/protocol.h"

#include <stdarg.h>
#include <stdio.h>

/* A message into why (none when why is NULL or has no room). */
static inline void say(char *why, size_t why_size, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static inline void say(char *why, size_t why_size, const char *fmt, ...)
{
    if (!why || !why_size)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, why_size, fmt, ap);
    va_end(ap);
}

typedef struct header {
    uint16_t type;
    uint32_t len;
    uint32_t sum;
} header;

/* Everything the 16 header bytes can get wrong, before any payload. */
int kr__frame_parse_header(const unsigned char *h, header *out, char *why, size_t why_size);
/* The payload against the header's checksum, then as one JSON object. */
int kr__frame_parse_payload(const unsigned char *p, size_t len, uint32_t sum, json_t **body,
                            char *why, size_t why_size);

#endif
