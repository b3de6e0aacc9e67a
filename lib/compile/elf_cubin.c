/* Reading kernels and their parameters from a CUBIN without a GPU.
 *
 * A CUBIN is an ELF64 file (machine EM_CUDA = 190). Kernels are global FUNC
 * symbols flagged STO_CUDA_ENTRY (0x10) in st_other. Each kernel's
 * `.nv.info.<name>` section holds attributes; EIATTR_KPARAM_INFO (0x17)
 * records give each parameter's ordinal, offset and size (size in bits 18..31
 * of the last word); EIATTR_MAX_THREADS (0x05) holds __launch_bounds__.
 * Records other than sized ones take 4 bytes. The layout was read off cubins from nvcc/NVRTC 13 and is
 * cross-checked against cuFuncGetParamInfo in the gpu tests. Every read is
 * bounds-checked: the input may be junk. */
#include "compile/kernels.h"
#include "common/strbuf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EM_CUDA 190
#define STO_CUDA_ENTRY 0x10
#define STO_CUDA_MANAGED 0x04 /* st_other of __managed__ variables (read off NVRTC 13 cubins) */
#define EIATTR_MAX_THREADS 0x05 /* __launch_bounds__: x, y, z as three u32 */
#define EIATTR_KPARAM_INFO 0x17
#define EIFMT_NVAL 0x01
#define EIFMT_BVAL 0x02
#define EIFMT_HVAL 0x03
#define EIFMT_SVAL 0x04

typedef struct {
    const unsigned char *d;
    size_t n;
} span;

static int rd16(span s, size_t off, uint32_t *v)
{
    if (off + 2 > s.n || off + 2 < off)
        return -1;
    *v = (uint32_t)s.d[off] | (uint32_t)s.d[off + 1] << 8;
    return 0;
}

static int rd32(span s, size_t off, uint32_t *v)
{
    if (off + 4 > s.n || off + 4 < off)
        return -1;
    *v = (uint32_t)s.d[off] | (uint32_t)s.d[off + 1] << 8 | (uint32_t)s.d[off + 2] << 16 |
         (uint32_t)s.d[off + 3] << 24;
    return 0;
}

static int rd64(span s, size_t off, uint64_t *v)
{
    uint32_t lo, hi;
    if (rd32(s, off, &lo) || rd32(s, off + 4, &hi))
        return -1;
    *v = (uint64_t)hi << 32 | lo;
    return 0;
}

typedef struct {
    uint32_t name, type;
    uint64_t offset, size;
    uint32_t link, info;
    uint64_t entsize;
} section;

typedef struct {
    span file;
    section *sec;
    uint32_t nsec;
    uint32_t shstrndx;
} elf;

static int read_section(elf *e, uint64_t shoff, uint32_t shentsize, uint32_t i, section *s)
{
    size_t base = (size_t)(shoff + (uint64_t)i * shentsize);
    if (rd32(e->file, base, &s->name) || rd32(e->file, base + 4, &s->type) ||
        rd64(e->file, base + 24, &s->offset) || rd64(e->file, base + 32, &s->size) ||
        rd32(e->file, base + 40, &s->link) || rd32(e->file, base + 44, &s->info) ||
        rd64(e->file, base + 56, &s->entsize))
        return -1;
    if (s->type != 8 /* SHT_NOBITS */ &&
        (s->offset > e->file.n || s->size > e->file.n - s->offset))
        return -1;
    return 0;
}

/* NUL-terminated string at off inside section s, or NULL. */
static const char *str_at(const elf *e, const section *s, uint64_t off)
{
    if (off >= s->size)
        return NULL;
    const char *p = (const char *)e->file.d + s->offset + off;
    if (!memchr(p, '\0', (size_t)(s->size - off)))
        return NULL;
    return p;
}

