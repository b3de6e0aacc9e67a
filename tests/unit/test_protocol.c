/* The pool's wire protocol: frames byte for byte, round trips of every
 * message type (in memory, across a socket pair, to a spawned child), and
 * every way a peer can get a frame wrong: truncated, oversized, wrong
 * magic/version/type, garbled payload, not an object, too many
 * descriptors, closing mid-frame, stalling. Blobs: sealed memfds only.
 * No GPU. The test binary is also the child: test_protocol --child FD. */
#include "helpers.h"

#include "pool/job.h"
#include "pool/protocol.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

extern char **environ;

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void pair(int sv[2])
{
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
}

/* The lowest free descriptor number (one surely not open). */
static int lowest_free_fd(void)
{
    int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    assert_true(fd >= 0);
    close(fd);
    return fd;
}

/* How many descriptors the process has open: a leak shows here. */
static int open_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    assert_non_null(d);
    int n = 0;
    for (struct dirent *e; (e = readdir(d));)
        n += e->d_name[0] != '.';
    closedir(d);
    return n - 1; /* the directory's own */
}

static int is_open(int fd)
{
    return fcntl(fd, F_GETFD) >= 0;
}

static void write_all(int fd, const void *data, size_t len)
{
    size_t done = 0;
    while (done < len) {
        ssize_t n = write(fd, (const char *)data + done, len - done);
        assert_true(n > 0);
        done += (size_t)n;
    }
}

/* A frame built here, independently of the library: header fields as
 * given, payload bytes as given, checksum XXH32 of the payload unless a
 * test overrides bytes afterwards. */
static unsigned char *raw_frame(const char *magic, uint16_t version, uint16_t type,
                                const void *payload, uint32_t len, size_t *size)
{
    unsigned char *f = malloc(16 + (size_t)len + 1);
    assert_non_null(f);
    memcpy(f, magic, 4);
    f[4] = (unsigned char)(version & 0xff);
    f[5] = (unsigned char)(version >> 8);
    f[6] = (unsigned char)(type & 0xff);
    f[7] = (unsigned char)(type >> 8);
    for (int i = 0; i < 4; i++)
        f[8 + i] = (unsigned char)(len >> (8 * i));
    uint32_t sum = XXH32(payload, len, 0);
    for (int i = 0; i < 4; i++)
        f[12 + i] = (unsigned char)(sum >> (8 * i));
    memcpy(f + 16, payload, len);
    *size = 16 + (size_t)len;
    return f;
}

static unsigned char *good_frame(uint16_t type, const char *payload, size_t *size)
{
    return raw_frame("KRW1", 1, type, payload, (uint32_t)strlen(payload), size);
}

static int decode(const void *buf, size_t len, char *why, size_t why_size)
{
    uint16_t type = 0xbeef;
    json_t *body = (json_t *)1;
    int rc = kr__frame_decode(buf, len, &type, &body, why, why_size);
    if (rc != KR_OK) {
        assert_int_equal(type, 0);
        assert_null(body);
    }
    json_decref(body);
    return rc;
}

static json_t *body_of(const char *text)
{
    json_error_t e;
    json_t *j = json_loads(text, 0, &e);
    if (!j)
        fail_msg("bad test JSON: %s", e.text);
    return j;
}

/* One body per message type, as protocol.h describes them. */
static const char *const bodies[KR__MSG_MAX + 1] = {
    NULL,
    "{\"ready\": true, \"pid\": 4242, \"kind\": \"gpu\", \"device\": \"NVIDIA H200\", "
    "\"arch\": \"sm_90a\", \"sandbox\": {\"landlock\": 4, \"seccomp\": true}}",
    "{\"id\": 18446744073709551, \"problem\": {\"name\": \"p\", \"dims\": [\"N\"]}, "
    "\"source\": \"__global__ void k() {}\", \"plan\": null, \"options\": {\"flags\": 3}}",
    "{\"id\": 7, \"status\": 0, \"report\": \"{\\\"verdict\\\": \\\"passed\\\"}\", "
    "\"poisoned\": false}",
    "{\"id\": 7, \"case\": 2, \"seed\": 9007199254740993}",
    "{\"id\": 7, \"status\": 1, \"message\": \"the golden callback failed\"}",
    "{}",
};

/* ---- frames in memory ---- */

static void header_bytes(void **state)
{
    (void)state;
    json_t *body = body_of("{\"a\": 1}");
    void *buf = NULL;
    size_t len = 0;
    char why[256] = "";
    assert_int_equal(kr__frame_encode(KR__MSG_RESULT, body, &buf, &len, why, sizeof why), KR_OK);
    const unsigned char expect[] = {'K', 'R', 'W', '1', 1, 0, 3, 0, 7, 0, 0, 0};
    assert_int_equal(len, 16 + 7);
    assert_memory_equal(buf, expect, sizeof expect);
    assert_memory_equal((unsigned char *)buf + 16, "{\"a\":1}", 7);
    uint32_t sum = XXH32("{\"a\":1}", 7, 0);
    const unsigned char *s = (unsigned char *)buf + 12;
    assert_int_equal(s[0] | s[1] << 8 | s[2] << 16 | (uint32_t)s[3] << 24, sum);
    free(buf);
    json_decref(body);

    /* no body: an empty object */
    assert_int_equal(kr__frame_encode(KR__MSG_BYE, NULL, &buf, &len, why, sizeof why), KR_OK);
    assert_int_equal(len, 18);
    assert_memory_equal((unsigned char *)buf + 16, "{}", 2);
    free(buf);

    /* what encode refuses */
    json_t *arr = json_array();
    assert_int_equal(kr__frame_encode(KR__MSG_BYE, arr, &buf, &len, why, sizeof why), KR_EINVAL);
    assert_null(buf);
    json_decref(arr);
    assert_int_equal(kr__frame_encode(0, NULL, &buf, &len, why, sizeof why), KR_EINVAL);
    assert_int_equal(kr__frame_encode(KR__MSG_MAX + 1, NULL, &buf, &len, why, sizeof why),
                     KR_EINVAL);
    assert_contains(why, "message type 7 unknown");
    /* a NULL why is allowed */
    assert_int_equal(kr__frame_encode(0, NULL, &buf, &len, NULL, 0), KR_EINVAL);
}

static void round_trip_every_type(void **state)
{
    (void)state;
    for (uint16_t t = 1; t <= KR__MSG_MAX; t++) {
        json_t *body = body_of(bodies[t]);
        void *buf;
        size_t len;
        char why[256] = "";
        assert_int_equal(kr__frame_encode(t, body, &buf, &len, why, sizeof why), KR_OK);
        uint16_t type = 0;
        json_t *back = NULL;
        if (kr__frame_decode(buf, len, &type, &back, why, sizeof why) != KR_OK)
            fail_msg("type %u: %s", t, why);
        assert_int_equal(type, t);
        assert_true(json_equal(body, back));
        json_decref(back);
        free(buf);
        json_decref(body);
    }
}

