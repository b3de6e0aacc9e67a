/* The C/CUDA lexer and the source facts built on it: tokens and lines
 * through splices, comments and literals (raw ones too), conditional
 * groups, top-level line comments for plan annotations, code size that
 * layout cannot shrink, the normalised fingerprint; adversarial and random
 * inputs (linear work, no read out of bounds: run under ASan in CI). */
#include "helpers.h"

#include "common/lexer.h"
#include "common/source_facts.h"

#include "common/strbuf.h"

#include <ctype.h>
#include <time.h>

typedef struct {
    int kind;
    unsigned flags;
    int directive;
    uint32_t line, end_line, depth;
    char text[64];
} tok;

/* Lexes src into at most max tokens (comments included); returns the count. */
static size_t lex_all(const char *src, tok *out, size_t max)
{
    kr__lexer L;
    kr__lex_init(&L, src, strlen(src));
    kr__token t;
    size_t n = 0;
    while (kr__lex_next(&L, &t) != KR__TOK_EOF && n < max) {
        size_t k = kr__lex_spell(src, &t, out[n].text, sizeof out[n].text - 1);
        out[n].text[k < sizeof out[n].text - 1 ? k : sizeof out[n].text - 1] = '\0';
        out[n].kind = t.kind;
        out[n].flags = t.flags;
        out[n].directive = t.directive;
        out[n].line = t.line;
        out[n].end_line = t.end_line;
        out[n].depth = t.cond_depth;
        n++;
    }
    return n;
}

/* The index of the first token spelled text, failing when there is none. */
static size_t find(const tok *t, size_t n, const char *text)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(t[i].text, text) == 0)
            return i;
    fail_msg("no token '%s'", text);
    return 0;
}

static void kinds_and_lines(void **state)
{
    (void)state;
    const char *src =
        "#include <cuda_fp16.h>\n"
        "extern \"C\" __global__ void k(float *x, long long n) {\n"
        "    for (long long i = threadIdx.x; i < n; i += 1'000) x[i] = 1.5e+3f + .5f + 0x1p-3;\n"
        "    x[0] <<= 2; a->*b; c <=> d; e...;\n"
        "}\n";
    tok t[128];
    size_t n = lex_all(src, t, 128);
    assert_int_equal(t[0].kind, KR__TOK_DIRECTIVE);
    assert_int_equal(t[0].directive, KR__DIR_INCLUDE);
    assert_int_equal(t[1].kind, KR__TOK_KEYWORD); /* a directive's name */
    assert_string_equal(t[1].text, "include");
    assert_int_equal(t[find(t, n, "\"C\"")].kind, KR__TOK_STRING);
    assert_int_equal(t[find(t, n, "__global__")].kind, KR__TOK_KEYWORD);
    assert_int_equal(t[find(t, n, "threadIdx")].kind, KR__TOK_KEYWORD);
    assert_int_equal(t[find(t, n, "k")].kind, KR__TOK_IDENT);
    assert_int_equal(t[find(t, n, "k")].directive, KR__DIR_NONE);
    assert_int_equal(t[find(t, n, "1'000")].kind, KR__TOK_NUMBER);
    assert_int_equal(t[find(t, n, "1.5e+3f")].kind, KR__TOK_NUMBER);
    assert_int_equal(t[find(t, n, ".5f")].kind, KR__TOK_NUMBER);
    assert_int_equal(t[find(t, n, "0x1p-3")].kind, KR__TOK_NUMBER);
    assert_int_equal(t[find(t, n, "<<=")].kind, KR__TOK_PUNCT);
    find(t, n, "->*");
    find(t, n, "<=>");
    find(t, n, "...");
    assert_int_equal(t[find(t, n, "1'000")].line, 3);
    assert_int_equal(t[find(t, n, "<<=")].line, 4);
    assert_int_equal(t[n - 1].line, 5);
    assert_true(t[find(t, n, "for")].flags & KR__TOKF_LINE_START);
    assert_false(t[find(t, n, "long")].flags & KR__TOKF_LINE_START);
}