static int open_elf(elf *e, span file, char *why, size_t why_size)
{
    uint32_t machine, shentsize, shnum, shstrndx;
    uint64_t shoff;
    memset(e, 0, sizeof *e);
    e->file = file;
    if (file.n < 64 || memcmp(file.d, "\177ELF", 4) != 0 || file.d[4] != 2 /* ELFCLASS64 */) {
        snprintf(why, why_size, "not an ELF64 file");
        return -1;
    }
    if (rd16(file, 18, &machine) || machine != EM_CUDA) {
        snprintf(why, why_size, "ELF file is not a CUDA binary (machine %u, expected %u)",
                 machine, EM_CUDA);
        return -1;
    }
    if (rd64(file, 40, &shoff) || rd16(file, 58, &shentsize) || rd16(file, 60, &shnum) ||
        rd16(file, 62, &shstrndx) || shentsize < 64 || shnum == 0 || shstrndx >= shnum) {
        snprintf(why, why_size, "corrupt ELF header");
        return -1;
    }
    e->sec = calloc(shnum, sizeof *e->sec);
    if (!e->sec) {
        snprintf(why, why_size, "out of memory");
        return -1;
    }
    e->nsec = shnum;
    e->shstrndx = shstrndx;
    for (uint32_t i = 0; i < shnum; i++) {
        if (read_section(e, shoff, shentsize, i, &e->sec[i]) != 0) {
            snprintf(why, why_size, "corrupt or truncated section header %u", i);
            free(e->sec);
            e->sec = NULL;
            return -1;
        }
    }
    return 0;
}

static const char *section_name(const elf *e, const section *s)
{
    return str_at(e, &e->sec[e->shstrndx], s->name);
}

static const section *find_section(const elf *e, const char *prefix, const char *name)
{
    size_t plen = strlen(prefix);
    for (uint32_t i = 0; i < e->nsec; i++) {
        const char *n = section_name(e, &e->sec[i]);
        if (n && strncmp(n, prefix, plen) == 0 && strcmp(n + plen, name) == 0)
            return &e->sec[i];
    }
    return NULL;
}

/* Parameters from EIATTR_KPARAM_INFO records; returns 0 even when absent. */
static int read_params(const elf *e, kr__kernel *k)
{
    const section *info = find_section(e, ".nv.info.", k->name);
    if (!info)
        return 0;
    span s = {e->file.d + info->offset, (size_t)info->size};
    uint32_t count = 0, cap = 0;
    uint32_t *off = NULL, *size = NULL;
    size_t pos = 0;
    while (pos + 2 <= s.n) {
        unsigned fmt = s.d[pos], attr = s.d[pos + 1];
        uint32_t len = 0;
        if (fmt == EIFMT_SVAL) {
            if (rd16(s, pos + 2, &len) || pos + 4 + len > s.n)
                break;
            if (attr == EIATTR_KPARAM_INFO && len >= 12) {
                uint32_t ord = 0, poff = 0, word = 0;
                if (rd16(s, pos + 8, &ord) || rd16(s, pos + 10, &poff) ||
                    rd32(s, pos + 12, &word) || ord >= 4096)
                    break;
                if (ord >= cap) {
                    uint32_t ncap = ord + 8;
                    uint32_t *no = realloc(off, ncap * sizeof *no);
                    if (no)
                        off = no;
                    uint32_t *ns = no ? realloc(size, ncap * sizeof *ns) : NULL;
                    if (!no || !ns) {
                        free(off);
                        free(size);
                        return -1;
                    }
                    size = ns;
                    memset(off + cap, 0xff, (ncap - cap) * sizeof *off);
                    cap = ncap;
                }
                off[ord] = poff;
                size[ord] = (word >> 18) & 0x3fff;
                if (ord + 1 > count)
                    count = ord + 1;
            }
            if (attr == EIATTR_MAX_THREADS && len == 12) {
                uint32_t x = 0, y = 0, z = 0;
                rd32(s, pos + 4, &x);
                rd32(s, pos + 8, &y);
                rd32(s, pos + 12, &z);
                if (x && y && z)
                    k->attrs[KR_KERNEL_MAX_THREADS] = (int64_t)x * y * z;
            }
            pos += 4 + len;
        } else if (fmt == EIFMT_HVAL || fmt == EIFMT_BVAL || fmt == EIFMT_NVAL) {
            pos += 4;
        } else {
            break; /* unknown format: stop rather than misread */
        }
    }
    for (uint32_t i = 0; i < count; i++) {
        if (off[i] == UINT32_MAX) { /* a hole: do not trust partial information */
            free(off);
            free(size);
            return 0;
        }
    }
    k->num_params = count;
    k->param_offset = off;
    k->param_size = size;
    k->params_known = 1;
    uint32_t total = 0;
    for (uint32_t i = 0; i < count; i++)
        if (off[i] + size[i] > total)
            total = off[i] + size[i];
    k->attrs[KR_KERNEL_NUM_PARAMS] = count;
    k->attrs[KR_KERNEL_PARAM_BYTES] = total;
    return 0;
}