static json_t *unicode_body(void)
{
    json_t *b = json_object();
    json_object_set_new(b, "text", json_string("h\xc3\xa9llo \xe2\x9c\x93 \xf0\x9f\x98\x80 "
                                               "\xe4\xb8\xad\xe6\x96\x87 \"quoted\" \\ \t\n"));
    json_object_set_new(b, "\xc3\xa9t\xc3\xa9", json_integer(-9007199254740993LL));
    json_object_set_new(b, "nul", json_stringn("a\0b", 3));
    json_object_set_new(b, "real", json_real(-1.5e-300));
    json_object_set_new(b, "\xe2\x80\xa8", json_string("\xe2\x80\xa9\x7f"));
    return b;
}

static void round_trip_unicode(void **state)
{
    (void)state;
    json_t *body = unicode_body();
    void *buf;
    size_t len;
    char why[256] = "";
    assert_int_equal(kr__frame_encode(KR__MSG_JOB, body, &buf, &len, why, sizeof why), KR_OK);
    uint16_t type;
    json_t *back = NULL;
    if (kr__frame_decode(buf, len, &type, &back, why, sizeof why) != KR_OK)
        fail_msg("%s", why);
    assert_true(json_equal(body, back));
    assert_int_equal(json_string_length(json_object_get(back, "nul")), 3);
    assert_memory_equal(json_string_value(json_object_get(back, "nul")), "a\0b", 3);
    json_decref(back);
    free(buf);
    json_decref(body);
}

/* {"s":"xxx..."} is 8 bytes plus the string: a payload of exactly the limit
 * goes, one byte more is refused before anything is sent. */
static void size_limit(void **state)
{
    (void)state;
    size_t n = KR__FRAME_MAX - 8;
    char *s = malloc(n + 2);
    assert_non_null(s);
    memset(s, 'x', n + 1);
    s[n] = '\0';
    json_t *body = json_object();
    json_object_set_new(body, "s", json_stringn_nocheck(s, n));
    void *buf;
    size_t len;
    char why[256] = "";
    if (kr__frame_encode(KR__MSG_RESULT, body, &buf, &len, why, sizeof why) != KR_OK)
        fail_msg("%s", why);
    assert_int_equal(len, 16 + KR__FRAME_MAX);
    assert_int_equal(decode(buf, len, why, sizeof why), KR_OK);
    free(buf);
    json_object_set_new(body, "s", json_stringn_nocheck(s, n + 1));
    assert_int_equal(kr__frame_encode(KR__MSG_RESULT, body, &buf, &len, why, sizeof why),
                     KR_ETOOBIG);
    assert_null(buf);
    assert_contains(why, "over the 64 MiB limit");
    json_decref(body);
    free(s);
}

static void truncated_frames(void **state)
{
    (void)state;
    size_t len;
    unsigned char *f = good_frame(KR__MSG_GOLDEN, bodies[KR__MSG_GOLDEN], &len);
    char why[256];
    assert_int_equal(decode(f, len, why, sizeof why), KR_OK);
    for (size_t k = 0; k < len; k++) {
        why[0] = '\0';
        assert_int_equal(decode(f, k, why, sizeof why), KR_EPARSE);
        char expect[128];
        if (k < 16)
            snprintf(expect, sizeof expect, "a frame of %zu bytes is shorter than its 16-byte "
                     "header", k);
        else
            snprintf(expect, sizeof expect, "the header announces %zu payload bytes, %zu came "
                     "(truncated)", len - 16, k - 16);
        assert_string_equal(why, expect);
    }
    /* a byte too many is as wrong as one too few */
    unsigned char *g = malloc(len + 1);
    memcpy(g, f, len);
    g[len] = ' ';
    assert_int_equal(decode(g, len + 1, why, sizeof why), KR_EPARSE);
    assert_string_equal(why, "1 byte follows the frame's 46 payload bytes");
    free(g);
    free(f);
}

static void bad_headers(void **state)
{
    (void)state;
    const char *p = "{}";
    size_t len;
    char why[256];
    unsigned char *f;

    const char *magics[] = {"KRW2", "krw1", "XRW1", "KRX1", "GET "};
    for (size_t i = 0; i < sizeof magics / sizeof *magics; i++) {
        f = raw_frame(magics[i], 1, KR__MSG_BYE, p, 2, &len);
        assert_int_equal(decode(f, len, why, sizeof why), KR_EPARSE);
        assert_contains(why, "bad magic");
        free(f);
    }
    f = raw_frame("GET ", 1, KR__MSG_BYE, p, 2, &len);
    assert_int_equal(decode(f, len, why, sizeof why), KR_EPARSE);
    assert_contains(why, "bad magic 47 45 54 20");
    free(f);

    const uint16_t versions[] = {0, 2, 7, 256, 0xffff};
    for (size_t i = 0; i < sizeof versions / sizeof *versions; i++) {
        f = raw_frame("KRW1", versions[i], KR__MSG_BYE, p, 2, &len);
        assert_int_equal(decode(f, len, why, sizeof why), KR_EPARSE);
        char expect[64];
        snprintf(expect, sizeof expect, "protocol version %u, this library speaks 1",
                 versions[i]);
        assert_string_equal(why, expect);
        free(f);
    }

    const uint16_t types[] = {0, KR__MSG_MAX + 1, 99, 256 + KR__MSG_JOB, 0xffff};
    for (size_t i = 0; i < sizeof types / sizeof *types; i++) {
        f = raw_frame("KRW1", 1, types[i], p, 2, &len);
        assert_int_equal(decode(f, len, why, sizeof why), KR_EPARSE);
        char expect[64];
        snprintf(expect, sizeof expect, "message type %u unknown", types[i]);
        assert_contains(why, expect);
        free(f);
    }
}

/* A length field over the limit is refused from the header alone. */
static void oversized_length(void **state)
{
    (void)state;
    const uint32_t lens[] = {(uint32_t)KR__FRAME_MAX + 1, 70u << 20, 0xffffffffu};
    for (size_t i = 0; i < sizeof lens / sizeof *lens; i++) {
        size_t len;
        unsigned char *f = raw_frame("KRW1", 1, KR__MSG_RESULT, "", 0, &len);
        for (int b = 0; b < 4; b++)
            f[8 + b] = (unsigned char)(lens[i] >> (8 * b));
        char why[256];
        assert_int_equal(decode(f, len, why, sizeof why), KR_EPARSE);
        assert_contains(why, "over the 64 MiB limit");
        if (lens[i] == 70u << 20)
            assert_string_equal(why, "payload of 73400320 bytes (70.0 MiB) over the 64 MiB limit");

        /* on a socket the reader does not wait for the payload */
        int sv[2];
        pair(sv);
        write_all(sv[0], f, 16);
        kr__frame fr;
        double t0 = now();
        assert_int_equal(kr__frame_recv(sv[1], &fr, 10, why, sizeof why), KR_EPARSE);
        assert_true(now() - t0 < 5);
        assert_contains(why, "over the 64 MiB limit");
        assert_null(fr.body);
        close(sv[0]);
        close(sv[1]);
        free(f);
    }
}