static void splices(void **state)
{
    (void)state;
    /* an identifier, a // opener and a \r\n splice; a backslash followed by
     * a space is not a splice (NVRTC agrees), a lone \r is not a line end */
    const char *src = "ab\\\ncd = 1;\n/\\\n/ comment \\\r\n still comment\nx \\ \ny;\n"
                      "// c \r z = 2;\nw;\n";
    tok t[32];
    size_t n = lex_all(src, t, 32);
    size_t i = find(t, n, "abcd");
    assert_int_equal(t[i].kind, KR__TOK_IDENT);
    assert_int_equal(t[i].line, 1);
    assert_int_equal(t[i].end_line, 2);
    assert_true(t[i].flags & KR__TOKF_SPLICED);
    i = find(t, n, "// comment  still comment");
    assert_int_equal(t[i].kind, KR__TOK_LINE_COMMENT);
    assert_int_equal(t[i].line, 3);
    assert_int_equal(t[i].end_line, 5);
    assert_int_equal(t[find(t, n, "x")].line, 6);
    assert_int_equal(t[find(t, n, "\\")].kind, KR__TOK_PUNCT); /* a stray backslash */
    assert_int_equal(t[find(t, n, "y")].line, 7);
    i = find(t, n, "// c \r z = 2;");
    assert_int_equal(t[i].end_line, 8);
    assert_int_equal(t[find(t, n, "w")].line, 9);
}

/* Comment markers inside literals, literal markers inside comments, raw
 * strings with their own delimiters and splices. */
static void literals_and_comments(void **state)
{
    (void)state;
    const char *src =
        "const char *a = \"/*\"; int b; const char *c = \"*/\";\n"
        "char q = '\"'; char s = '\\''; const char *e = \"\\\" // no\";\n"
        "/* \"not a string // nor this */ int f;\n"
        "const char *r = R\"xy(// not a comment\n*/ still raw )\" )xy\"; int g;\n"
        "auto u = u8R\"(a\\\nb)\"; auto v = LR\"-(x)-\"; auto w = u8\"s\" L'c';\n"
        "int R = 1; auto z = R + 'x';\n";
    tok t[96];
    size_t n = lex_all(src, t, 96);
    assert_int_equal(t[find(t, n, "\"/*\"")].kind, KR__TOK_STRING);
    assert_int_equal(t[find(t, n, "b")].kind, KR__TOK_IDENT);
    assert_int_equal(t[find(t, n, "'\"'")].kind, KR__TOK_CHAR);
    assert_int_equal(t[find(t, n, "'\\''")].kind, KR__TOK_CHAR);
    assert_int_equal(t[find(t, n, "\"\\\" // no\"")].kind, KR__TOK_STRING);
    assert_int_equal(t[find(t, n, "/* \"not a string // nor this */")].kind, KR__TOK_BLOCK_COMMENT);
    assert_int_equal(t[find(t, n, "f")].line, 3);
    size_t i = find(t, n, "R\"xy(// not a comment\n*/ still raw )\" )xy\"");
    assert_int_equal(t[i].kind, KR__TOK_STRING);
    assert_true(t[i].flags & KR__TOKF_RAW);
    assert_int_equal(t[i].line, 4);
    assert_int_equal(t[i].end_line, 5);
    assert_int_equal(t[find(t, n, "g")].line, 5);
    /* inside a raw string a splice stays (the language reverts it) */
    assert_int_equal(t[find(t, n, "u8R\"(a\\\nb)\"")].kind, KR__TOK_STRING);
    assert_int_equal(t[find(t, n, "LR\"-(x)-\"")].kind, KR__TOK_STRING);
    assert_int_equal(t[find(t, n, "u8\"s\"")].kind, KR__TOK_STRING);
    assert_int_equal(t[find(t, n, "L'c'")].kind, KR__TOK_CHAR);
    assert_int_equal(t[find(t, n, "R")].kind, KR__TOK_IDENT); /* R alone is a name */
    for (size_t k = 0; k < n; k++)
        assert_false(t[k].flags & KR__TOKF_UNTERMINATED);
}

