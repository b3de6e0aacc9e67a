/* Reading kernels and parameter sizes from PTX text (e.g. from Triton).
 *
 * Each `.entry NAME ( .param TYPE NAME[, ...] )` is a kernel. Parameter
 * offsets follow the PTX ABI: each parameter aligned to its .align (or its
 * element size), in order. The target line (`.target sm_90a`) names the arch. */
#include "compile/kernels.h"
#include "compile/ptx_code.h"
#include "common/strbuf.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Comments blanked, so no scanner mistakes a commented-out `.entry` for a
 * kernel (ptx_code.h). */
char *kr__ptx_blank_comments(const char *text, size_t len)
{
    char *out = kr__strndup(text, len);
    if (!out)
        return NULL;
    for (size_t i = 0; i < len; i++) {
        if (out[i] == '"') {
            for (i++; i < len && out[i] != '"' && out[i] != '\n'; i++)
                ;
        } else if (out[i] == '/' && i + 1 < len && out[i + 1] == '/') {
            while (i < len && out[i] != '\n')
                out[i++] = ' ';
        } else if (out[i] == '/' && i + 1 < len && out[i + 1] == '*') {
            while (i < len && !(out[i] == '*' && i + 1 < len && out[i + 1] == '/'))
                out[i++] = ' ';
            if (i + 1 < len)
                out[i] = out[i + 1] = ' ';
        } else if (out[i] == '\0') {
            out[i] = ' ';
        }
    }
    return out;
}

static int is_ident(int c)
{
    return isalnum(c) || c == '_' || c == '$' || c == '%' || c == '.';
}

static unsigned scalar_size(const char *type)
{
    static const struct {
        const char *name;
        unsigned size;
    } types[] = {{"b8", 1},  {"u8", 1},  {"s8", 1},  {"b16", 2}, {"u16", 2}, {"s16", 2},
                 {"f16", 2}, {"b32", 4}, {"u32", 4}, {"s32", 4}, {"f32", 4}, {"b64", 8},
                 {"u64", 8}, {"s64", 8}, {"f64", 8}, {"b128", 16}};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
        if (strcmp(type, types[i].name) == 0)
            return types[i].size;
    return 0;
}

/* One parameter declaration between commas: returns its size and alignment. */
static int param_decl(const char *p, const char *end, unsigned *size, unsigned *align)
{
    unsigned elem = 0, count = 1, al = 0;
    while (p < end) {
        while (p < end && isspace((unsigned char)*p))
            p++;
        const char *tok = p;
        while (p < end && !isspace((unsigned char)*p))
            p++;
        char word[128];
        size_t n = (size_t)(p - tok) < sizeof word - 1 ? (size_t)(p - tok) : sizeof word - 1;
        memcpy(word, tok, n);
        word[n] = '\0';
        if (strcmp(word, ".align") == 0) {
            al = (unsigned)strtoul(p, NULL, 10);
            while (p < end && isspace((unsigned char)*p))
                p++;
            while (p < end && isdigit((unsigned char)*p))
                p++;
        } else if (word[0] == '.' && scalar_size(word + 1)) {
            elem = scalar_size(word + 1);
        } else if (word[0] && word[0] != '.') {
            char *br = strchr(word, '[');
            if (br)
                count = (unsigned)strtoul(br + 1, NULL, 10);
        }
    }
    if (!elem || !count)
        return -1;
    *size = elem * count;
    *align = al ? al : elem;
    return 0;
}

static int read_params(kr__kernel *k, const char *open_paren, const char **after)
{
    const char *close = strchr(open_paren, ')');
    if (!close)
        return -1;
    *after = close + 1;
    uint32_t n = 0, cap = 0, cursor = 0;
    const char *p = open_paren + 1;
    while (p < close) {
        const char *comma = memchr(p, ',', (size_t)(close - p));
        const char *stop = comma ? comma : close;
        const char *q = p;
        while (q < stop && isspace((unsigned char)*q))
            q++;
        if (q < stop) {
            unsigned size, align;
            if (param_decl(q, stop, &size, &align) != 0)
                return -1;
            if (n == cap) {
                cap = cap ? cap * 2 : 8;
                uint32_t *no = realloc(k->param_offset, cap * sizeof *no);
                if (no)
                    k->param_offset = no;
                uint32_t *ns = no ? realloc(k->param_size, cap * sizeof *ns) : NULL;
                if (!ns)
                    return -1;
                k->param_size = ns;
            }
            cursor = (cursor + align - 1) / align * align;
            k->param_offset[n] = cursor;
            k->param_size[n] = size;
            cursor += size;
            n++;
        }
        p = stop + 1;
    }
    k->num_params = n;
    k->params_known = 1;
    k->attrs[KR_KERNEL_NUM_PARAMS] = n;
    k->attrs[KR_KERNEL_PARAM_BYTES] = cursor;
    return 0;
}

