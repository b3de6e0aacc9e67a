/* Program handles: lifecycle, getters, and binaries compiled elsewhere. */
#include "driver/context_impl.h"
#include "compile/program_impl.h"
#include "common/hash.h"
#include "common/strbuf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

kr_program *kr__program_alloc(kr_context *ctx)
{
    kr_program *prog = calloc(1, sizeof *prog);
    if (prog)
        prog->ctx = ctx;
    return prog;
}

void kr_program_free(kr_program *prog)
{
    if (!prog)
        return;
    /* not kr__device_enter: freeing must leave the context's error text alone */
    if (prog->module && prog->ctx->has_device && !prog->ctx->poisoned &&
        kr__cuda()->cuCtxSetCurrent(prog->ctx->cu) == CUDA_SUCCESS)
        kr__cuda()->cuModuleUnload(prog->module);
    kr__kernels_free(prog->kernels, prog->num_kernels);
    for (size_t i = 0; i < prog->num_regions; i++)
        free(prog->regions[i].initial);
    free(prog->regions);
    kr__image_facts_free(&prog->facts);
    for (size_t i = 0; i < prog->num_lowered; i++) {
        free(prog->lowered_expr[i]);
        free(prog->lowered_name[i]);
    }
    free(prog->lowered_expr);
    free(prog->lowered_name);
    free(prog->image);
    free(prog->ptx);
    free(prog->log);
    free(prog);
}

/* What the image says, without a device: its kernels, its writable globals,
 * whether it may run as a candidate at all. */
static int read_image(kr_program *prog, char *why, size_t why_size)
{
    int cubin = prog->kind == KR_BINARY_CUBIN;
    int rc = (cubin ? kr__cubin_read_kernels : kr__ptx_read_kernels)(
        prog->image, prog->image_len, &prog->kernels, &prog->num_kernels, prog->arch,
        sizeof prog->arch, why, why_size);
    if (rc == 0)
        rc = (cubin ? kr__cubin_read_facts : kr__ptx_read_facts)(prog->image, prog->image_len,
                                                                &prog->facts, why, why_size);
    if (rc == 0 && prog->facts.uses_heap)
        snprintf(prog->refusal, sizeof prog->refusal, "it calls device malloc/free (heap blocks "
                 "outlive a call); declare a scratch buffer in the launch plan instead");
    else if (rc == 0 && prog->facts.has_managed)
        snprintf(prog->refusal, sizeof prog->refusal, "it declares __managed__ variables "
                 "(host-visible state that outlives a call)");
    return rc;
}

const char *kr__program_ptx(const kr_program *prog, size_t *len)
{
    const char *ptx = !prog ? NULL : prog->kind == KR_BINARY_PTX ? (const char *)prog->image
                                                                  : prog->ptx;
    if (len)
        *len = !ptx ? 0 : prog->kind == KR_BINARY_PTX ? prog->image_len : prog->ptx_len;
    return ptx;
}

int kr__program_read_code(const kr_program *prog, kr__ptx_code *out)
{
    size_t len;
    const char *ptx = kr__program_ptx(prog, &len);
    char why[128];
    if (!ptx) {
        memset(out, 0, sizeof *out);
        return -1;
    }
    return kr__ptx_code_read(ptx, len, out, why, sizeof why);
}

/* The image's facts, and the module loaded where a device exists and `load`. */
static int finish(kr_program *prog, int load)
{
    char why[512] = "";
    if (read_image(prog, why, sizeof why) != 0)
        return kr__fail(prog->ctx, KR_EPARSE, "cannot read the kernels of the program: %s", why);
    if (!prog->ctx->has_device || !load)
        return KR_OK;
    int rc = kr__program_load(prog);
    if (rc == KR_ECUDA) {
        /* e.g. compiled for another arch on purpose: the program stays usable
         * as an image; load_why says why it cannot run here */
        kr__clear_error(prog->ctx);
        rc = KR_OK;
    }
    return rc;
}

int kr__program_finish(kr_program *prog)
{
    return finish(prog, 1);
}

int kr__program_finish_unloaded(kr_program *prog)
{
    return finish(prog, 0);
}

static int looks_like_ptx(const char *text, size_t len)
{
    /* PTX is text that declares a version and a target before any code */
    size_t scan = len < 4096 ? len : 4096;
    char head[4097];
    memcpy(head, text, scan);
    head[scan] = '\0';
    if (strlen(head) != scan)
        return 0; /* a NUL byte inside: binary, not PTX */
    return strstr(head, ".version") && strstr(head, ".target");
}