static void garbled_payload(void **state)
{
    (void)state;
    size_t len;
    unsigned char *f = good_frame(KR__MSG_HELLO, bodies[KR__MSG_HELLO], &len);
    char why[256];
    for (size_t i = 16; i < len; i++)
        for (int bit = 0; bit < 8; bit += 7) {
            f[i] ^= (unsigned char)(1 << bit);
            assert_int_equal(decode(f, len, why, sizeof why), KR_EPARSE);
            assert_contains(why, "checksum mismatch");
            f[i] ^= (unsigned char)(1 << bit);
        }
    for (size_t i = 12; i < 16; i++) { /* the checksum itself */
        f[i] ^= 0x10;
        assert_int_equal(decode(f, len, why, sizeof why), KR_EPARSE);
        assert_contains(why, "checksum mismatch");
        f[i] ^= 0x10;
    }
    assert_int_equal(decode(f, len, why, sizeof why), KR_OK);
    free(f);
}

static void not_an_object(void **state)
{
    (void)state;
    static const struct {
        const char *payload;
        size_t len;
        const char *says;
    } cases[] = {
        {"[]", 2, "it is an array"},
        {"[{\"a\": 1}]", 10, "it is an array"},
        {"1", 1, "payload is not a JSON object"},
        {"\"s\"", 3, "payload is not a JSON object"},
        {"null", 4, "payload is not a JSON object"},
        {"", 0, "payload is not a JSON object"},
        {"   ", 3, "payload is not a JSON object"},
        {"{", 1, "payload is not a JSON object"},
        {"{\"a\": 1", 7, "payload is not a JSON object"},
        {"{\"a\": 1}x", 9, "payload is not a JSON object"},
        {"{\"a\": 1}{}", 10, "payload is not a JSON object"},
        {"{\"a\": 1, \"a\": 2}", 16, "duplicate object key"},
        {"{\"a\": \"\xff\xfe\"}", 11, "payload is not a JSON object"},
        {"{\"a\": 1}\0", 9, "payload is not a JSON object"},
        {"{\"a\": \"\x01\"}", 10, "payload is not a JSON object"},
        {"{'a': 1}", 8, "payload is not a JSON object"},
        {"{\"a\": NaN}", 10, "payload is not a JSON object"},
    };
    char why[256];
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        size_t len;
        unsigned char *f = raw_frame("KRW1", 1, KR__MSG_RESULT, cases[i].payload,
                                     (uint32_t)cases[i].len, &len);
        why[0] = '\0';
        if (decode(f, len, why, sizeof why) != KR_EPARSE)
            fail_msg("case %zu was accepted", i);
        assert_contains(why, "payload is not a JSON object");
        assert_contains(why, cases[i].says);
        for (const char *c = why; *c; c++) /* the peer's bytes are not echoed raw */
            assert_true((unsigned char)*c >= 0x20 && (unsigned char)*c < 0x7f);
        free(f);
    }
    /* nesting deep enough to hurt a recursive parser */
    size_t depth = 100000;
    char *deep = malloc(depth);
    memset(deep, '[', depth);
    deep[0] = '{';
    size_t len;
    unsigned char *f = raw_frame("KRW1", 1, KR__MSG_RESULT, deep, (uint32_t)depth, &len);
    assert_int_equal(decode(f, len, why, sizeof why), KR_EPARSE);
    free(f);
    free(deep);
}

/* ---- frames on a socket ---- */

typedef struct sender {
    int sock;
    uint16_t type;
    json_t *body;
    const int *fds;
    size_t num_fds;
    double delay_s;
    int rc;
    char why[256];
    double cpu_s; /* the send's CPU time */
} sender;