int kr__ptx_read_kernels(const unsigned char *image, size_t image_len, kr__kernel **list,
                         size_t *count, char *arch, size_t arch_size, char *why, size_t why_size)
{
    char *text = kr__ptx_blank_comments((const char *)image, image_len);
    if (!text) {
        snprintf(why, why_size, "out of memory");
        return -1;
    }
    const char *target = strstr(text, ".target");
    if (target && !arch[0]) {
        const char *a = target + 7;
        while (*a == ' ' || *a == '\t')
            a++;
        size_t n = 0;
        while (a[n] && (isalnum((unsigned char)a[n]) || a[n] == '_') && n < arch_size - 1)
            n++;
        memcpy(arch, a, n);
        arch[n] = '\0';
    }
    int rc = 0;
    for (const char *p = text; (p = strstr(p, ".entry")) != NULL;) {
        int standalone = (p == text || !is_ident((unsigned char)p[-1])) && isspace((unsigned char)p[6]);
        p += 6;
        if (!standalone)
            continue;
        while (isspace((unsigned char)*p))
            p++;
        const char *name = p;
        while (is_ident((unsigned char)*p) && *p != '.')
            p++;
        size_t len = (size_t)(p - name);
        while (isspace((unsigned char)*p))
            p++;
        if (len == 0 || *p != '(') {
            snprintf(why, why_size, "malformed .entry declaration in PTX");
            rc = -1;
            break;
        }
        if (kr__kernels_add(list, count, name, len) != 0 ||
            read_params(&(*list)[*count - 1], p, &p) != 0) {
            snprintf(why, why_size, "malformed parameter list of PTX kernel %.*s", (int)len, name);
            rc = -1;
            break;
        }
    }
    free(text);
    return rc;
}

/* The name declared by a module-scope `.global ...;` statement: the last
 * identifier before `[`, `=` or the end. */
static size_t declared_name(const char *p, const char *end, const char **name)
{
    const char *stop = p;
    while (stop < end && *stop != '[' && *stop != '=')
        stop++;
    while (stop > p && isspace((unsigned char)stop[-1]))
        stop--;
    const char *start = stop;
    while (start > p && is_ident((unsigned char)start[-1]) && start[-1] != '.')
        start--;
    *name = start;
    return (size_t)(stop - start);
}

/* A module-scope variable: a group of its own, named by its state space and
 * itself (".global x", ".const y": globals.c tells a constant by it). */
static int add_ptx_global(kr__image_facts *f, const char *space, const char *name, size_t len)
{
    kr__image_global *g = realloc(f->globals, (f->num_globals + 1) * sizeof *g);
    kr__image_group *gr = g ? realloc(f->groups, (f->num_groups + 1) * sizeof *gr) : NULL;
    if (g)
        f->globals = g;
    if (!gr)
        return -1;
    f->groups = gr;
    uint32_t id = (uint32_t)f->num_groups;
    g[f->num_globals] = (kr__image_global){kr__strndup(name, len), id, 0, 0};
    if (!g[f->num_globals].name)
        return -1;
    gr[f->num_groups] = (kr__image_group){id, 0, ""};
    snprintf(gr[f->num_groups].name, sizeof gr->name, "%s %.*s", space, (int)len, name);
    f->num_globals++;
    f->num_groups++;
    return 0;
}

int kr__ptx_read_facts(const unsigned char *image, size_t len, kr__image_facts *f, char *why,
                       size_t why_size)
{
    memset(f, 0, sizeof *f);
    char *text = kr__ptx_blank_comments((const char *)image, len);
    if (!text) {
        snprintf(why, why_size, "out of memory");
        return -1;
    }
    int depth = 0, rc = 0;
    for (const char *p = text; *p && rc == 0; p++) {
        if (*p == '{' || *p == '}') {
            depth += *p == '{' ? 1 : -1;
            continue;
        }
        if (depth != 0 || *p != '.' || (p > text && is_ident((unsigned char)p[-1])))
            continue;
        const char *end = strpbrk(p, ";{"); /* a declaration, or a function's head */
        if (!end)
            break;
        /* a module-scope statement: `.global` or `.const` data (a constant is
         * device memory a generic store can change: elf_cubin.c), or
         * `.extern .func` heap and printf calls */
        if (strncmp(p, ".extern", 7) == 0 || strncmp(p, ".visible", 8) == 0 ||
            strncmp(p, ".global", 7) == 0 || strncmp(p, ".weak", 5) == 0 ||
            strncmp(p, ".const", 6) == 0) {
            char *stmt = kr__strndup(p, (size_t)(end - p));
            if (!stmt) {
                rc = -1;
                break;
            }
            if (strstr(stmt, ".func") && (strstr(stmt, " malloc") || strstr(stmt, " free") ||
                                          strstr(stmt, ")malloc") || strstr(stmt, ")free")))
                f->uses_heap = 1;
            else if (strstr(stmt, ".func") && (strstr(stmt, " vprintf") || strstr(stmt, ")vprintf")))
                f->uses_printf = 1;
            else if ((strstr(stmt, ".global ") || strstr(stmt, ".const ")) &&
                     !strstr(stmt, ".func")) {
                const char *name;
                size_t n = declared_name(stmt, stmt + strlen(stmt), &name);
                const char *glob = strstr(stmt, ".global "), *cst = strstr(stmt, ".const ");
                const char *space = glob && (!cst || glob < cst) ? ".global" : ".const";
                if (n && add_ptx_global(f, space, name, n) != 0)
                    rc = -1;
            }
            free(stmt);
            p = end - 1; /* the loop sees the ';' or '{' next */
        }
    }
    free(text);
    if (rc != 0) {
        snprintf(why, why_size, "out of memory");
        kr__image_facts_free(f);
        return -1;
    }
    return 0;
}