int kr_program_from_binary(kr_program **out, kr_context *ctx, const void *data, size_t len,
                           const char *name)
{
    if (!ctx || !out)
        return KR_EINVAL;
    *out = NULL;
    kr__clear_error(ctx);
    if (!data || len == 0)
        return kr__fail(ctx, KR_EINVAL, "%s: empty binary", name ? name : "binary");
    int kind;
    const unsigned char *bytes = data;
    if (len >= 4 && memcmp(bytes, "\177ELF", 4) == 0)
        kind = KR_BINARY_CUBIN;
    else if (looks_like_ptx(data, len))
        kind = KR_BINARY_PTX;
    else if (len >= 4 && bytes[0] == 0x50 && bytes[1] == 0xed && bytes[2] == 0x55 && bytes[3] == 0xba)
        return kr__fail(ctx, KR_EUNSUPPORTED,
                        "%s: a fatbinary; pass the CUBIN for one architecture instead",
                        name ? name : "binary");
    else
        return kr__fail(ctx, KR_EPARSE,
                        "%s: neither a CUBIN (ELF) nor PTX text (no .version/.target header)",
                        name ? name : "binary");
    kr_program *prog = kr__program_alloc(ctx);
    if (!prog || !(prog->image = malloc(len + 1)) || !(prog->log = kr__strdup(""))) {
        kr_program_free(prog);
        return kr__fail(ctx, KR_ENOMEM, "out of memory");
    }
    memcpy(prog->image, data, len);
    prog->image[len] = '\0'; /* PTX is handed to the driver as a C string */
    prog->image_len = len;
    prog->kind = kind;
    prog->cache_result = KR_CACHE_SKIPPED;
    kr__hash128_hex(kr__hash128_of(data, len), prog->hash);
    int rc = kr__program_finish(prog);
    if (rc == KR_OK && prog->num_kernels == 0)
        rc = kr__fail(ctx, KR_ENOTFOUND, "%s: the binary defines no kernel", name ? name : "binary");
    if (rc != KR_OK) {
        kr_program_free(prog);
        return rc;
    }
    *out = prog;
    return KR_OK;
}

int kr_program_binary(const void **data, size_t *len, int *kind, const kr_program *prog)
{
    if (!prog)
        return KR_EINVAL;
    if (data)
        *data = prog->image;
    if (len)
        *len = prog->image_len;
    if (kind)
        *kind = prog->kind;
    return KR_OK;
}

const char *kr_program_log(const kr_program *prog)
{
    return prog && prog->log ? prog->log : "";
}

const char *kr_program_arch(const kr_program *prog)
{
    return prog ? prog->arch : "";
}

double kr_program_compile_seconds(const kr_program *prog)
{
    return prog ? prog->compile_seconds : 0.0;
}

int kr_program_cache_result(const kr_program *prog)
{
    return prog ? prog->cache_result : KR_CACHE_MISS;
}

const char *kr_program_hash(const kr_program *prog)
{
    return prog ? prog->hash : "";
}

size_t kr_program_kernel_count(const kr_program *prog)
{
    return prog ? prog->num_kernels : 0;
}

const char *kr_program_kernel_name(const kr_program *prog, size_t i)
{
    return prog && i < prog->num_kernels ? prog->kernels[i].name : NULL;
}

const char *kr_program_lowered_name(const kr_program *prog, const char *expr)
{
    if (!prog || !expr)
        return NULL;
    for (size_t i = 0; i < prog->num_lowered; i++)
        if (strcmp(prog->lowered_expr[i], expr) == 0)
            return prog->lowered_name[i];
    return NULL;
}

size_t kr_program_find_kernel(const kr_program *prog, const char *name)
{
    if (!prog || !name)
        return SIZE_MAX;
    const char *lowered = kr_program_lowered_name(prog, name);
    for (size_t i = 0; i < prog->num_kernels; i++)
        if (strcmp(prog->kernels[i].name, name) == 0 ||
            (lowered && strcmp(prog->kernels[i].name, lowered) == 0))
            return i;
    return SIZE_MAX;
}

int kr__program_check_owner(kr_context *ctx, const kr_program *prog, const char *what)
{
    if (prog->ctx == ctx)
        return KR_OK;
    return kr__fail(ctx, KR_EINVAL, "%s was made by another context: a program can only be used "
                    "with the context that compiled or loaded it", what);
}

kr__kernel *kr__program_kernel(const kr_program *prog, const char *name)
{
    size_t i = kr_program_find_kernel(prog, name);
    return i == SIZE_MAX ? NULL : &prog->kernels[i];
}

int64_t kr_program_kernel_attr(const kr_program *prog, size_t kernel, int attr)
{
    if (!prog || kernel >= prog->num_kernels || attr <= 0 || attr >= KR__KERNEL_ATTR_MAX)
        return -1;
    return prog->kernels[kernel].attrs[attr];
}

int kr_program_kernel_param(uint32_t *offset, uint32_t *size, const kr_program *prog, size_t kernel,
                            size_t param)
{
    if (!prog || kernel >= prog->num_kernels)
        return KR_EINVAL;
    const kr__kernel *k = &prog->kernels[kernel];
    if (!k->params_known)
        return KR_EUNSUPPORTED;
    if (param >= k->num_params)
        return KR_ENOTFOUND;
    if (offset)
        *offset = k->param_offset[param];
    if (size)
        *size = k->param_size[param];
    return KR_OK;
}