static double thread_cpu(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void *send_thread(void *arg)
{
    sender *s = arg;
    if (s->delay_s > 0)
        nanosleep(&(struct timespec){0, (long)(s->delay_s * 1e9)}, NULL);
    double c0 = thread_cpu();
    s->rc = kr__frame_send(s->sock, s->type, s->body, s->fds, s->num_fds, s->why, sizeof s->why);
    s->cpu_s = thread_cpu() - c0;
    return NULL;
}

static void socket_round_trip(void **state)
{
    (void)state;
    int sv[2];
    pair(sv);
    char why[256] = "";
    for (uint16_t t = 1; t <= KR__MSG_MAX; t++) {
        json_t *body = body_of(bodies[t]);
        assert_int_equal(kr__frame_send(sv[0], t, body, NULL, 0, why, sizeof why), KR_OK);
        kr__frame f;
        if (kr__frame_recv(sv[1], &f, 5, why, sizeof why) != KR_OK)
            fail_msg("%s", why);
        assert_int_equal(f.type, t);
        assert_int_equal(f.num_fds, 0);
        assert_true(json_equal(body, f.body));
        kr__frame_clear(&f);
        assert_null(f.body);
        json_decref(body);
    }
    /* several frames queued are read one at a time, in order */
    json_t *u = unicode_body();
    assert_int_equal(kr__frame_send(sv[0], KR__MSG_JOB, u, NULL, 0, why, sizeof why), KR_OK);
    assert_int_equal(kr__frame_send(sv[0], KR__MSG_BYE, NULL, NULL, 0, NULL, 0), KR_OK);
    kr__frame f;
    assert_int_equal(kr__frame_recv(sv[1], &f, 5, why, sizeof why), KR_OK);
    assert_int_equal(f.type, KR__MSG_JOB);
    assert_true(json_equal(u, f.body));
    kr__frame_clear(&f);
    assert_int_equal(kr__frame_recv(sv[1], &f, 5, why, sizeof why), KR_OK);
    assert_int_equal(f.type, KR__MSG_BYE);
    assert_int_equal(json_object_size(f.body), 0);
    kr__frame_clear(&f);
    kr__frame_clear(&f); /* twice is harmless */
    kr__frame_clear(NULL);
    json_decref(u);
    close(sv[0]);
    close(sv[1]);
}

/* 10 MiB and two blobs through a socket buffer far smaller: partial
 * writes (the descriptors go once, with the first), and on a non-blocking
 * sender EAGAIN and poll. */
static void big_payload(void **state)
{
    (void)state;
    char why[256] = "";
    int blobs[2];
    for (int i = 0; i < 2; i++)
        assert_int_equal(kr__blob_create("b", &i, sizeof i, &blobs[i], why, sizeof why), KR_OK);
    for (int nonblock = 0; nonblock < 2; nonblock++) {
        int sv[2];
        pair(sv);
        if (nonblock)
            assert_int_equal(fcntl(sv[0], F_SETFL, O_NONBLOCK), 0);
        int base = open_fds();
        size_t n = 10u << 20;
        char *s = malloc(n);
        for (size_t i = 0; i < n; i++)
            s[i] = (char)('a' + (i * 7919) % 26);
        json_t *body = json_object();
        json_object_set_new(body, "big", json_stringn(s, n));
        sender snd = {sv[0], KR__MSG_RESULT, body, blobs, 2, 0, -1, "", 0};
        pthread_t th;
        assert_int_equal(pthread_create(&th, NULL, send_thread, &snd), 0);
        kr__frame f;
        int rc = kr__frame_recv(sv[1], &f, 60, why, sizeof why);
        pthread_join(th, NULL);
        if (rc != KR_OK || snd.rc != KR_OK)
            fail_msg("recv %d (%s), send %d (%s)", rc, why, snd.rc, snd.why);
        assert_int_equal(json_string_length(json_object_get(f.body, "big")), n);
        assert_memory_equal(json_string_value(json_object_get(f.body, "big")), s, n);
        assert_int_equal(f.num_fds, 2);
        kr__frame_clear(&f);
        assert_int_equal(open_fds(), base); /* and no copy of them is left queued */
        struct pollfd p = {sv[1], POLLIN, 0};
        assert_int_equal(poll(&p, 1, 0), 0);
        json_decref(body);
        free(s);
        close(sv[0]);
        close(sv[1]);
    }
    close(blobs[0]);
    close(blobs[1]);
}

/* A sender facing a full socket waits in poll instead of spinning. */
static void sender_waits(void **state)
{
    (void)state;
    int sv[2];
    pair(sv);
    assert_int_equal(fcntl(sv[0], F_SETFL, O_NONBLOCK), 0);
    size_t n = 2u << 20;
    char *s = malloc(n);
    memset(s, 'w', n);
    json_t *body = json_object();
    json_object_set_new(body, "s", json_stringn(s, n));
    sender snd = {sv[0], KR__MSG_RESULT, body, NULL, 0, 0, -1, "", 0};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, send_thread, &snd), 0);
    nanosleep(&(struct timespec){0, 600000000}, NULL);
    kr__frame f;
    char why[256];
    assert_int_equal(kr__frame_recv(sv[1], &f, 30, why, sizeof why), KR_OK);
    pthread_join(th, NULL);
    assert_int_equal(snd.rc, KR_OK);
    if (snd.cpu_s > 0.3)
        fail_msg("the sender burnt %.2f s of CPU while the reader slept 0.6 s", snd.cpu_s);
    kr__frame_clear(&f);
    json_decref(body);
    free(s);
    close(sv[0]);
    close(sv[1]);
}

static void blobs_across_socketpair(void **state)
{
    (void)state;
    int sv[2];
    pair(sv);
    size_t big = 3u << 20;
    unsigned char *data = malloc(big);
    for (size_t i = 0; i < big; i++)
        data[i] = (unsigned char)(i * 31 + (i >> 11));
    const size_t lens[3] = {big, 0, 5};
    const void *srcs[3] = {data, "", "hello"};
    int fds[3];
    char why[256] = "";
    for (int i = 0; i < 3; i++)
        assert_int_equal(kr__blob_create("test-blob", srcs[i], lens[i], &fds[i], why, sizeof why),
                         KR_OK);
    json_t *body = body_of("{\"id\": 1, \"outputs\": [0, 1, 2]}");
    assert_int_equal(kr__frame_send(sv[0], KR__MSG_GOLDEN_REPLY, body, fds, 3, why, sizeof why),
                     KR_OK);
    kr__frame f;
    if (kr__frame_recv(sv[1], &f, 5, why, sizeof why) != KR_OK)
        fail_msg("%s", why);
    assert_int_equal(f.type, KR__MSG_GOLDEN_REPLY);
    assert_int_equal(f.num_fds, 3);
    for (int i = 0; i < 3; i++) {
        assert_true(f.fds[i] >= 0);
        assert_true(fcntl(f.fds[i], F_GETFD) & FD_CLOEXEC);
        const void *m = NULL;
        size_t n = 99;
        if (kr__blob_map(f.fds[i], lens[i], &m, &n, why, sizeof why) != KR_OK)
            fail_msg("blob %d: %s", i, why);
        assert_non_null(m); /* also for the empty blob: memcpy(dst, m, 0) is defined */
        assert_int_equal(n, lens[i]);
        assert_memory_equal(m, srcs[i], n);
        kr__blob_unmap(m, n);
        /* any length */
        assert_int_equal(kr__blob_map(f.fds[i], SIZE_MAX, &m, &n, why, sizeof why), KR_OK);
        assert_int_equal(n, lens[i]);
        kr__blob_unmap(m, n);
        /* the wrong length */
        assert_int_equal(kr__blob_map(f.fds[i], lens[i] + 1, &m, &n, why, sizeof why),
                         KR_EPARSE);
        assert_null(m);
        assert_contains(why, "expected");
    }
    int received[3] = {f.fds[0], f.fds[1], f.fds[2]};
    kr__frame_clear(&f);
    for (int i = 0; i < 3; i++) {
        assert_false(is_open(received[i]));
        assert_true(is_open(fds[i])); /* the sender's own stay its own */
        close(fds[i]);
    }
    json_decref(body);
    free(data);
    close(sv[0]);
    close(sv[1]);
}

/* A sealed blob cannot change, however its holder tries. */
static void blobs_are_immutable(void **state)
{
    (void)state;
    int fd;
    char why[256];
    assert_int_equal(kr__blob_create("x", "abcd", 4, &fd, why, sizeof why), KR_OK);
    assert_int_equal(fcntl(fd, F_GET_SEALS),
                     F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL);
    assert_true(pwrite(fd, "z", 1, 0) < 0);
    assert_true(ftruncate(fd, 1) < 0);
    assert_true(ftruncate(fd, 100) < 0);
    assert_true(mmap(NULL, 4, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) == MAP_FAILED);
    errno = 0; /* F_SEAL_SEAL: no seal can be added (or taken) any more */
    assert_int_equal(fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK), -1);
    assert_int_equal(errno, EPERM);
    const void *m;
    size_t n;
    assert_int_equal(kr__blob_map(fd, 4, &m, &n, why, sizeof why), KR_OK);
    assert_memory_equal(m, "abcd", 4);
    kr__blob_unmap(m, n);
    close(fd);
    /* a long name is cut, not refused */
    char name[400];
    memset(name, 'n', sizeof name - 1);
    name[sizeof name - 1] = '\0';
    assert_int_equal(kr__blob_create(name, "", 0, &fd, why, sizeof why), KR_OK);
    close(fd);
}

