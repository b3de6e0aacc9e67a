/* A program's writable device memory: every call of a candidate starts
 * from the module's state at load, so no `__device__` variable, no
 * `__constant__` written through its generic address, and no byte of their
 * sections beside them can carry a call counter, a cached result or
 * anything else from one call to the next.
 *
 * The image says which globals and constants exist (and, for a CUBIN,
 * their section, offset and size, each section's size, and the constant
 * banks no symbol names); after the module is loaded the driver says where
 * each is and how large, by name. A global the driver does not find by name
 * (internal linkage can hide it) is placed from its section's layout when
 * two others of the section agree on where the section starts.
 *
 * What is restored is the module's own sections, no more: a CUBIN section
 * lies at a located symbol's address minus its offset in the section (one
 * symbol found by name places it; all found in it must agree, and lie inside
 * it as the image sizes it), and exactly its bytes, [start, start + size),
 * are kept at load and written back before every call, cut to the
 * allocation the driver says holds its symbols (cuMemGetAddressRange) where
 * it answers. An answer that is one variable's own bytes says nothing of
 * the section around it: the H200's driver registers each `.nv.global`
 * variable alone, and its copies refuse the padding between them, which a
 * kernel's stores reach all the same. Such a section, where the driver
 * finds each of its variables by name, is read variable by variable (its
 * padding taken as zero, as a NOBITS section and the compiler's padding
 * are), cut to the span from its first variable to its last, and written
 * back by the engine's kernel (ctx->device_write, kr_device_write),
 * padding and all. So a write past a symbol's end that stays in its section
 * (`c[32]` of a one-element array into the alignment padding before the
 * next variable, a `__constant__`'s generic address plus an offset within
 * its bank) is restored too. Nothing outside the sections is: the driver
 * may pool several modules' data in one allocation (the library's builtin
 * kernels, the problem's reference, other candidates), and restoring bytes
 * of another module to what they held at this program's load would revert
 * its state, or overwrite the initialised data of a module loaded after this
 * snapshot. So **a write beyond the module's sections escapes** (padding
 * between sections, another module's data): its bytes keep what the last
 * call left (docs/threat-model.md).
 *
 * A section no symbol found by name places (a bank no symbol names, e.g.
 * nvcc 13's `.nv.constant4` of relocated pointers; a section whose symbols
 * the driver does not find) is restored where the driver finds the section
 * itself by its name, and not otherwise. A section whose symbols disagree
 * with the image's layout, and every global of a PTX image (no section
 * layout: each is its own group), is restored symbol by symbol: its own
 * bytes, as the driver sizes it; the bytes past it escape.
 *
 * A writable global that cannot be located makes the program refused as a
 * candidate. A constant that cannot be located does not: it is restored
 * with its section where another symbol of it (or the section's name)
 * places the section, and escapes otherwise (docs/threat-model.md); an
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

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A section's size needs no bound of its own: it is the module's memory,
 * as large as the driver allocated it to load the image (a large
 * `__device__` array's section costs its memset per call, as its symbol did
 * before sections), and it is cut to the driver's allocation where the
 * driver answers. */

/* zeros shorter than this between two nonzero bytes are copied with them
 * (one copy call instead of two) */
#define SPAN_GAP 4096
/* at most this many copies per region and call: beyond, the smallest gaps
 * are bridged */
#define SPANS_MAX 16

typedef struct {
    CUdeviceptr start;
    size_t bytes;
    int by_kernel; /* a section whose padding the driver's copies refuse */
} piece;

typedef struct {
    piece *section;      /* the module's sections placed, each cut to its allocation */
    size_t num_section;
    piece *own;          /* every located global's own region */
    size_t num_own;
} layout;

static int contains(const piece *outer, CUdeviceptr start, size_t bytes)
{
    return outer->start <= start && start - outer->start < outer->bytes &&
           bytes <= outer->bytes - (start - outer->start);
}

/* One past p's last byte, or the top of the address space. */
static CUdeviceptr end_of(piece p)
{
    return p.bytes > (CUdeviceptr)-1 - p.start ? (CUdeviceptr)-1 : p.start + p.bytes;
}

/* The allocation the driver says holds [addr, addr + bytes): 1 with it in
 * *a; 0 when the driver does not answer; -1 when its answer does not hold
 * the region (a placement the driver contradicts). */
