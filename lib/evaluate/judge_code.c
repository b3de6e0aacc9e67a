/* Judging a candidate's code (judge_code.h): size from the compiled
 * program, and copies of the reference, on the source and then on the
 * compiled kernels. */
#include "evaluate/judge_code.h"
#include "common/cache.h"
#include "common/source_facts.h"
#include "common/strbuf.h"
#include "compile/compile_impl.h"
#include "problem/problem_impl.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

void kr__judge_source_size(kr_report *r, const char *source, size_t len)
{
    /* measured on tokens: string literals that look like comments, or code
     * joined onto a few lines, cannot make it look smaller */
    kr__source_facts facts;
    kr__source_facts_of(&facts, source, len);
    kr_report_set(r, "source_lines", (double)facts.code_lines);
    kr_report_set(r, "code_tokens", (double)facts.code_tokens);
}

void kr__judge_size(kr_report *r, const kr_program *prog, const kr__ptx_code *code)
{
    size_t len;
    const char *ptx = kr__program_ptx(prog, &len);
    double lines;
    if (!ptx) {
        if (kr_report_get(&lines, r, "source_lines") == KR_OK)
            kr_report_set(r, "code_lines", lines);
        return;
    }
    size_t n = code ? code->instructions : kr__ptx_statement_count(ptx, len);
    kr_report_set(r, "ptx_instructions", (double)n);
    kr_report_set(r, "code_lines", ceil((double)n / KR__PTX_INSTRUCTIONS_PER_LINE));
}

void kr__judge_source_copy(const kr_problem *p, const char *source, size_t len, kr_report *r)
{
    kr__hash128 mine, theirs;
    if (p->reference_kind != KR_REFERENCE_SOURCE || !p->reference_source ||
        kr__source_fingerprint(&mine, source, len) != KR_OK ||
        kr__source_fingerprint(&theirs, p->reference_source, strlen(p->reference_source)) != KR_OK)
        return;
    if (kr__hash128_equal(mine, theirs))
        kr_report_set_flags(r, kr_report_flags(r) | KR_FLAG_REFERENCE_COPY);
}

/* ---- the reference's code, once per problem and options ---- */

static void hash_strings(kr__hasher *h, const char *const *s, size_t n)
{
    kr__hasher_u64(h, n);
    for (size_t i = 0; i < n; i++)
        kr__hasher_str(h, s[i]);
}

/* What the reference's code depends on: the problem (its hash covers the
 * reference's source) and every option that changes what NVRTC makes of it.
 * {0, 0} when hashing is impossible. */
static kr__hash128 memo_key(kr_context *ctx, const kr_problem *p, const kr_compile_options *o)
{
    kr__hasher h;
    kr__hash128 none = {0, 0};
    if (kr__hasher_init(&h) != 0)
        return none;
    kr__hasher_str(&h, "kreward-reference-code/1");
    kr__hasher_str(&h, kr_problem_hash(p));
    kr__hasher_str(&h, o->arch ? o->arch : kr_context_arch(ctx));
    kr__hasher_str(&h, o->std);
    hash_strings(&h, o->defines, o->num_defines);
    hash_strings(&h, o->include_dirs, o->num_include_dirs);
    hash_strings(&h, o->extra_options, o->num_extra_options);
    kr__hasher_u64(&h, (uint64_t)o->fast_math);
    kr__hasher_u64(&h, (uint64_t)o->line_info);
    return kr__hasher_final(&h);
}

/* The memo's value: the kernels' shapes (names are not needed: a candidate
 * kernel is compared with every kernel of the reference), in this
 * process's byte order (it never leaves the process). */
static void *code_blob(const kr__ptx_code *c, size_t *len)
{
    kr__buf b = KR__BUF_INIT;
    uint64_t v = c->num_kernels;
    kr__buf_append(&b, (const char *)&v, sizeof v);
    for (size_t i = 0; i < c->num_kernels; i++) {
        const kr__ptx_kernel *k = &c->kernels[i];
        uint64_t head[3] = {k->instructions, k->num_shapes, k->num_fixed};
        kr__buf_append(&b, (const char *)head, sizeof head);
        kr__buf_append(&b, (const char *)k->shapes, k->num_shapes * sizeof *k->shapes);
        kr__buf_append(&b, (const char *)k->fixed, k->num_fixed * sizeof *k->fixed);
    }
    if (b.oom) {
        kr__buf_free(&b);
        return NULL;
    }
    *len = b.len;
    return kr__buf_take(&b);
}

static int take(const unsigned char **p, size_t *left, void *out, size_t n)
{
    if (*left < n)
        return -1;
    memcpy(out, *p, n);
    *p += n;
    *left -= n;
    return 0;
}