/* Anything but a sealed memfd is refused: the sender could still change it. */
static void blob_map_refusals(void **state)
{
    (void)state;
    const void *m = (const void *)1;
    size_t n = 1;
    char why[256];

    int fd = memfd_create("unsealed", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    write_all(fd, "abcd", 4);
    assert_int_equal(kr__blob_map(fd, 4, &m, &n, why, sizeof why), KR_EPARSE);
    assert_null(m);
    assert_int_equal(n, 0);
    assert_contains(why, "not sealed");
    /* sealed against size changes but still writable */
    assert_int_equal(fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW), 0);
    assert_int_equal(kr__blob_map(fd, 4, &m, &n, why, sizeof why), KR_EPARSE);
    assert_contains(why, "not sealed");
    close(fd);

    fd = memfd_create("no-sealing", MFD_CLOEXEC); /* born with F_SEAL_SEAL only */
    write_all(fd, "abcd", 4);
    assert_int_equal(kr__blob_map(fd, 4, &m, &n, why, sizeof why), KR_EPARSE);
    assert_contains(why, "not sealed");
    close(fd);

    char path[4200];
    snprintf(path, sizeof path, "%s/krtest-plain-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR")
                                                                          : "/tmp");
    fd = mkstemp(path);
    assert_true(fd >= 0);
    unlink(path);
    write_all(fd, "abcd", 4);
    assert_int_equal(kr__blob_map(fd, 4, &m, &n, why, sizeof why), KR_EPARSE);
    assert_null(m);
    close(fd);

    int p[2];
    assert_int_equal(pipe2(p, O_CLOEXEC), 0);
    assert_int_equal(kr__blob_map(p[0], SIZE_MAX, &m, &n, why, sizeof why), KR_EPARSE);
    close(p[0]);
    close(p[1]);
    fd = open("/dev/zero", O_RDONLY | O_CLOEXEC);
    assert_int_equal(kr__blob_map(fd, SIZE_MAX, &m, &n, why, sizeof why), KR_EPARSE);
    close(fd);
    assert_int_equal(kr__blob_map(-1, SIZE_MAX, &m, &n, why, sizeof why), KR_EPARSE);
    assert_null(m);
}

/* Sends a frame with ndesc descriptors (copies of /dev/null) on its first
 * byte, bypassing kr__frame_send's own limit. */
static void send_raw_with_fds(int sock, const void *frame, size_t len, int ndesc)
{
    int fds[32];
    for (int i = 0; i < ndesc; i++)
        assert_true((fds[i] = open("/dev/null", O_RDONLY | O_CLOEXEC)) >= 0);
    union {
        struct cmsghdr align;
        char bytes[CMSG_SPACE(sizeof fds)];
    } control;
    memset(&control, 0, sizeof control);
    struct iovec iov = {(void *)frame, len};
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
    if (ndesc) {
        m.msg_control = control.bytes;
        m.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)ndesc);
        struct cmsghdr *c = CMSG_FIRSTHDR(&m);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)ndesc);
        memcpy(CMSG_DATA(c), fds, sizeof(int) * (size_t)ndesc);
    }
    assert_int_equal(sendmsg(sock, &m, MSG_NOSIGNAL), (ssize_t)len);
    for (int i = 0; i < ndesc; i++)
        close(fds[i]);
}

static void descriptor_limits(void **state)
{
    (void)state;
    int sv[2];
    pair(sv);
    char why[256];
    int fds[KR__FRAME_MAX_FDS + 1];
    for (int i = 0; i <= KR__FRAME_MAX_FDS; i++)
        assert_int_equal(kr__blob_create("b", &i, sizeof i, &fds[i], why, sizeof why), KR_OK);

    /* the sender refuses more than the limit, and descriptors that are not open */
    assert_int_equal(kr__frame_send(sv[0], KR__MSG_JOB, NULL, fds, KR__FRAME_MAX_FDS + 1, why,
                                    sizeof why), KR_EINVAL);
    assert_contains(why, "at most 8");
    int closed[1] = {lowest_free_fd()};
    assert_int_equal(kr__frame_send(sv[0], KR__MSG_JOB, NULL, closed, 1, why, sizeof why),
                     KR_EINVAL);
    assert_contains(why, "not open");

    /* exactly the limit goes */
    int base = open_fds();
    assert_int_equal(kr__frame_send(sv[0], KR__MSG_JOB, NULL, fds, KR__FRAME_MAX_FDS, why,
                                    sizeof why), KR_OK);
    kr__frame f;
    assert_int_equal(kr__frame_recv(sv[1], &f, 5, why, sizeof why), KR_OK);
    assert_int_equal(f.num_fds, KR__FRAME_MAX_FDS);
    for (int i = 0; i < KR__FRAME_MAX_FDS; i++) {
        const void *m;
        size_t n;
        assert_int_equal(kr__blob_map(f.fds[i], sizeof(int), &m, &n, why, sizeof why), KR_OK);
        assert_int_equal(*(const int *)m, i); /* in order */
        kr__blob_unmap(m, n);
    }
    kr__frame_clear(&f);
    assert_int_equal(open_fds(), base);

    /* a peer that sends more: the frame is defective and nothing leaks */
    size_t len;
    unsigned char *frame = good_frame(KR__MSG_RESULT, "{\"id\": 1}", &len);
    const int many[] = {KR__FRAME_MAX_FDS + 1, KR__FRAME_MAX_FDS + 5, 20};
    for (size_t i = 0; i < sizeof many / sizeof *many; i++) {
        send_raw_with_fds(sv[0], frame, len, many[i]);
        assert_int_equal(kr__frame_recv(sv[1], &f, 5, why, sizeof why), KR_EPARSE);
        assert_contains(why, "descriptors");
        assert_int_equal(f.num_fds, 0);
        assert_null(f.body);
        assert_int_equal(open_fds(), base);
    }

    /* descriptors on a frame refused for its header are closed too */
    size_t bad_len;
    unsigned char *bad = raw_frame("KRW1", 7, KR__MSG_RESULT, "{}", 2, &bad_len);
    send_raw_with_fds(sv[0], bad, bad_len, 3);
    assert_int_equal(kr__frame_recv(sv[1], &f, 5, why, sizeof why), KR_EPARSE);
    assert_contains(why, "protocol version 7");
    assert_int_equal(open_fds(), base);
    free(bad);
    close(sv[0]);
    close(sv[1]);

    /* and on a frame refused for its payload */
    pair(sv);
    base = open_fds();
    frame[len - 2] ^= 1;
    send_raw_with_fds(sv[0], frame, len, 2);
    assert_int_equal(kr__frame_recv(sv[1], &f, 5, why, sizeof why), KR_EPARSE);
    assert_contains(why, "checksum mismatch");
    assert_int_equal(open_fds(), base);
    frame[len - 2] ^= 1;

    /* a frame's descriptors stay with it: the next frame's are not taken early */
    assert_int_equal(kr__frame_send(sv[0], KR__MSG_JOB, NULL, NULL, 0, why, sizeof why), KR_OK);
    assert_int_equal(kr__frame_send(sv[0], KR__MSG_JOB, NULL, fds, 2, why, sizeof why), KR_OK);
    assert_int_equal(kr__frame_send(sv[0], KR__MSG_JOB, NULL, fds + 2, 1, why, sizeof why), KR_OK);
    const size_t expect[] = {0, 2, 1};
    for (int i = 0; i < 3; i++) {
        assert_int_equal(kr__frame_recv(sv[1], &f, 5, why, sizeof why), KR_OK);
        assert_int_equal(f.num_fds, expect[i]);
        kr__frame_clear(&f);
    }
    assert_int_equal(open_fds(), base);
    free(frame);
    for (int i = 0; i <= KR__FRAME_MAX_FDS; i++)
        close(fds[i]);
    close(sv[0]);
    close(sv[1]);
}