static void conditionals(void **state)
{
    (void)state;
    const char *src =
        "#if 0\n"
        "don't\n"            /* an apostrophe in a dead group: cut at the line's end */
        "#elif 1\n"
        "int live;\n"
        "#else\n"
        "int dead2;\n"
        "#endif\n"
        "#ifdef FOO\n"
        "int maybe;\n"
        "#elif 0\n"
        "int dead3;\n"
        "#else\n"
        "int maybe2;\n"
        "#if (0) // parenthesised, with a comment\n"
        "int dead4;\n"
        "#endif\n"
        "#endif\n"
        "  # /* comment */ if 1\n"
        "int live2;\n"
        "#elif X\n"
        "int dead5;\n"
        "#endif\n"
        "int top; /* #if 0 in a comment */ const char *s = \"#endif\";\n"
        "%:if false\n"
        "int dead6;\n"
        "%:endif\n"
        "int b; #if 0\n"     /* not at a line's start: not a directive */
        "int c;\n";
    tok t[160];
    size_t n = lex_all(src, t, 160);
    struct {
        const char *name;
        uint32_t depth;
        int dead;
    } expect[] = {
        {"live", 1, 0},  {"dead2", 1, 1},  {"maybe", 1, 0}, {"dead3", 1, 1},
        {"maybe2", 1, 0}, {"dead4", 2, 1}, {"live2", 1, 0}, {"dead5", 1, 1},
        {"top", 0, 0},   {"dead6", 1, 1},  {"b", 0, 0},     {"c", 0, 0},
    };
    for (size_t k = 0; k < sizeof expect / sizeof expect[0]; k++) {
        size_t i = find(t, n, expect[k].name);
        if (t[i].depth != expect[k].depth || !(t[i].flags & KR__TOKF_DEAD) != !expect[k].dead)
            fail_msg("%s: depth %u dead %d, expected %u %d", expect[k].name, t[i].depth,
                     !!(t[i].flags & KR__TOKF_DEAD), expect[k].depth, expect[k].dead);
    }
    size_t i = find(t, n, "don");
    assert_true(t[i].flags & KR__TOKF_DEAD);
    assert_true(t[i + 1].flags & KR__TOKF_UNTERMINATED); /* 't */
    assert_int_equal(t[i + 2].directive, KR__DIR_ELIF);
    assert_int_equal(t[find(t, n, "FOO")].directive, KR__DIR_IFDEF);
    /* groups deeper than the lexer follows still count */
    char deep[4096] = "";
    for (int k = 0; k < 100; k++)
        strcat(deep, "#if 0\n");
    strcat(deep, "int x;\n");
    for (int k = 0; k < 100; k++)
        strcat(deep, "#endif\n");
    strcat(deep, "int y;\n");
    n = lex_all(deep, t, 160);
    for (size_t k = 0; k < n; k++) {
        if (strcmp(t[k].text, "x") == 0)
            assert_true(t[k].depth == 100 && (t[k].flags & KR__TOKF_DEAD));
        if (strcmp(t[k].text, "y") == 0)
            assert_true(t[k].depth == 0 && !(t[k].flags & KR__TOKF_DEAD));
    }
    /* stray #endif and #else are ignored; an unclosed #if lasts to the end */
    n = lex_all("#endif\n#else\nint a;\n#if 0\nint b;\n", t, 16);
    assert_int_equal(t[find(t, n, "a")].depth, 0);
    assert_true(t[find(t, n, "b")].flags & KR__TOKF_DEAD);
}

typedef struct {
    size_t n;
    uint32_t line[16], depth[16];
    int dead[16], line_start[16], directive[16];
    char text[16][64];
} comments;

