/* The cache's value for a compiled program: a flat, versioned byte string.
 * Only what NVRTC produced is stored (image, the PTX beside a CUBIN, log,
 * lowered names, arch, time);
 * kernels and resources are re-read from the image when it is used. */
#include "compile/program_impl.h"
#include "common/strbuf.h"

#include <stdlib.h>
#include <string.h>

#define BLOB_MAGIC 0x4250524bu /* "KRPB" */
#define BLOB_VERSION 2u /* 2: the PTX beside the image */

static void put_u64(kr__buf *b, uint64_t v)
{
    char bytes[8];
    for (int i = 0; i < 8; i++)
        bytes[i] = (char)(v >> (8 * i));
    kr__buf_append(b, bytes, 8);
}

static void put_bytes(kr__buf *b, const void *data, size_t len)
{
    put_u64(b, len);
    kr__buf_append(b, data, len);
}

int kr__program_to_blob(const kr_program *prog, void **blob, size_t *len)
{
    kr__buf b = KR__BUF_INIT;
    uint64_t seconds_bits;
    memcpy(&seconds_bits, &prog->compile_seconds, sizeof seconds_bits);
    put_u64(&b, BLOB_MAGIC);
    put_u64(&b, BLOB_VERSION);
    put_u64(&b, (uint64_t)prog->kind);
    put_u64(&b, seconds_bits);
    put_bytes(&b, prog->arch, strlen(prog->arch));
    put_bytes(&b, prog->image, prog->image_len);
    put_bytes(&b, prog->ptx ? prog->ptx : "", prog->ptx ? prog->ptx_len : 0);
    put_bytes(&b, prog->log, strlen(prog->log));
    put_u64(&b, prog->num_lowered);
    for (size_t i = 0; i < prog->num_lowered; i++) {
        put_bytes(&b, prog->lowered_expr[i], strlen(prog->lowered_expr[i]));
        put_bytes(&b, prog->lowered_name[i], strlen(prog->lowered_name[i]));
    }
    if (b.oom) {
        kr__buf_free(&b);
        return -1;
    }
    *len = b.len;
    *blob = kr__buf_take(&b);
    return *blob ? 0 : -1;
}

typedef struct {
    const unsigned char *p;
    size_t left;
} reader;

static int get_u64(reader *r, uint64_t *v)
{
    if (r->left < 8)
        return -1;
    *v = 0;
    for (int i = 7; i >= 0; i--)
        *v = (*v << 8) | r->p[i];
    r->p += 8;
    r->left -= 8;
    return 0;
}

/* A malloc'd, NUL-terminated copy of the next field. */
static char *get_bytes(reader *r, size_t *len)
{
    uint64_t n;
    if (get_u64(r, &n) != 0 || n > r->left)
        return NULL;
    char *s = kr__strndup((const char *)r->p, (size_t)n);
    r->p += n;
    r->left -= (size_t)n;
    if (len)
        *len = (size_t)n;
    return s;
}

int kr__program_from_blob(kr_program *prog, const void *blob, size_t len)
{
    reader r = {blob, len};
    uint64_t magic, version, kind, seconds_bits, nlow;
    if (get_u64(&r, &magic) || magic != BLOB_MAGIC || get_u64(&r, &version) ||
        version != BLOB_VERSION || get_u64(&r, &kind) || get_u64(&r, &seconds_bits))
        return -1;
    prog->kind = (int)kind;
    memcpy(&prog->compile_seconds, &seconds_bits, sizeof seconds_bits);
    char *arch = get_bytes(&r, NULL);
    if (!arch)
        return -1;
    kr__strlcpy(prog->arch, arch, sizeof prog->arch);
    free(arch);
    if (!(prog->image = (unsigned char *)get_bytes(&r, &prog->image_len)) ||
        !(prog->ptx = get_bytes(&r, &prog->ptx_len)) || !(prog->log = get_bytes(&r, NULL)) ||
        get_u64(&r, &nlow) || nlow > 4096)
        return -1;
    if (!prog->ptx_len) { /* none */
        free(prog->ptx);
        prog->ptx = NULL;
    }
    prog->lowered_expr = calloc(nlow ? nlow : 1, sizeof *prog->lowered_expr);
    prog->lowered_name = calloc(nlow ? nlow : 1, sizeof *prog->lowered_name);
    if (!prog->lowered_expr || !prog->lowered_name)
        return -1;
    for (; prog->num_lowered < nlow; prog->num_lowered++) {
        size_t i = prog->num_lowered;
        prog->lowered_expr[i] = get_bytes(&r, NULL);
        prog->lowered_name[i] = get_bytes(&r, NULL);
        if (!prog->lowered_expr[i] || !prog->lowered_name[i]) {
            prog->num_lowered++; /* so free() sees the partial pair */
            return -1;
        }
    }
    return r.left == 0 && (kind == KR_BINARY_CUBIN || kind == KR_BINARY_PTX) ? 0 : -1;
}