int kr__cubin_read_kernels(const unsigned char *image, size_t len, kr__kernel **list,
                           size_t *count, char *arch, size_t arch_size, char *why, size_t why_size)
{
    elf e;
    span file = {image, len};
    if (open_elf(&e, file, why, why_size) != 0)
        return -1;
    uint32_t flags = 0, abiver = file.d[8];
    rd32(file, 48, &flags);
    unsigned sm = abiver >= 7 ? (flags >> 8) & 0xff : flags & 0xff;
    if (!arch[0] && sm >= 10)
        snprintf(arch, arch_size, "sm_%u", sm);
    int rc = 0;
    for (uint32_t i = 0; i < e.nsec && rc == 0; i++) {
        const section *symtab = &e.sec[i];
        if (symtab->type != 2 /* SHT_SYMTAB */ || symtab->link >= e.nsec)
            continue;
        const section *strtab = &e.sec[symtab->link];
        for (uint64_t off = 24; off + 24 <= symtab->size; off += 24) {
            span s = {file.d + symtab->offset, (size_t)symtab->size};
            uint32_t name_off = 0;
            if (rd32(s, (size_t)off, &name_off) != 0)
                break;
            unsigned char info = s.d[off + 4], other = s.d[off + 5];
            /* template instantiations are weak, plain kernels global */
            int is_func = (info & 0xf) == 2, is_global = (info >> 4) == 1 || (info >> 4) == 2;
            if (!is_func || !is_global || !(other & STO_CUDA_ENTRY))
                continue;
            const char *name = str_at(&e, strtab, name_off);
            if (!name || !*name) {
                snprintf(why, why_size, "corrupt symbol name");
                rc = -1;
                break;
            }
            if (kr__kernels_add(list, count, name, strlen(name)) != 0 ||
                read_params(&e, &(*list)[*count - 1]) != 0) {
                snprintf(why, why_size, "out of memory");
                rc = -1;
                break;
            }
        }
    }
    free(e.sec);
    return rc;
}

static int add_group(kr__image_facts *f, uint32_t id, uint64_t size, const char *name)
{
    for (size_t i = 0; i < f->num_groups; i++)
        if (f->groups[i].id == id)
            return 0;
    kr__image_group *g = realloc(f->groups, (f->num_groups + 1) * sizeof *g);
    if (!g)
        return -1;
    f->groups = g;
    g[f->num_groups].id = id;
    g[f->num_groups].size = size;
    snprintf(g[f->num_groups].name, sizeof g->name, "%s", name);
    f->num_groups++;
    return 0;
}

static int add_global(kr__image_facts *f, const char *name, uint32_t group, uint64_t offset,
                      uint64_t size)
{
    kr__image_global *g = realloc(f->globals, (f->num_globals + 1) * sizeof *g);
    if (!g)
        return -1;
    f->globals = g;
    g[f->num_globals].group = group;
    g[f->num_globals].offset = offset;
    g[f->num_globals].size = size;
    if (!(g[f->num_globals].name = kr__strdup(name)))
        return -1;
    f->num_globals++;
    return 0;
}