static uint64_t *take_array(const unsigned char **p, size_t *left, uint64_t n)
{
    if (n > *left / sizeof(uint64_t))
        return NULL;
    uint64_t *a = malloc(n ? n * sizeof *a : 1);
    if (a)
        take(p, left, a, n * sizeof *a);
    return a;
}

static int code_from_blob(const void *blob, size_t len, kr__ptx_code *c)
{
    memset(c, 0, sizeof *c);
    const unsigned char *p = blob;
    uint64_t n;
    if (take(&p, &len, &n, sizeof n) != 0 || n > len / (3 * sizeof(uint64_t)) ||
        !(c->kernels = calloc(n ? n : 1, sizeof *c->kernels)))
        return -1;
    for (; c->num_kernels < n; c->num_kernels++) {
        kr__ptx_kernel *k = &c->kernels[c->num_kernels];
        uint64_t head[3];
        if (take(&p, &len, head, sizeof head) != 0 ||
            !(k->shapes = take_array(&p, &len, head[1])) ||
            !(k->fixed = take_array(&p, &len, head[2]))) {
            c->num_kernels++;
            kr__ptx_code_free(c);
            return -1;
        }
        k->instructions = head[0];
        k->num_shapes = head[1];
        k->num_fixed = head[2];
        c->instructions += k->instructions;
    }
    return len == 0 ? 0 : (kr__ptx_code_free(c), -1);
}

/* The reference's code compiled under the candidate's options o (its name
 * and name expressions the reference's own): from the memo, or compiled
 * (through the compile cache: when o are the defaults, the very compile of
 * the reference's own run) and read, not loaded. 0, or -1. */
static int reference_code(kr_context *ctx, const kr_problem *p, const kr_compile_options *o,
                          kr__ptx_code *out)
{
    int memo = ctx->cache && !(o->flags & KR_COMPILE_NO_CACHE);
    kr__hash128 key = memo ? memo_key(ctx, p, o) : (kr__hash128){0, 0};
    memo = memo && (key.lo || key.hi);
    void *blob = NULL;
    size_t len = 0;
    if (memo && kr__mem_cache_get(ctx->cache, key, &blob, &len) == 1) {
        int rc = code_from_blob(blob, len, out);
        free(blob);
        if (rc == 0)
            return 0;
    }
    kr_program *ref = NULL;
    int rc = kr__compile_image(&ref, ctx, p->reference_source, strlen(p->reference_source), o);
    if (rc == KR_OK)
        rc = kr__program_read_code(ref, out) == 0 ? KR_OK : KR_EPARSE;
    kr_program_free(ref);
    kr__clear_error(ctx);
    if (rc != KR_OK)
        return -1;
    if (memo && (blob = code_blob(out, &len)) != NULL)
        kr__mem_cache_put(ctx->cache, key, blob, len);
    free(blob);
    return 0;
}

/* The kernel of prog that launch `name` runs, as code; NULL when unknown. */
static const kr__ptx_kernel *launched(const kr_program *prog, const kr__ptx_code *code,
                                      const char *name)
{
    size_t k = kr_program_find_kernel(prog, name);
    return k == SIZE_MAX ? NULL : kr__ptx_code_kernel(code, kr_program_kernel_name(prog, k));
}

static int copies_one_of(const kr__ptx_kernel *k, const kr__ptx_code *reference)
{
    for (size_t i = 0; i < reference->num_kernels; i++)
        if (kr__ptx_near_copy(k, &reference->kernels[i]))
            return 1;
    return 0;
}

void kr__judge_compiled_copy(kr_context *ctx, const kr_problem *p, const kr_program *prog,
                             const kr__ptx_code *code, const kr_plan *plan,
                             const kr_compile_options *options, kr_report *r)
{
    size_t n = plan ? kr_plan_launch_count(plan) : 0;
    if ((kr_report_flags(r) & KR_FLAG_REFERENCE_COPY) || !code || !n ||
        p->reference_kind != KR_REFERENCE_SOURCE || !p->reference_source)
        return;
    kr_compile_options o;
    if (kr__compile_options_read(ctx, &o, options) != KR_OK) {
        kr__clear_error(ctx);
        return;
    }
    o.name = p->reference_name;
    o.name_expressions = NULL;
    o.num_name_expressions = 0;
    kr__ptx_code theirs;
    if (reference_code(ctx, p, &o, &theirs) != 0)
        return;
    int copy = 1;
    for (size_t i = 0; copy && i < n; i++) {
        const kr__ptx_kernel *k = launched(prog, code, kr_plan_launch_kernel(plan, i));
        copy = k && copies_one_of(k, &theirs);
    }
    if (copy)
        kr_report_set_flags(r, kr_report_flags(r) | KR_FLAG_REFERENCE_COPY);
    kr__ptx_code_free(&theirs);
}