static int collect(void *user, const char *src, const kr__token *c)
{
    comments *cs = user;
    if (cs->n == 16)
        return 1;
    cs->line[cs->n] = c->line;
    cs->depth[cs->n] = c->cond_depth;
    cs->dead[cs->n] = (c->flags & KR__TOKF_DEAD) != 0;
    cs->line_start[cs->n] = (c->flags & KR__TOKF_LINE_START) != 0;
    cs->directive[cs->n] = c->directive;
    size_t k = kr__lex_spell(src, c, cs->text[cs->n], 63);
    cs->text[cs->n][k < 63 ? k : 63] = '\0';
    cs->n++;
    return 0;
}

/* What plan annotations need: every top-level line comment with its line
 * and the groups around it; none inside block comments or literals. */
static void annotation_comments(void **state)
{
    (void)state;
    const char *src =
        "// kreward: launch k grid=(1) block=(1) args=(x)\n"
        "/* // kreward: launch in_block\n"
        "   */\n"
        "const char *s = \"// kreward: launch in_string\";\n"
        "const char *r = R\"(\n// kreward: launch in_raw\n)\";\n"
        "#if 0\n"
        "// kreward: launch in_if0\n"
        "#endif\n"
        "#ifdef USE_FAST\n"
        "// kreward: launch in_ifdef\n"
        "#endif\n"
        "int x; // kreward: launch after_code\n"
        "#define N 4 // kreward: launch on_define\n";
    comments cs = {0};
    assert_int_equal(kr__lex_line_comments(src, strlen(src), collect, &cs), 0);
    assert_int_equal(cs.n, 5);
    assert_int_equal(cs.line[0], 1);
    assert_true(cs.depth[0] == 0 && !cs.dead[0] && cs.line_start[0]);
    assert_contains(cs.text[1], "in_if0");
    assert_true(cs.line[1] == 9 && cs.depth[1] == 1 && cs.dead[1]);
    assert_contains(cs.text[2], "in_ifdef");
    assert_true(cs.depth[2] == 1 && !cs.dead[2]);
    assert_contains(cs.text[3], "after_code");
    assert_true(cs.depth[3] == 0 && !cs.line_start[3]);
    assert_contains(cs.text[4], "on_define");
    assert_int_equal(cs.directive[4], KR__DIR_DEFINE);
    /* a non-zero return stops the walk */
    cs.n = 16;
    assert_int_equal(kr__lex_line_comments(src, strlen(src), collect, &cs), 1);
}

static void where(void **state)
{
    (void)state;
    const char *src =
        "int a; /* block\n"             /* line 1 */
        "still block */ int b;\n"       /* line 2 */
        "const char *s = \"x\"; // c\n" /* line 3 */
        "#if 0\n"                       /* line 4 */
        "int dead;\n"                   /* line 5 */
        "#endif\n"                      /* line 6 */
        "auto r = R\"(\n"               /* line 7 */
        "raw line\n"                    /* line 8 */
        ")\";\n";                       /* line 9 */
    size_t len = strlen(src);
    kr__lex_where w;
    kr__lex_where_line(src, len, 2, &w);
    assert_int_equal(w.context, KR__AT_BLOCK_COMMENT);
    kr__lex_where_line(src, len, 3, &w);
    assert_int_equal(w.context, KR__AT_CODE);
    kr__lex_where_offset(src, len, (size_t)(strstr(src, "\"x\"") - src) + 1, &w);
    assert_int_equal(w.context, KR__AT_STRING);
    kr__lex_where_offset(src, len, (size_t)(strstr(src, "// c") - src) + 3, &w);
    assert_int_equal(w.context, KR__AT_LINE_COMMENT);
    kr__lex_where_line(src, len, 4, &w);
    assert_true(w.context == KR__AT_CODE && w.cond_depth == 0 && !w.dead);
    kr__lex_where_offset(src, len, (size_t)(strstr(src, "#if 0") - src) + 4, &w);
    assert_int_equal(w.directive, KR__DIR_IF);
    kr__lex_where_line(src, len, 5, &w);
    assert_true(w.context == KR__AT_CODE && w.cond_depth == 1 && w.dead);
    assert_int_equal(w.directive, KR__DIR_NONE);
    kr__lex_where_line(src, len, 8, &w);
    assert_int_equal(w.context, KR__AT_STRING);
    kr__lex_where_line(src, len, 10, &w);
    assert_int_equal(w.context, KR__AT_END);
    kr__lex_where_line(src, len, 99, &w);
    assert_int_equal(w.context, KR__AT_END);
    kr__lex_where_line(src, len, 0, &w);
    assert_int_equal(w.context, KR__AT_END);
}

