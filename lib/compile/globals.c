/* A program's writable device memory: every call of a candidate starts
 * from the module's state at load, so no `__device__` variable, no
 * `__constant__` written through its generic address, and no byte beside
 * them can carry a call counter, a cached result or anything else from one
 * call to the next.
 *
 * The image says which globals and constants exist (and, for a CUBIN,
 * their section, offset and size, and the constant banks no symbol names);
 * after the module is loaded the driver says where each is and how large,
 * by name. A global the driver does not find by name (internal linkage can
 * hide it) is placed from its section's layout when two others of the
 * section agree on where the section starts.
 *
 * What is restored is not the symbols but the allocations holding them: for
 * each located address the driver says which allocation contains it
 * (cuMemGetAddressRange), and that allocation is kept and restored whole,
 * each once. So a write past a symbol's end (`c[64]` of a one-element
 * array, a `__constant__`'s generic address plus an offset) lands in bytes
 * that are restored too: alignment padding, the rest of the section, other
 * sections and banks the driver put in the same allocation (a bank no
 * symbol names, e.g. nvcc 13's `.nv.constant4` of relocated pointers, is
 * restored only that way, or where the driver finds its section's name).
 * Where the driver does not answer for an address, or the allocation is
 * implausibly large (WHOLE_SLACK_MAX), the global's own region is restored,
 * as before allocations were: then the bytes past it escape.
 *
 * A writable global that cannot be located makes the program refused as a
 * candidate. A constant that cannot be located does not: it is restored
 * where its bank lies in an allocation restored through another symbol (or
 * its section's name), and escapes otherwise (docs/threat-model.md); an
 * honest `static __constant__` table must not cost a candidate its reward.
 *
 * Each region's contents at load are copied to pageable host memory (out of
 * the device's reach) and written back before every call: zeroed with a
 * memset, then its nonzero spans copied (initialised tables, relocated
 * pointers). Device heap blocks (malloc) and managed variables would outlive
 * a call out of this reach: programs that use them are refused as
 * candidates (program.c). */
#include "compile/program_impl.h"
#include "driver/context_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* What the module's allocations may hold beyond the globals that found
 * them, all together. An allocation is the module's own data as the driver
 * laid it out (sections, banks, alignment: kilobytes, or a page); one that
 * reaches far past its globals is not the module's alone (a pool the driver
 * shares among modules, say), and restoring it would revert memory of
 * others and cost a large memset before every call: the globals in it are
 * then restored one by one, as if the driver had not answered. 64 MiB is far
 * above any module's padding, and a memset of it per call is still cheap
 * (zeros are not copied). */
#define WHOLE_SLACK_MAX ((size_t)64 << 20)
/* zeros shorter than this between two nonzero bytes are copied with them
 * (one copy call instead of two) */
#define SPAN_GAP 4096
/* at most this many copies per region and call: beyond, the smallest gaps
 * are bridged */
#define SPANS_MAX 16

typedef struct {
    CUdeviceptr start;
    size_t bytes;
} piece;

typedef struct {
    piece *whole;        /* allocations to restore whole, each once */
    size_t num_whole;
    piece *own;          /* every located global's (or bank's) own region */
    size_t num_own;
    size_t slack;        /* what the allocations hold beyond the globals that found them */
} layout;

static int contains(const piece *outer, CUdeviceptr start, size_t bytes)
{
    return outer->start <= start && start - outer->start < outer->bytes &&
           bytes <= outer->bytes - (start - outer->start);
}

/* One located region: its own extent, and the allocation holding it where
 * the driver says which and it is plausible. */
static void locate(layout *l, CUdeviceptr addr, size_t bytes)
{
    if (bytes)
        l->own[l->num_own++] = (piece){addr, bytes};
    CUdeviceptr base = 0;
    size_t size = 0;
    if (kr__cuda()->cuMemGetAddressRange(&base, &size, addr) != CUDA_SUCCESS || !size)
        return; /* the driver does not say: the region alone */
    piece range = {base, size};
    if (!contains(&range, addr, bytes))
        return; /* an answer that does not hold the region is no answer */
    for (size_t i = 0; i < l->num_whole; i++)
        if (contains(&l->whole[i], addr, bytes))
            return; /* found through another global already */
    if (size - bytes > WHOLE_SLACK_MAX - l->slack)
        return; /* implausibly large (WHOLE_SLACK_MAX): the region alone */
    l->slack += size - bytes;
    l->whole[l->num_whole++] = range;
}

