/* Source facts (source_facts.h): code size on tokens, and the normalised
 * fingerprint of a source. */
#include "common/source_facts.h"
#include "common/lexer.h"
#include "kreward/common.h"

#include <stdlib.h>
#include <string.h>

void kr__source_facts_of(kr__source_facts *out, const char *src, size_t len)
{
    memset(out, 0, sizeof *out);
    kr__lexer L;
    kr__lex_init(&L, src, len);
    kr__token t;
    uint32_t last = 0; /* the last line counted */
    for (int kind; (kind = kr__lex_next(&L, &t)) != KR__TOK_EOF;) {
        if (kind == KR__TOK_LINE_COMMENT || kind == KR__TOK_BLOCK_COMMENT)
            continue;
        out->code_tokens++;
        uint32_t from = t.line > last ? t.line : last + 1;
        if (t.end_line >= from) {
            out->token_lines += t.end_line - from + 1;
            last = t.end_line;
        }
    }
    size_t by_tokens = (out->code_tokens + KR__TOKENS_PER_LINE - 1) / KR__TOKENS_PER_LINE;
    out->code_lines = out->token_lines > by_tokens ? out->token_lines : by_tokens;
}

size_t kr__source_code_lines(const char *src, size_t len)
{
    kr__source_facts f;
    kr__source_facts_of(&f, src, len);
    return f.code_lines;
}

/* Identifiers seen so far: name -> order of first appearance (open
 * addressing; names live in one arena as long as the source). */
typedef struct {
    uint64_t hash;
    size_t off, len, order; /* order 0: empty slot */
} name_slot;

typedef struct {
    name_slot *slot;
    size_t cap, count;
    char *arena;
    size_t used;
} name_table;

static int grow(name_table *nt)
{
    size_t cap = nt->cap ? nt->cap * 2 : 256;
    name_slot *slot = calloc(cap, sizeof *slot);
    if (!slot)
        return -1;
    for (size_t i = 0; i < nt->cap; i++) {
        if (!nt->slot[i].order)
            continue;
        size_t j = nt->slot[i].hash & (cap - 1);
        while (slot[j].order)
            j = (j + 1) & (cap - 1);
        slot[j] = nt->slot[i];
    }
    free(nt->slot);
    nt->slot = slot;
    nt->cap = cap;
    return 0;
}

/* The order of name's first appearance (from 1), adding it; 0 when out of
 * memory. */
static size_t name_order(name_table *nt, const char *name, size_t n)
{
    if ((nt->count + 1) * 2 > nt->cap && grow(nt) != 0)
        return 0;
    uint64_t h = XXH3_64bits(name, n);
    size_t j = h & (nt->cap - 1);
    for (; nt->slot[j].order; j = (j + 1) & (nt->cap - 1)) {
        const name_slot *s = &nt->slot[j];
        if (s->hash == h && s->len == n && memcmp(nt->arena + s->off, name, n) == 0)
            return s->order;
    }
    memcpy(nt->arena + nt->used, name, n);
    nt->slot[j] = (name_slot){h, nt->used, n, ++nt->count};
    nt->used += n;
    return nt->count;
}

/* Directive lines the fingerprint leaves out: they choose what is
 * compiled (and the groups left out are left out), not what it does. */
static int skipped_directive(int d)
{
    return d == KR__DIR_IF || d == KR__DIR_IFDEF || d == KR__DIR_IFNDEF || d == KR__DIR_ELIF ||
           d == KR__DIR_ELSE || d == KR__DIR_ENDIF || d == KR__DIR_INCLUDE;
}

int kr__source_fingerprint(kr__hash128 *out, const char *src, size_t len)
{
    if (!src)
        len = 0;
    memset(out, 0, sizeof *out);
    /* names, and member names (after . or ->) apart: a variable renamed x
     * stays apart from the .x of a float4 */
    name_table nt[2] = {{0}, {0}};
    char *text = malloc(len + 1);  /* one token's text at a time */
    nt[0].arena = malloc(len + 1); /* every distinct identifier, once */
    nt[1].arena = malloc(len + 1);
    kr__hasher h = {0};
    int rc = KR_ENOMEM, member = 0;
    if (!text || !nt[0].arena || !nt[1].arena || kr__hasher_init(&h) != 0)
        goto out;
    kr__lexer L;
    kr__lex_init(&L, src, len);
    kr__token t;
    for (int kind; (kind = kr__lex_next(&L, &t)) != KR__TOK_EOF;) {
        if (kind == KR__TOK_LINE_COMMENT || kind == KR__TOK_BLOCK_COMMENT ||
            (t.flags & KR__TOKF_DEAD) || skipped_directive(t.directive))
            continue;
        size_t n = kr__lex_spell(L.src, &t, text, len);
        kr__hasher_u64(&h, (uint64_t)kind + (kind == KR__TOK_IDENT ? 100u * (unsigned)member : 0));
        int next_member = kind == KR__TOK_PUNCT && ((n == 1 && text[0] == '.') ||
                                                    (n == 2 && memcmp(text, "->", 2) == 0));
        if (kind == KR__TOK_IDENT) {
            size_t order = name_order(&nt[member], text, n);
            if (!order)
                goto out;
            kr__hasher_u64(&h, order);
        } else if (kind == KR__TOK_DIRECTIVE) {
            kr__hasher_field(&h, "#", 1); /* or its digraph %: */
        } else {
            kr__hasher_field(&h, text, n);
        }
        member = next_member;
    }
    *out = kr__hasher_final(&h);
    h.state = NULL;
    rc = KR_OK;
out:
    if (h.state)
        kr__hasher_final(&h);
    free(text);
    for (int i = 0; i < 2; i++) {
        free(nt[i].arena);
        free(nt[i].slot);
    }
    return rc;
}