/* The issue's example: string literals that open and close a comment made
 * 157 lines count as 2; joining lines must not shrink code either. */
static void code_size(void **state)
{
    (void)state;
    char *src = malloc(64 * 200);
    strcpy(src, "const char *open = \"/*\";\n");
    for (int i = 0; i < 155; i++)
        sprintf(src + strlen(src), "int v%d = %d;\n", i, i);
    strcat(src, "const char *close = \"*/\";\n");
    kr__source_facts f;
    kr__source_facts_of(&f, src, strlen(src));
    assert_int_equal(f.token_lines, 157);
    assert_int_equal(f.code_lines, 157);
    assert_int_equal(f.code_tokens, 7 + 155 * 5 + 7);
    /* the same code on one line */
    for (char *p = src; *p; p++)
        if (*p == '\n')
            *p = ' ';
    kr__source_facts_of(&f, src, strlen(src));
    assert_int_equal(f.token_lines, 1);
    assert_int_equal(f.code_lines, (789 + KR__TOKENS_PER_LINE - 1) / KR__TOKENS_PER_LINE);
    /* comments and blank lines are not code; a raw string's lines are */
    const char *c = "// one\n\n/* two\nthree */\nint x; /* four */\nauto s = R\"(\na\nb)\";\n";
    assert_int_equal(kr__source_code_lines(c, strlen(c)), 4);
    assert_int_equal(kr__source_code_lines("", 0), 0);
    assert_int_equal(kr__source_code_lines(NULL, 0), 0);
    free(src);
}

static kr__hash128 fp(const char *src)
{
    kr__hash128 h;
    assert_int_equal(kr__source_fingerprint(&h, src, strlen(src)), KR_OK);
    return h;
}

/* A file of the source tree: from KR_SOURCE_ROOT, else next to this file
 * (__FILE__ is relative to the build directory, where tests run). */