/* The sections whose contents a kernel can change for the next call:
 * .nv.global* (__device__), and the constant banks other than the kernels'
 * parameters (.nv.constant0.<kernel>), named by symbols or not (the
 * compiler's own banks). A __constant__ variable is device memory: its
 * generic address (cvta.const) takes a plain store, so a counter kept there
 * outlived the call until the banks were restored too. */
static int writable_across_calls(const char *sec)
{
    if (strncmp(sec, ".nv.global", 10) == 0)
        return 1;
    return strncmp(sec, ".nv.constant", 12) == 0 && strncmp(sec, ".nv.constant0", 13) != 0;
}

/* One symbol of the symbol table: a writable global (in a .nv.global*
 * or user constant section) is recorded with its group; the heap functions, printf and
 * managed variables are noted. */
static int read_symbol(const elf *e, span s, uint64_t off, const section *strtab,
                       kr__image_facts *f)
{
    uint32_t name_off = 0, shndx = 0;
    uint64_t value = 0, size = 0;
    if (rd32(s, (size_t)off, &name_off) || rd16(s, (size_t)off + 6, &shndx) ||
        rd64(s, (size_t)off + 8, &value) || rd64(s, (size_t)off + 16, &size))
        return -1;
    unsigned char info = s.d[off + 4], other = s.d[off + 5];
    const char *name = str_at(e, strtab, name_off);
    if (!name)
        return -1;
    int type = info & 0xf;
    if (type == 2 /* FUNC */ && shndx == 0 /* undefined: resolved by the driver */ &&
        (!strcmp(name, "malloc") || !strcmp(name, "free") || !strcmp(name, "__nv_aligned_device_malloc")))
        f->uses_heap = 1;
    if (type == 2 && shndx == 0 && !strcmp(name, "vprintf"))
        f->uses_printf = 1;
    if (type != 1 /* OBJECT */ || shndx == 0 || shndx >= e->nsec)
        return 0;
    const char *sec = section_name(e, &e->sec[shndx]);
    if (!sec || !writable_across_calls(sec))
        return 0; /* shared memory, strings, kernel parameters */
    if (other & STO_CUDA_MANAGED)
        f->has_managed = 1;
    if (add_group(f, shndx, e->sec[shndx].size, sec) != 0 ||
        add_global(f, name, shndx, value, size) != 0)
        return -2;
    return 0;
}

int kr__cubin_read_facts(const unsigned char *image, size_t len, kr__image_facts *f, char *why,
                         size_t why_size)
{
    elf e;
    span file = {image, len};
    memset(f, 0, sizeof *f);
    if (open_elf(&e, file, why, why_size) != 0)
        return -1;
    int rc = 0;
    for (uint32_t i = 0; i < e.nsec && rc == 0; i++) {
        const section *symtab = &e.sec[i];
        if (symtab->type != 2 /* SHT_SYMTAB */ || symtab->link >= e.nsec)
            continue;
        span s = {file.d + symtab->offset, (size_t)symtab->size};
        for (uint64_t off = 24; off + 24 <= symtab->size && rc == 0; off += 24)
            rc = read_symbol(&e, s, off, &e.sec[symtab->link], f);
    }
    /* the sections no symbol names (nvcc 13 keeps relocated pointers in
     * `.nv.constant4`, which has none): a group without globals, which
     * globals.c restores where the driver finds it */
    for (uint32_t i = 1; i < e.nsec && rc == 0; i++) {
        const char *sec = section_name(&e, &e.sec[i]);
        if (sec && writable_across_calls(sec) && add_group(f, i, e.sec[i].size, sec) != 0)
            rc = -2;
    }
    free(e.sec);
    if (rc != 0) {
        snprintf(why, why_size, rc == -2 ? "out of memory" : "corrupt symbol table");
        kr__image_facts_free(f);
        return -1;
    }
    return 0;
}