/* The start of the next run of nonzero bytes at or after pos (n when
 * none); *end is one past its last nonzero byte, gaps under SPAN_GAP
 * bridged. */
static size_t next_span(const unsigned char *c, size_t n, size_t pos, size_t *end)
{
    while (pos < n && !c[pos])
        pos++;
    if (pos == n)
        return n;
    size_t last = pos;
    for (size_t i = pos; i < n && i - last < SPAN_GAP; i++)
        if (c[i])
            last = i;
    *end = last + 1;
    return pos;
}

static int by_size(const void *a, const void *b)
{
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    return x < y ? -1 : x > y;
}

/* The snapshot of a region's host copy: NULL in *out when all zero.
 * -1 when out of memory. */
static int keep_spans(const unsigned char *c, size_t n, kr__global_snapshot **out)
{
    size_t count = 0, cap = 0, end = 0;
    kr__global_span *spans = NULL;
    *out = NULL;
    for (size_t pos = 0, s; (s = next_span(c, n, pos, &end)) < n; pos = end) {
        if (count == cap) {
            cap = cap ? 2 * cap : 16;
            kr__global_span *more = realloc(spans, cap * sizeof *more);
            if (!more) {
                free(spans);
                return -1;
            }
            spans = more;
        }
        spans[count++] = (kr__global_span){s, end - s};
    }
    if (count > SPANS_MAX) {
        /* bridge the smallest gaps, the fewest zeros copied for SPANS_MAX
         * copies */
        size_t *gap = malloc((count - 1) * sizeof *gap);
        if (!gap) {
            free(spans);
            return -1;
        }
        for (size_t i = 0; i + 1 < count; i++)
            gap[i] = spans[i + 1].offset - (spans[i].offset + spans[i].bytes);
        qsort(gap, count - 1, sizeof *gap, by_size);
        size_t bridged = gap[count - SPANS_MAX - 1], kept = 0;
        free(gap);
        for (size_t i = 0; i < count; i++) {
            kr__global_span *last = kept ? &spans[kept - 1] : NULL;
            if (last && spans[i].offset - (last->offset + last->bytes) <= bridged)
                last->bytes = spans[i].offset + spans[i].bytes - last->offset;
            else
                spans[kept++] = spans[i];
        }
        count = kept;
    }
    size_t data = 0;
    for (size_t i = 0; i < count; i++)
        data += spans[i].bytes;
    kr__global_snapshot *snap =
        count ? malloc(sizeof *snap + count * sizeof(kr__global_span) + data) : NULL;
    if (count && !snap) {
        free(spans);
        return -1;
    }
    if (snap) {
        snap->num_spans = count;
        unsigned char *to = (unsigned char *)(snap->span + count);
        for (size_t i = 0; i < count; i++) {
            snap->span[i] = spans[i];
            memcpy(to, c + spans[i].offset, spans[i].bytes);
            to += spans[i].bytes;
        }
    }
    free(spans);
    *out = snap;
    return 0;
}

/* Reads a region's contents at load into a new region of prog. A driver
 * error comes back in *res (the caller decides), KR_ENOMEM as a status. */
static int take(kr_program *prog, piece p, CUresult *res)
{
    *res = CUDA_SUCCESS;
    unsigned char *copy = malloc(p.bytes);
    if (!copy)
        return kr__fail(prog->ctx, KR_ENOMEM, "out of memory for a program's globals");
    *res = kr__cuda()->cuMemcpyDtoH(copy, p.start, p.bytes);
    kr__global_snapshot *snap = NULL;
    int rc = *res == CUDA_SUCCESS && keep_spans(copy, p.bytes, &snap) != 0
                 ? kr__fail(prog->ctx, KR_ENOMEM, "out of memory for a program's globals")
                 : KR_OK;
    free(copy);
    if (rc == KR_OK && *res == CUDA_SUCCESS) {
        kr__global_region *r = &prog->regions[prog->num_regions++];
        r->addr = p.start;
        r->bytes = p.bytes;
        r->initial = snap;
    }
    return rc;
}

