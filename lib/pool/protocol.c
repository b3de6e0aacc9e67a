/* The pool's wire protocol (protocol.h draws the frame): encoding and
 * decoding frames, sending and receiving them with their descriptors on a
 * stream socket (protocol_socket.c), and sealed memfd blobs
 * (protocol_blob.c).
 *
 * The reader trusts nothing: the header is checked before a byte of payload
 * is read or a byte of memory allocated for it, it never reads past the
 * frame it is on (the next frame's descriptors stay queued for the next
 * call), and every descriptor that came with a frame it refuses is closed. */
#include "pool/protocol_impl.h"
#include "kreward/common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#define MAGIC "KRW1"

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

/* Everything the 16 header bytes can get wrong, before any payload. */
int kr__frame_parse_header(const unsigned char *h, header *out, char *why, size_t why_size)
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
int kr__frame_parse_payload(const unsigned char *p, size_t len, uint32_t sum, json_t **body,
                            char *why, size_t why_size)
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
    int rc = kr__frame_parse_header(buf, &h, why, why_size);
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
    rc = kr__frame_parse_payload((const unsigned char *)buf + KR__FRAME_HEADER, have, h.sum, body,
                                 why, why_size);
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