/* Every prefix of a frame, then the peer closes: KR_EIO saying where. */
static void peer_closes_mid_frame(void **state)
{
    (void)state;
    size_t len;
    unsigned char *f = good_frame(KR__MSG_RESULT, bodies[KR__MSG_RESULT], &len);
    for (size_t k = 0; k < len; k++) {
        int sv[2];
        pair(sv);
        if (k)
            write_all(sv[0], f, k);
        close(sv[0]);
        kr__frame fr;
        char why[256] = "";
        assert_int_equal(kr__frame_recv(sv[1], &fr, 5, why, sizeof why), KR_EIO);
        char expect[128];
        if (k == 0)
            snprintf(expect, sizeof expect, "the peer closed the connection");
        else if (k < 16)
            snprintf(expect, sizeof expect, "the peer closed the connection after %zu of 16 "
                     "header bytes", k);
        else
            snprintf(expect, sizeof expect, "the peer closed the connection after %zu of %zu "
                     "payload bytes", k - 16, len - 16);
        assert_string_equal(why, expect);
        assert_null(fr.body);
        close(sv[1]);
    }
    free(f);
}

static volatile sig_atomic_t sigpipes;

static void on_sigpipe(int sig)
{
    (void)sig;
    sigpipes++;
}

typedef struct closer {
    int sock;
    size_t read_first;
} closer;

static void *read_then_close(void *arg)
{
    closer *c = arg;
    char buf[4096];
    size_t got = 0;
    while (got < c->read_first) {
        ssize_t n = read(c->sock, buf, sizeof buf < c->read_first - got ? sizeof buf
                                                                        : c->read_first - got);
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    close(c->sock);
    return NULL;
}

/* Writing to a peer that is gone is KR_EIO, never SIGPIPE: before the
 * frame, and while a large frame is half sent. */
static void no_sigpipe(void **state)
{
    (void)state;
    struct sigaction sa = {0}, old;
    sa.sa_handler = on_sigpipe;
    sigemptyset(&sa.sa_mask);
    assert_int_equal(sigaction(SIGPIPE, &sa, &old), 0);
    sigpipes = 0;

    int sv[2];
    pair(sv);
    close(sv[1]);
    char why[256] = "";
    assert_int_equal(kr__frame_send(sv[0], KR__MSG_BYE, NULL, NULL, 0, why, sizeof why), KR_EIO);
    assert_contains(why, "the peer closed the connection");
    close(sv[0]);

    /* write(2) on the same socket does raise it: the handler is live */
    pair(sv);
    close(sv[1]);
    assert_true(write(sv[0], "x", 1) < 0);
    assert_int_equal(sigpipes, 1);
    sigpipes = 0;
    close(sv[0]);

    for (int nonblock = 0; nonblock < 2; nonblock++) {
        pair(sv);
        if (nonblock)
            assert_int_equal(fcntl(sv[0], F_SETFL, O_NONBLOCK), 0);
        closer c = {sv[1], 100000};
        pthread_t th;
        assert_int_equal(pthread_create(&th, NULL, read_then_close, &c), 0);
        size_t n = 8u << 20;
        char *s = malloc(n);
        memset(s, 'q', n);
        json_t *body = json_object();
        json_object_set_new(body, "s", json_stringn(s, n));
        assert_int_equal(kr__frame_send(sv[0], KR__MSG_RESULT, body, NULL, 0, why, sizeof why),
                         KR_EIO);
        assert_contains(why, "the peer closed the connection after");
        pthread_join(th, NULL);
        json_decref(body);
        free(s);
        close(sv[0]);
    }
    assert_int_equal(sigpipes, 0);
    sigaction(SIGPIPE, &old, NULL);
}

typedef struct dripper {
    int sock;
    const unsigned char *data;
    size_t len;
    double every_s;
    volatile int stop;
} dripper;

static void *drip(void *arg)
{
    dripper *d = arg;
    for (size_t i = 0; i < d->len && !d->stop; i++) {
        if (write(d->sock, d->data + i, 1) != 1)
            break;
        nanosleep(&(struct timespec){0, (long)(d->every_s * 1e9)}, NULL);
    }
    return NULL;
}

static void timeouts(void **state)
{
    (void)state;
    int sv[2];
    pair(sv);
    kr__frame f;
    char why[256];

    /* nothing at all */
    double t0 = now();
    assert_int_equal(kr__frame_recv(sv[1], &f, 0, why, sizeof why), KR_ETIMEOUT);
    assert_true(now() - t0 < 0.5);
    assert_string_equal(why, "timed out with 0 of 16 header bytes");
    t0 = now();
    assert_int_equal(kr__frame_recv(sv[1], &f, 0.2, why, sizeof why), KR_ETIMEOUT);
    assert_true(now() - t0 >= 0.2 && now() - t0 < 2);

    /* half a header, then the peer stalls (its end stays open) */
    size_t len;
    unsigned char *fr = good_frame(KR__MSG_RESULT, "{\"id\": 1, \"status\": 0}", &len);
    write_all(sv[0], fr, 7);
    t0 = now();
    assert_int_equal(kr__frame_recv(sv[1], &f, 0.3, why, sizeof why), KR_ETIMEOUT);
    double took = now() - t0;
    assert_true(took >= 0.3 && took < 3);
    assert_string_equal(why, "timed out with 7 of 16 header bytes");
    assert_null(f.body);
    close(sv[0]);
    close(sv[1]);

    /* the whole header, part of the payload */
    pair(sv);
    write_all(sv[0], fr, 16 + 3);
    assert_int_equal(kr__frame_recv(sv[1], &f, 0.2, why, sizeof why), KR_ETIMEOUT);
    char expect[128];
    snprintf(expect, sizeof expect, "timed out with 3 of %zu payload bytes", len - 16);
    assert_string_equal(why, expect);
    close(sv[0]);
    close(sv[1]);

    /* the deadline is the whole frame's, not each read's: a peer dripping a
     * byte every 50 ms never lets one read wait long, yet the frame takes
     * over 2 s */
    pair(sv);
    dripper d = {sv[0], fr, len, 0.05, 0};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, drip, &d), 0);
    t0 = now();
    assert_int_equal(kr__frame_recv(sv[1], &f, 0.5, why, sizeof why), KR_ETIMEOUT);
    took = now() - t0;
    d.stop = 1;
    pthread_join(th, NULL);
    assert_true(took >= 0.5 && took < 1.5);
    close(sv[0]);
    close(sv[1]);

    /* and with time enough the dripped frame arrives whole */
    pair(sv);
    dripper quick = {sv[0], fr, len, 0.002, 0};
    assert_int_equal(pthread_create(&th, NULL, drip, &quick), 0);
    int rc = kr__frame_recv(sv[1], &f, 30, why, sizeof why);
    pthread_join(th, NULL);
    if (rc != KR_OK)
        fail_msg("%s", why);
    assert_int_equal(json_integer_value(json_object_get(f.body, "id")), 1);
    kr__frame_clear(&f);
    close(sv[0]);
    close(sv[1]);
    free(fr);

    /* timeout < 0 waits as long as it takes */
    pair(sv);
    sender snd = {sv[0], KR__MSG_BYE, NULL, NULL, 0, 0.3, -1, "", 0};
    assert_int_equal(pthread_create(&th, NULL, send_thread, &snd), 0);
    t0 = now();
    assert_int_equal(kr__frame_recv(sv[1], &f, -1, why, sizeof why), KR_OK);
    assert_true(now() - t0 >= 0.25);
    pthread_join(th, NULL);
    assert_int_equal(snd.rc, KR_OK);
    assert_int_equal(f.type, KR__MSG_BYE);
    kr__frame_clear(&f);
    close(sv[0]);
    close(sv[1]);
}