static int by_start(const void *a, const void *b)
{
    const piece *x = a, *y = b;
    return x->start < y->start ? -1 : x->start > y->start;
}

/* The regions: every plausible allocation, whole; then the globals' own
 * regions that no allocation kept holds (overlapping ones merged). */
static int take_all(kr_program *prog, layout *l)
{
    size_t kept = 0;
    for (size_t i = 0; i < l->num_whole; i++) {
        CUresult res;
        int rc = take(prog, l->whole[i], &res);
        if (rc != KR_OK)
            return rc;
        if (res == CUDA_SUCCESS)
            l->whole[kept++] = l->whole[i];
        else if (kr__cuda_is_sticky(res))
            return kr__cuda_fail(prog->ctx, res, "reading a program's globals");
        /* else the allocation cannot be read whole: its globals one by one */
    }
    l->num_whole = kept;
    qsort(l->own, l->num_own, sizeof *l->own, by_start);
    for (size_t i = 0; i < l->num_own;) {
        piece p = l->own[i++];
        for (; i < l->num_own && l->own[i].start - p.start < p.bytes; i++) {
            CUdeviceptr end = l->own[i].start + l->own[i].bytes;
            if (end > p.start + p.bytes)
                p.bytes = (size_t)(end - p.start);
        }
        int held = 0;
        for (size_t w = 0; w < l->num_whole && !held; w++)
            held = contains(&l->whole[w], p.start, p.bytes);
        if (held)
            continue;
        CUresult res;
        int rc = take(prog, p, &res);
        if (rc != KR_OK)
            return rc;
        if (res != CUDA_SUCCESS)
            return kr__cuda_fail(prog->ctx, res, "reading a program's globals");
    }
    return KR_OK;
}

/* Where the module's section of global g starts, from the other globals
 * of the section the driver found by name: only when at least two of them
 * agree (the section is laid out as the image says); else 0. */
static CUdeviceptr section_base(const kr_program *prog, const kr__image_global *g,
                                const CUdeviceptr *found)
{
    CUdeviceptr base = 0;
    int agreeing = 0;
    for (size_t i = 0; i < prog->facts.num_globals; i++) {
        const kr__image_global *o = &prog->facts.globals[i];
        if (o == g || o->group != g->group || !found[i])
            continue;
        CUdeviceptr b = found[i] - o->offset;
        if (agreeing && b != base)
            return 0;
        base = b;
        agreeing++;
    }
    return agreeing >= 2 ? base : 0;
}

static const kr__image_group *group_of(const kr__image_facts *f, uint32_t id)
{
    for (size_t i = 0; i < f->num_groups; i++)
        if (f->groups[i].id == id)
            return &f->groups[i];
    return NULL;
}

/* A constant bank's variable (ELF .nv.constant*, PTX .const), not a
 * writable global (.nv.global*, PTX .global). */
static int is_constant(const kr__image_facts *f, const kr__image_global *g)
{
    const kr__image_group *gr = group_of(f, g->group);
    return gr && (strncmp(gr->name, ".nv.constant", 12) == 0 ||
                  strncmp(gr->name, ".const", 6) == 0);
}

/* A CUBIN's sections with a global not placed, or with no global at all (a
 * bank only the compiler uses): the driver may know the section itself by
 * its name (the ELF's section symbol carries it), and then its allocation
 * is restored whole. Unverified on a driver: where it does not, such a
 * section is restored only inside an allocation found through another
 * symbol. */
static void locate_sections(kr_program *prog, layout *l, const CUdeviceptr *placed)
{
    const kr__image_facts *f = &prog->facts;
    for (size_t s = 0; s < f->num_groups; s++) {
        const kr__image_group *gr = &f->groups[s];
        size_t members = 0, unplaced = 0;
        for (size_t i = 0; i < f->num_globals; i++)
            if (f->globals[i].group == gr->id) {
                members++;
                unplaced += !placed[i];
            }
        if (members && !unplaced)
            continue;
        CUdeviceptr addr = 0;
        size_t bytes = 0;
        if (kr__cuda()->cuModuleGetGlobal(&addr, &bytes, prog->module, gr->name) == CUDA_SUCCESS &&
            addr)
            locate(l, addr, bytes);
    }
}