static int allocation_of(CUdeviceptr addr, size_t bytes, piece *a)
{
    CUdeviceptr base = 0;
    size_t size = 0;
    if (kr__cuda()->cuMemGetAddressRange(&base, &size, addr) != CUDA_SUCCESS || !size)
        return 0;
    *a = (piece){base, size, 0};
    return contains(a, addr, bytes) ? 1 : -1;
}

/* p cut to what of it lies in a; 0 when nothing does. */
static int clamp(piece *p, piece a)
{
    CUdeviceptr start = p->start > a.start ? p->start : a.start;
    CUdeviceptr end = end_of(*p) < end_of(a) ? end_of(*p) : end_of(a);
    if (end <= start)
        return 0;
    *p = (piece){start, (size_t)(end - start), p->by_kernel};
    return 1;
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

/* What a section the driver's copies read only variable by variable held
 * at load: each located global inside it read alone, its padding zero (a
 * NOBITS section is zeroed at load, an initialised one's padding is the
 * compiler's zeros; no honest program reads padding either way). */
static CUresult read_by_variables(unsigned char *copy, piece p, const piece *own, size_t num_own)
{
    memset(copy, 0, p.bytes);
    for (size_t i = 0; i < num_own; i++) {
        if (!contains(&p, own[i].start, own[i].bytes))
            continue;
        CUresult r = kr__cuda()->cuMemcpyDtoH(copy + (own[i].start - p.start), own[i].start,
                                             own[i].bytes);
        if (r != CUDA_SUCCESS)
            return r;
    }
    return CUDA_SUCCESS;
}

/* Reads a region's contents at load into a new region of prog (own: the
 * located globals, for a section read by its variables). A driver error
 * comes back in *res (the caller decides), KR_ENOMEM as a status. */
static int take(kr_program *prog, piece p, const piece *own, size_t num_own, CUresult *res)
{
    *res = CUDA_SUCCESS;
    unsigned char *copy = malloc(p.bytes ? p.bytes : 1);
    if (!copy)
        return kr__fail(prog->ctx, KR_ENOMEM, "out of memory for a program's globals");
    *res = p.by_kernel ? read_by_variables(copy, p, own, num_own)
                       : kr__cuda()->cuMemcpyDtoH(copy, p.start, p.bytes);
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
        r->by_kernel = p.by_kernel;
    }
    return rc;
}

static int by_start(const void *a, const void *b)
{
    const piece *x = a, *y = b;
    return x->start < y->start ? -1 : x->start > y->start;
}


/* Sorts and merges overlapping or adjacent pieces (each the module's own:
 * their union is too); returns how many are left. */
static size_t merge(piece *p, size_t n)
{
    size_t kept = 0;
    qsort(p, n, sizeof *p, by_start);
    for (size_t i = 0; i < n; i++) {
        piece *last = kept ? &p[kept - 1] : NULL;
        /* a section read by its variables stays apart from one read whole:
         * each is read and written its own way */
        if (last && p[i].start <= end_of(*last) && p[i].by_kernel == last->by_kernel) {
            if (end_of(p[i]) > end_of(*last))
                last->bytes = (size_t)(end_of(p[i]) - last->start);
        } else {
            p[kept++] = p[i];
        }
    }
    return kept;
}

/* The regions: every section placed, whole; then the globals' own regions
 * that no section kept holds (overlapping ones merged). */