static volatile sig_atomic_t alarms;

static void on_alarm(int sig)
{
    (void)sig;
    alarms++;
}

/* Signals every 5 ms (no SA_RESTART): poll and recvmsg see EINTR over and
 * over; the frame still arrives, and a timeout still lasts its time. */
static void interrupted(void **state)
{
    (void)state;
    struct sigaction sa = {0}, old;
    sa.sa_handler = on_alarm;
    sigemptyset(&sa.sa_mask);
    assert_int_equal(sigaction(SIGALRM, &sa, &old), 0);
    struct itimerval it = {{0, 5000}, {0, 5000}}, off = {{0, 0}, {0, 0}};
    /* the sender's thread must not take the signals for the receiver */
    sigset_t alrm;
    sigemptyset(&alrm);
    sigaddset(&alrm, SIGALRM);
    assert_int_equal(setitimer(ITIMER_REAL, &it, NULL), 0);
    alarms = 0;

    int sv[2];
    pair(sv);
    kr__frame f;
    char why[256];
    double t0 = now();
    assert_int_equal(kr__frame_recv(sv[1], &f, 0.3, why, sizeof why), KR_ETIMEOUT);
    assert_true(now() - t0 >= 0.3);

    pthread_sigmask(SIG_BLOCK, &alrm, NULL);
    sender snd = {sv[0], KR__MSG_HELLO, body_of(bodies[KR__MSG_HELLO]), NULL, 0, 0.2, -1, "",
                  0};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, send_thread, &snd), 0);
    pthread_sigmask(SIG_UNBLOCK, &alrm, NULL);
    int rc = kr__frame_recv(sv[1], &f, 10, why, sizeof why);
    pthread_join(th, NULL);
    setitimer(ITIMER_REAL, &off, NULL);
    sigaction(SIGALRM, &old, NULL);
    if (rc != KR_OK)
        fail_msg("%s", why);
    assert_true(alarms > 20);
    assert_int_equal(f.type, KR__MSG_HELLO);
    assert_true(json_equal(f.body, snd.body));
    kr__frame_clear(&f);
    json_decref(snd.body);
    close(sv[0]);
    close(sv[1]);
}

/* ---- across exec: a child process on the other end ---- */

/* The child: checks that the parent's descriptor did not leak into it,
 * reads a JOB with one blob, answers a RESULT with the blob's checksum,
 * whether its copy is close-on-exec, and a blob of its own (the bytes
 * reversed). */
static int child_main(int sock, int parent_fd)
{
    json_t *body = json_object();
    json_object_set_new(body, "leaked", json_boolean(is_open(parent_fd)));
    kr__frame f;
    char why[256];
    if (kr__frame_recv(sock, &f, 30, why, sizeof why) != KR_OK || f.num_fds != 1) {
        fprintf(stderr, "child: %s\n", why);
        return 1;
    }
    const void *m;
    size_t n;
    if (kr__blob_map(f.fds[0], SIZE_MAX, &m, &n, why, sizeof why) != KR_OK) {
        fprintf(stderr, "child: %s\n", why);
        return 1;
    }
    json_object_set_new(body, "sum", json_integer(XXH32(m, n, 0)));
    json_object_set_new(body, "cloexec", json_boolean(fcntl(f.fds[0], F_GETFD) & FD_CLOEXEC));
    json_object_set(body, "echo", json_object_get(f.body, "text"));
    unsigned char *rev = malloc(n ? n : 1);
    for (size_t i = 0; i < n; i++)
        rev[i] = ((const unsigned char *)m)[n - 1 - i];
    kr__blob_unmap(m, n);
    int fd;
    if (kr__blob_create("child", rev, n, &fd, why, sizeof why) != KR_OK ||
        kr__frame_send(sock, KR__MSG_RESULT, body, &fd, 1, why, sizeof why) != KR_OK) {
        fprintf(stderr, "child: %s\n", why);
        return 1;
    }
    free(rev);
    kr__frame_clear(&f);
    json_decref(body);
    /* wait for BYE: the parent reads our frame before we go */
    if (kr__frame_recv(sock, &f, 30, why, sizeof why) != KR_OK || f.type != KR__MSG_BYE)
        return 1;
    kr__frame_clear(&f);
    return 0;
}