static char *read_source_file(const char *rel)
{
    const char *root = getenv("KR_SOURCE_ROOT");
    char path[4200];
    if (root) {
        snprintf(path, sizeof path, "%s/%s", root, rel);
    } else {
        snprintf(path, sizeof path, "%s", __FILE__);
        char *tail = strstr(path, "tests/unit/test_lexer.c");
        assert_non_null(tail);
        snprintf(tail, sizeof path - (size_t)(tail - path), "%s", rel);
    }
    FILE *f = fopen(path, "rb");
    if (!f)
        fail_msg("cannot read %s", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    s[fread(s, 1, (size_t)n, f)] = '\0';
    fclose(f);
    return s;
}

/* The source with every name it chose (IDENT tokens) prefixed. */
static char *rename_all(const char *src)
{
    kr__buf b = KR__BUF_INIT;
    kr__lexer L;
    kr__lex_init(&L, src, strlen(src));
    kr__token t;
    size_t at = 0;
    for (int kind; (kind = kr__lex_next(&L, &t)) != KR__TOK_EOF;) {
        if (kind != KR__TOK_IDENT)
            continue;
        kr__buf_append(&b, src + at, t.start - at);
        kr__buf_puts(&b, "renamed_");
        at = t.start;
    }
    kr__buf_puts(&b, src + at);
    return kr__buf_take(&b);
}

static void fingerprint(void **state)
{
    (void)state;
    const char *ref =
        "// the reference\n"
        "extern \"C\" __global__ void add(const float *a, const float *b, float *c, int n)\n"
        "{\n"
        "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
        "    if (i < n) c[i] = a[i] + b[i] * 2.0f;\n"
        "}\n";
    /* renamed kernel and variables, other comments and layout, an include,
     * an #if 0 group and a splice: the same */
    const char *copy =
        "#include <cuda_runtime.h>\n"
        "/* my very own kernel */\n"
        "extern \"C\" __global__ void my_fast_add(const float *x, const float *y, float *out, int count) {\n"
        "#if 0\n"
        "    junk that is never compiled;\n"
        "#endif\n"
        "  int idx = blockIdx.x*blockDim.x+threadIdx.x; if (idx < count) out[idx] = x[idx] + y[id\\\nx] * 2.0f; }\n";
    assert_true(kr__hash128_equal(fp(ref), fp(copy)));
    /* a literal, an operator, the order of names or a builtin changes it */
    const char *changed[] = {
        "extern \"C\" __global__ void add(const float *a, const float *b, float *c, int n)\n"
        "{ int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) c[i] = a[i] + b[i] * 3.0f; }\n",
        "extern \"C\" __global__ void add(const float *a, const float *b, float *c, int n)\n"
        "{ int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) c[i] = a[i] - b[i] * 2.0f; }\n",
        "extern \"C\" __global__ void add(const float *a, const float *b, float *c, int n)\n"
        "{ int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) c[i] = b[i] + a[i] * 2.0f; }\n",
        "extern \"C\" __global__ void add(const float *a, const float *b, float *c, int n)\n"
        "{ int i = threadIdx.x * blockDim.x + blockIdx.x; if (i < n) c[i] = a[i] + b[i] * 2.0f; }\n",
        "extern \"C\" __global__ void add(const float *a, const float *b, float *c, int n)\n"
        "{ int i = blockIdx.x * blockDim.x + threadIdx.x; if (i <= n) c[i] = a[i] + b[i] * 2.0f; }\n",
    };
    for (size_t i = 0; i < sizeof changed / sizeof changed[0]; i++)
        if (kr__hash128_equal(fp(ref), fp(changed[i])))
            fail_msg("variant %zu has the reference's fingerprint", i);
    /* the bundled reference against itself renamed, and against the fast
     * candidate */
    char *r = read_source_file("examples/problems/l2_softmax/reference.cu");
    char *fast = read_source_file("examples/problems/l2_softmax/candidates/fast.cu");
    char *renamed = rename_all(r);
    assert_true(strstr(renamed, "renamed_") != NULL);
    assert_true(kr__hash128_equal(fp(r), fp(renamed)));
    assert_false(kr__hash128_equal(fp(r), fp(fast)));
    free(renamed);
    free(r);
    free(fast);
}

/* Invariants on any input: tokens in order inside the source, lines in
 * order, spelled no longer than written. */
static void check_tokens(const char *src, size_t len)
{
    kr__lexer L;
    kr__lex_init(&L, src, len);
    kr__token t;
    size_t prev_end = 0, count = 0;
    uint32_t prev_line = 1;
    char buf[16];
    while (kr__lex_next(&L, &t) != KR__TOK_EOF) {
        if (t.start < prev_end || t.end <= t.start || t.end > len || t.line < prev_line ||
            t.end_line < t.line)
            fail_msg("token %zu: [%zu, %zu) lines %u-%u after %zu, line %u", count, t.start,
                     t.end, t.line, t.end_line, prev_end, prev_line);
        if (kr__lex_spell(src, &t, buf, sizeof buf) > t.end - t.start)
            fail_msg("token %zu spelled longer than written", count);
        prev_end = t.end;
        prev_line = t.end_line;
        count++;
    }
    assert_true(count <= len);
    assert_int_equal(kr__lex_next(&L, &t), KR__TOK_EOF); /* and again */
}

static double seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Everything a reader of a source does, on one input. */
static void everything(const char *src, size_t len)
{
    check_tokens(src, len);
    kr__source_facts f;
    kr__source_facts_of(&f, src, len);
    kr__hash128 h;
    assert_int_equal(kr__source_fingerprint(&h, src, len), KR_OK);
    kr__lex_where w;
    kr__lex_where_offset(src, len, len / 2, &w);
    kr__lex_where_line(src, len, 3, &w);
    comments cs = {0};
    kr__lex_line_comments(src, len, collect, &cs);
}

/* 1 MB of one adversarial pattern each: unterminated comments and
 * literals, lone backslashes, splices, raw string openers, 100k nested
 * #if. Work is linear in the input. */
static void adversarial(void **state)
{
    (void)state;
    static const char *const patterns[] = {
        "/*", "\"", "'", "\\", "\\\n", "\\\r\n", "R\"(", "R\"", "R\"xxxxxxxxxxxxxxxx(", ")\"",
        "#if 0\n", "#endif\n", "#if 1\n#else\n", "//", "/", "*", "\n", "\r", "u8R\"abc(",
        "R\"aaaaaaaaaaaaaaa()aaaaaaaaaaaaaa", "%:", "#", "1'", "0x1p+", "\"\\", "'\\\\\n",
        "#if (((((((", "\xff\xfe", "R\")\"R\"(", "/\\\n*",
    };
    size_t n = 1 << 20;
    char *buf = malloc(n);
    for (size_t p = 0; p < sizeof patterns / sizeof patterns[0]; p++) {
        size_t k = strlen(patterns[p]);
        for (size_t i = 0; i < n; i++)
            buf[i] = patterns[p][i % k];
        /* linear, whatever the build (ASan makes it 15x slower): a quarter
         * of the input must take about a quarter of the time (quadratic
         * work would take a sixteenth) */
        double t0 = seconds();
        everything(buf, n / 4);
        double quarter = seconds() - t0;
        t0 = seconds();
        everything(buf, n);
        double dt = seconds() - t0;
        if (dt > 10 * quarter + 0.5 || dt > 60)
            fail_msg("pattern %zu took %.2f s on 1 MB, %.2f s on 256 KB: not linear", p, dt,
                     quarter);
    }
    /* and with no terminator after the last byte: a read past len would
     * trip ASan */
    char *exact = malloc(3);
    memcpy(exact, "R\"(", 3);
    everything(exact, 3);
    memcpy(exact, "/*\\", 3);
    everything(exact, 3);
    memcpy(exact, "'\\\\", 3);
    everything(exact, 3);
    free(exact);
    everything(NULL, 0);
    free(buf);
}

/* Random sources from tricky fragments (seeded, reproducible). */
static void random_inputs(void **state)
{
    (void)state;
    static const char *const parts[] = {
        "/*", "*/", "//", "\"", "'", "\\", "\n", "\r\n", "\\\n", "R\"x(", ")x\"", "R\"(", ")\"",
        "#if 0", "#if 1", "#ifdef A", "#elif 0", "#else", "#endif", "#define X 1", "#include <a>",
        " ", "\t", "a", "_b9", "1'0", "0x1p-3", ".5", "<<=", "->*", "%:", "u8", "L", "int ", "(",
        ")", "{", "}", ";", "\xc3\xa9", "\0",
    };
    uint64_t s = 0x9e3779b97f4a7c15ull;
    char *buf = malloc(4096);
    for (int round = 0; round < 3000; round++) {
        size_t len = 0;
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        size_t pieces = s % 200;
        for (size_t i = 0; i < pieces; i++) {
            s ^= s << 13, s ^= s >> 7, s ^= s << 17;
            const char *p = parts[s % (sizeof parts / sizeof parts[0])];
            size_t k = p[0] ? strlen(p) : 1;
            if (len + k > 4096)
                break;
            memcpy(buf + len, p, k);
            len += k;
        }
        /* exactly len bytes, nothing after: out-of-bounds reads trip ASan */
        char *exact = malloc(len ? len : 1);
        memcpy(exact, buf, len);
        everything(exact, len);
        free(exact);
    }
    free(buf);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(kinds_and_lines),
        cmocka_unit_test(splices),
        cmocka_unit_test(literals_and_comments),
        cmocka_unit_test(conditionals),
        cmocka_unit_test(annotation_comments),
        cmocka_unit_test(where),
        cmocka_unit_test(code_size),
        cmocka_unit_test(fingerprint),
        cmocka_unit_test(adversarial),
        cmocka_unit_test(random_inputs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