static int take_all(kr_program *prog, layout *l)
{
    size_t kept = 0;
    l->num_section = merge(l->section, l->num_section);
    for (size_t i = 0; i < l->num_section; i++) {
        CUresult res;
        int rc = take(prog, l->section[i], l->own, l->num_own, &res);
        if (rc != KR_OK)
            return rc;
        if (res == CUDA_SUCCESS)
            l->section[kept++] = l->section[i];
        else if (kr__cuda_is_sticky(res))
            return kr__cuda_fail(prog->ctx, res, "reading a program's globals");
        /* else the section cannot be read whole: its globals one by one */
    }
    l->num_section = kept;
    qsort(l->own, l->num_own, sizeof *l->own, by_start);
    for (size_t i = 0; i < l->num_own;) {
        piece p = l->own[i++];
        for (; i < l->num_own && l->own[i].start - p.start < p.bytes; i++) {
            CUdeviceptr end = l->own[i].start + l->own[i].bytes;
            if (end > p.start + p.bytes)
                p.bytes = (size_t)(end - p.start);
        }
        int held = 0;
        for (size_t s = 0; s < l->num_section && !held; s++)
            held = contains(&l->section[s], p.start, p.bytes);
        if (held)
            continue;
        CUresult res;
        int rc = take(prog, p, NULL, 0, &res);
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


/* Where section gr of a CUBIN lies, from its symbols the driver found by
 * name: each one's address minus its offset in the section (one is enough;
 * all must agree and lie inside the section as the image sizes it), cut to
 * the allocation the driver says holds each, where it answers. 0 when the
 * section cannot be placed so (no symbol found, or a layout the driver
 * contradicts: then its symbols are restored alone). */
/* A section written by the kernel: only where the driver found every one
 * of its variables by name (a variable it does not find, a static table,
 * would be read as zeros and restored so), and cut to the span from the
 * first variable's start to the last one's end, bytes the driver placed
 * on both sides (the padding between them is what the kernel restores).
 * 0: not so (its variables are then restored alone). */
static int kernel_span(const kr__image_facts *f, const kr__image_group *gr,
                       const CUdeviceptr *found, const size_t *bytes, piece *out)
{
    CUdeviceptr lo = (CUdeviceptr)-1, hi = 0;
    for (size_t i = 0; i < f->num_globals; i++) {
        if (f->globals[i].group != gr->id)
            continue;
        if (!found[i])
            return 0;
        if (found[i] < lo)
            lo = found[i];
        if (found[i] + bytes[i] > hi)
            hi = found[i] + bytes[i];
    }
    if (hi <= lo || lo < out->start || hi > end_of(*out))
        return 0;
    out->start = lo;
    out->bytes = (size_t)(hi - lo);
    return 1;
}

static int place_section(const kr_program *prog, const kr__image_group *gr,
                         const CUdeviceptr *found, const size_t *bytes, piece *out)
{
    const kr__image_facts *f = &prog->facts;
    CUdeviceptr base = 0;
    int any = 0;
    if (!gr->size || gr->size > SIZE_MAX)
        return 0;
    for (size_t i = 0; i < f->num_globals; i++) {
        const kr__image_global *g = &f->globals[i];
        if (g->group != gr->id || !found[i])
            continue;
        if (found[i] < g->offset || g->offset > gr->size || bytes[i] > gr->size - g->offset)
            return 0;
        CUdeviceptr b = found[i] - g->offset;
        if (any && b != base)
            return 0;
        base = b;
        any = 1;
    }
    if (!any || gr->size - 1 > (CUdeviceptr)-1 - base)
        return 0;
    *out = (piece){base, (size_t)gr->size, 0};
    for (size_t i = 0; i < f->num_globals; i++) {
        piece a;
        int r = f->globals[i].group == gr->id && found[i] ? allocation_of(found[i], bytes[i], &a) : 0;
        if (r < 0)
            return 0;
        if (r > 0 && a.start == found[i] && a.bytes == bytes[i] && !contains(&a, out->start, out->bytes)) {
            /* the driver registers this variable alone (the H200's driver
             * does so for .nv.global): its answer says nothing of the
             * section around it, and its copies refuse the padding there */
            out->by_kernel = 1;
            continue;
        }
        if (r > 0 && !clamp(out, a))
            return 0;
    }
    return !out->by_kernel || kernel_span(f, gr, found, bytes, out);
}

/* A section no symbol found by name places (a bank no symbol names, or
 * one whose symbols the driver does not find): the driver may know the
 * section itself by its name (the ELF's section symbol carries it, at the
 * section's start). Unverified on a driver: where it does not, the section
 * is not restored. */
static int place_section_by_name(const kr_program *prog, const kr__image_group *gr, piece *out)
{
    CUdeviceptr addr = 0;
    size_t bytes = 0;
    if (!gr->size || gr->size > SIZE_MAX ||
        kr__cuda()->cuModuleGetGlobal(&addr, &bytes, prog->module, gr->name) != CUDA_SUCCESS ||
        !addr || bytes > gr->size || gr->size - 1 > (CUdeviceptr)-1 - addr)
        return 0;
    *out = (piece){addr, (size_t)gr->size, 0};
    piece a;
    int r = allocation_of(addr, bytes, &a);
    return r == 0 || (r > 0 && clamp(out, a));
}

/* Every section of a CUBIN that can be placed (see the top). */
static void place_sections(kr_program *prog, layout *l, const CUdeviceptr *found,
                           const size_t *bytes)
{
    const kr__image_facts *f = &prog->facts;
    for (size_t s = 0; s < f->num_groups; s++) {
        const kr__image_group *gr = &f->groups[s];
        int any_found = 0;
        for (size_t i = 0; i < f->num_globals && !any_found; i++)
            any_found = f->globals[i].group == gr->id && found[i];
        piece p;
        if (any_found ? place_section(prog, gr, found, bytes, &p)
                      : place_section_by_name(prog, gr, &p))
            l->section[l->num_section++] = p;
    }
}

int kr__program_locate_globals(kr_program *prog)
{
    const kr__image_facts *f = &prog->facts;
    size_t n = f->num_globals, most = f->num_globals + f->num_groups;
    if (!most)
        return KR_OK;
    const kr__cuda_api *cu = kr__cuda();
    CUdeviceptr *found = calloc(n + 1, sizeof *found);
    size_t *bytes = calloc(n + 1, sizeof *bytes);
    layout l = {calloc(most, sizeof(piece)), 0, calloc(most, sizeof(piece)), 0};
    prog->regions = calloc(most, sizeof *prog->regions);
    int rc = found && bytes && l.section && l.own && prog->regions
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
            if (bytes[i])
                l.own[l.num_own++] = (piece){found[i], bytes[i], 0};
            prog->global_bytes += bytes[i];
        } else if (base && g->size) {
            l.own[l.num_own++] = (piece){base + g->offset, (size_t)g->size, 0};
            prog->global_bytes += g->size;
        } else if (!is_constant(f, g) && !prog->refusal[0]) {
            snprintf(prog->refusal, sizeof prog->refusal,
                     "its device global '%s' cannot be reset between calls (the driver does not "
                     "find it by name): declare it at namespace scope without static",
                     g->name);
        }
        /* a constant not located: restored with its section where another
         * symbol or the section's name places it, else it escapes (see the
         * top) */
    }
    /* a PTX image has no section layout: its globals alone */
    if (rc == KR_OK && prog->kind == KR_BINARY_CUBIN)
        place_sections(prog, &l, found, bytes);
    if (rc == KR_OK)
        rc = take_all(prog, &l);
    free(found);
    free(bytes);
    free(l.section);
    free(l.own);
    return rc;
}