static void blobs_to_child(void **state)
{
    (void)state;
    int sv[2];
    pair(sv);
    size_t n = 1u << 20;
    unsigned char *data = malloc(n);
    for (size_t i = 0; i < n; i++)
        data[i] = (unsigned char)(i ^ (i >> 8));
    int blob;
    char why[256];
    assert_int_equal(kr__blob_create("to-child", data, n, &blob, why, sizeof why), KR_OK);

    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, sv[1], 100); /* dup2 clears close-on-exec */
    char fdarg[16];
    snprintf(fdarg, sizeof fdarg, "%d", blob);
    char *argv[] = {"test_protocol", "--child", "100", fdarg, NULL};
    pid_t pid;
    assert_int_equal(posix_spawn(&pid, "/proc/self/exe", &fa, NULL, argv, environ), 0);
    posix_spawn_file_actions_destroy(&fa);
    close(sv[1]);

    json_t *job = json_object();
    const char *text = "\xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x98\x80";
    json_object_set_new(job, "text", json_string(text));
    assert_int_equal(kr__frame_send(sv[0], KR__MSG_JOB, job, &blob, 1, why, sizeof why), KR_OK);
    kr__frame f;
    if (kr__frame_recv(sv[0], &f, 30, why, sizeof why) != KR_OK)
        fail_msg("%s", why);
    assert_int_equal(f.type, KR__MSG_RESULT);
    assert_false(json_is_true(json_object_get(f.body, "leaked")));
    assert_true(json_is_true(json_object_get(f.body, "cloexec")));
    assert_int_equal(json_integer_value(json_object_get(f.body, "sum")), XXH32(data, n, 0));
    assert_string_equal(json_string_value(json_object_get(f.body, "echo")), text);
    assert_int_equal(f.num_fds, 1);
    const void *m;
    size_t got;
    assert_int_equal(kr__blob_map(f.fds[0], n, &m, &got, why, sizeof why), KR_OK);
    for (size_t i = 0; i < n; i++)
        if (((const unsigned char *)m)[i] != data[n - 1 - i])
            fail_msg("byte %zu of the child's blob", i);
    kr__blob_unmap(m, got);
    kr__frame_clear(&f);
    assert_int_equal(kr__frame_send(sv[0], KR__MSG_BYE, NULL, NULL, 0, why, sizeof why), KR_OK);
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    /* the child is gone: the next read says so */
    assert_int_equal(kr__frame_recv(sv[0], &f, 5, why, sizeof why), KR_EIO);
    json_decref(job);
    close(blob);
    close(sv[0]);
    free(data);
}

/* A GPU job may carry the pool's knowledge of the problem's soundness (so a
 * respawned worker does not check it again); absent, it is unknown (-1),
 * and anything but an integer is not believed. */
static void job_carries_problem_soundness(void **state)
{
    (void)state;
    const char *bodies[] = {
        "{\"id\":1,\"stage\":\"gpu\",\"problem\":\"{}\",\"source\":\"x\"}",
        "{\"id\":1,\"stage\":\"gpu\",\"problem\":\"{}\",\"source\":\"x\",\"problem_weak\":1}",
        "{\"id\":1,\"stage\":\"gpu\",\"problem\":\"{}\",\"source\":\"x\",\"problem_weak\":0}",
        "{\"id\":1,\"stage\":\"gpu\",\"problem\":\"{}\",\"source\":\"x\",\"problem_weak\":\"yes\"}",
    };
    const int want[] = {-1, 1, 0, -1};
    for (size_t i = 0; i < 4; i++) {
        json_t *body = json_loads(bodies[i], 0, NULL);
        assert_non_null(body);
        kr__job_spec s;
        char why[256];
        assert_int_equal(kr__job_decode(body, &s, why, sizeof why), KR_OK);
        assert_int_equal(s.problem_weak, want[i]);
        kr__job_spec_free(&s);
        json_decref(body);
    }
}

/* Parts in one blob come back as the same parts; a blob whose size is not
 * the parts' sum is refused (a peer cannot shift the tensors), and empty
 * parts are fine. */
static void blob_of_parts(void **state)
{
    (void)state;
    unsigned char a[3] = {1, 2, 3}, c[5] = {7, 8, 9, 10, 11};
    const void *parts[3] = {a, NULL, c};
    uint64_t lens[3] = {3, 0, 5};
    char why[256];
    int fd = -1;
    assert_int_equal(kr__blob_create_parts("parts", parts, lens, 3, &fd, why, sizeof why), KR_OK);
    const void *data = NULL, *got[3];
    size_t len = 0;
    assert_int_equal(kr__blob_map_parts(fd, lens, 3, &data, &len, got, why, sizeof why), KR_OK);
    assert_int_equal(len, 8);
    assert_memory_equal(got[0], a, 3);
    assert_memory_equal(got[2], c, 5);
    assert_ptr_equal(got[1], got[2]);
    kr__blob_unmap(data, len);
    uint64_t wrong[3] = {3, 1, 5};
    assert_int_equal(kr__blob_map_parts(fd, wrong, 3, &data, &len, got, why, sizeof why),
                     KR_EPARSE);
    assert_non_null(strstr(why, "9 expected"));
    close(fd);
    uint64_t huge[2] = {UINT64_MAX, 2};
    assert_int_equal(kr__blob_map_parts(-1, huge, 2, &data, &len, got, why, sizeof why),
                     KR_EPARSE);
    const void *missing[1] = {NULL};
    uint64_t one[1] = {1};
    assert_int_equal(kr__blob_create_parts("x", missing, one, 1, &fd, why, sizeof why), KR_EINVAL);
}

int main(int argc, char **argv)
{
    if (argc == 4 && !strcmp(argv[1], "--child"))
        return child_main(atoi(argv[2]), atoi(argv[3]));
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(header_bytes),
        cmocka_unit_test(round_trip_every_type),
        cmocka_unit_test(round_trip_unicode),
        cmocka_unit_test(size_limit),
        cmocka_unit_test(truncated_frames),
        cmocka_unit_test(bad_headers),
        cmocka_unit_test(oversized_length),
        cmocka_unit_test(garbled_payload),
        cmocka_unit_test(not_an_object),
        cmocka_unit_test(socket_round_trip),
        cmocka_unit_test(big_payload),
        cmocka_unit_test(sender_waits),
        cmocka_unit_test(blobs_across_socketpair),
        cmocka_unit_test(blobs_are_immutable),
        cmocka_unit_test(blob_map_refusals),
        cmocka_unit_test(descriptor_limits),
        cmocka_unit_test(peer_closes_mid_frame),
        cmocka_unit_test(no_sigpipe),
        cmocka_unit_test(timeouts),
        cmocka_unit_test(interrupted),
        cmocka_unit_test(blobs_to_child),
        cmocka_unit_test(job_carries_problem_soundness),
        cmocka_unit_test(blob_of_parts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