int kr__program_locate_globals(kr_program *prog)
{
    const kr__image_facts *f = &prog->facts;
    size_t n = f->num_globals, most = f->num_globals + f->num_groups;
    if (!most)
        return KR_OK;
    const kr__cuda_api *cu = kr__cuda();
    CUdeviceptr *found = calloc(n + 1, sizeof *found), *placed = calloc(n + 1, sizeof *placed);
    size_t *bytes = calloc(n + 1, sizeof *bytes);
    layout l = {calloc(most, sizeof(piece)), 0, calloc(most, sizeof(piece)), 0, 0};
    prog->regions = calloc(2 * most, sizeof *prog->regions);
    int rc = found && placed && bytes && l.whole && l.own && prog->regions
                 ? KR_OK
                 : kr__fail(prog->ctx, KR_ENOMEM, "out of memory");
    /* first every global the driver knows by name, with the size it gives */
    for (size_t i = 0; i < n && rc == KR_OK; i++)
        if (cu->cuModuleGetGlobal(&found[i], &bytes[i], prog->module, f->globals[i].name) !=
            CUDA_SUCCESS)
            found[i] = 0;
    for (size_t i = 0; i < n && rc == KR_OK; i++) {
        const kr__image_global *g = &f->globals[i];
        CUdeviceptr base = found[i] ? 0 : section_base(prog, g, found);
        if (found[i]) {
            placed[i] = found[i];
            locate(&l, found[i], bytes[i]);
            prog->global_bytes += bytes[i];
        } else if (base && g->size) {
            placed[i] = base + g->offset;
            locate(&l, placed[i], (size_t)g->size);
            prog->global_bytes += g->size;
        } else if (!is_constant(f, g) && !prog->refusal[0]) {
            snprintf(prog->refusal, sizeof prog->refusal,
                     "its device global '%s' cannot be reset between calls (the driver does not "
                     "find it by name): declare it at namespace scope without static",
                     g->name);
        }
        /* a constant not located: restored with its bank's allocation
         * where another symbol found it, else it escapes (see the top) */
    }
    if (rc == KR_OK && prog->kind == KR_BINARY_CUBIN)
        locate_sections(prog, &l, placed);
    if (rc == KR_OK)
        rc = take_all(prog, &l);
    free(found);
    free(placed);
    free(bytes);
    free(l.whole);
    free(l.own);
    return rc;
}

int kr__program_restore_globals(kr_context *ctx, const kr_program *prog, CUstream stream)
{
    const kr__cuda_api *cu = kr__cuda();
    for (size_t i = 0; i < prog->num_regions; i++) {
        const kr__global_region *r = &prog->regions[i];
        const kr__global_snapshot *s = r->initial;
        int whole_copy = s && s->num_spans == 1 && s->span[0].offset == 0 &&
                         s->span[0].bytes == r->bytes;
        CUresult res = whole_copy ? CUDA_SUCCESS : cu->cuMemsetD8Async(r->addr, 0, r->bytes, stream);
        const unsigned char *data = s ? (const unsigned char *)(s->span + s->num_spans) : NULL;
        for (size_t k = 0; s && k < s->num_spans && res == CUDA_SUCCESS; k++) {
            res = cu->cuMemcpyHtoDAsync(r->addr + s->span[k].offset, data, s->span[k].bytes,
                                        stream);
            data += s->span[k].bytes;
        }
        if (res != CUDA_SUCCESS)
            return kr__cuda_fail(ctx, res, "restoring a program's globals");
    }
    return KR_OK;
}

int kr__program_admissible(kr_context *ctx, const kr_program *prog)
{
    if (!prog->refusal[0])
        return KR_OK;
    return kr__fail(ctx, KR_ECOMPILE, "the program is not accepted as a candidate: %s",
                    prog->refusal);
}