/* Bytes written through the driver's copies (src NULL: zeros), the
 * context's device_write's twin for a region the driver's copies reach. */
static int driver_write(kr_context *ctx, CUdeviceptr dst, const void *src, size_t bytes,
                        CUstream stream)
{
    const kr__cuda_api *cu = kr__cuda();
    CUresult res = src ? cu->cuMemcpyHtoDAsync(dst, src, bytes, stream)
                       : cu->cuMemsetD8Async(dst, 0, bytes, stream);
    return res == CUDA_SUCCESS ? KR_OK : kr__cuda_fail(ctx, res, "restoring a program's globals");
}

/* Every region as at load: zeroed (unless one span covers it), then its
 * nonzero spans written; a section the driver's copies read only variable
 * by variable through the engine's kernel (ctx->device_write). */
int kr__program_restore_globals(kr_context *ctx, const kr_program *prog, CUstream stream)
{
    for (size_t i = 0; i < prog->num_regions; i++) {
        const kr__global_region *r = &prog->regions[i];
        int (*write)(kr_context *, CUdeviceptr, const void *, size_t, CUstream) =
            r->by_kernel ? ctx->device_write : driver_write;
        if (!write)
            return kr__fail(ctx, KR_ECUDA, "restoring a program's globals needs the engine's "
                                           "kernels (its sections' padding is out of the "
                                           "driver's copies)");
        const kr__global_snapshot *s = r->initial;
        int whole = s && s->num_spans == 1 && s->span[0].offset == 0 && s->span[0].bytes == r->bytes;
        int rc = whole ? KR_OK : write(ctx, r->addr, NULL, r->bytes, stream);
        const unsigned char *data = s ? (const unsigned char *)(s->span + s->num_spans) : NULL;
        for (size_t k = 0; s && k < s->num_spans && rc == KR_OK; k++) {
            rc = write(ctx, r->addr + s->span[k].offset, data, s->span[k].bytes, stream);
            data += s->span[k].bytes;
        }
        if (rc != KR_OK)
            return rc;
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
