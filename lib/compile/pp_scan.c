/* The preprocessor's view of a source: directives and include-like
 * operators, found the way NVRTC's front end finds them (translation phases
 * 1-3 of C++: trigraphs by mode, line splices including backslash-CR-LF,
 * comments as white space even across lines, digraphs, raw strings and digit
 * separators by mode). Each rule was checked against NVRTC 13; the unit
 * tests in test_compile_safety.c hold them. The lexical reading is in
 * pp_lex.c, the second look (kr__pp_absolute_anywhere) in pp_absolute.c. */
#include "compile/pp_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int kr__pp_mode_of_std(const char *std, kr__pp_mode *mode)
{
    static const struct {
        const char *name;
        kr__pp_mode mode;
    } known[] = {
        {"c++03", {0, 0, 1, 0}}, {"c++11", {1, 0, 1, 0}}, {"c++14", {1, 1, 1, 0}},
        {"c++17", {1, 1, 0, 0}}, {"c++20", {1, 1, 0, 0}},
    };
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        if (strcmp(std, known[i].name) == 0) {
            *mode = known[i].mode;
            return 0;
        }
    return -1;
}

static int stopped(const scanner *S)
{
    return S->out->refused || S->out->oom;
}

static kr__pp_item *add_item(scanner *S, int kind, unsigned line)
{
    kr__pp_scan *o = S->out;
    if (o->count == o->cap) {
        size_t cap = o->cap ? o->cap * 2 : 16;
        kr__pp_item *grown = realloc(o->items, cap * sizeof *grown);
        if (!grown) {
            o->oom = 1;
            return NULL;
        }
        o->items = grown;
        o->cap = cap;
    }
    kr__pp_item *it = &o->items[o->count++];
    memset(it, 0, sizeof *it);
    it->kind = kind;
    it->line = line;
    return it;
}

/* Bytes that change nothing the scanner tracks outside directives: white
 * space but newlines, and punctuation but / # % " ' ( ) \ ? . */
static const unsigned char inert[256] = {
    [' '] = 1, ['\t'] = 1, ['\f'] = 1, ['\v'] = 1, ['\r'] = 1, [';'] = 1, [','] = 1, ['{'] = 1,
    ['}'] = 1, ['['] = 1, [']'] = 1, ['<'] = 1, ['>'] = 1, ['='] = 1, ['+'] = 1, ['-'] = 1,
    ['*'] = 1, ['&'] = 1, ['|'] = 1, ['!'] = 1, ['~'] = 1, ['^'] = 1, [':'] = 1, ['@'] = 1,
};

/* Skips a run of inert bytes; returns whether anything but white space
 * was among them. */
static int skip_inert(rd *r)
{
    int text = 0;
    size_t i = r->i;
    while (i < r->n && inert[(unsigned char)r->s[i]]) {
        text |= !is_hspace((unsigned char)r->s[i]);
        i++;
    }
    r->i = i;
    if (i < r->n && r->s[i] == '\\')
        splices(r);
    return text;
}

static void has_include_op(scanner *S, const char *id, unsigned line)
{
    kr__pp_item *it = add_item(S, KR__PP_HAS_INCLUDE, line);
    if (!it || !(it->word = kr__pp_dup_n(S, id, strlen(id))))
        return;
    kr__pp_skip_hspace(S);
    if (cur(&S->r) != '(')
        return; /* the operator alone, e.g. an alias: no literal operand */
    adv(&S->r);
    kr__pp_skip_hspace(S);
    kr__pp_read_operand(S, it);
    if (!it->name)
        return;
    kr__pp_skip_hspace(S);
    if (cur(&S->r) != ')') { /* more than a header name: not a literal */
        free(it->name);
        it->name = NULL;
        it->delim = 0;
    }
}

/* _Pragma ( string-literal ): the words of a plain literal; "" otherwise. */
static void pragma_op(scanner *S, unsigned line)
{
    kr__pp_item *it = add_item(S, KR__PP_PRAGMA, line);
    if (!it)
        return;
    rd *r = &S->r;
    char text[256], words[64] = "";
    size_t k = 0;
    kr__pp_skip_hspace(S);
    if (cur(r) == '(') {
        adv(r);
        kr__pp_skip_hspace(S);
        char prefix[8];
        if (is_ident_start(cur(r)))
            kr__pp_read_ident(S, prefix, sizeof prefix);
        if (cur(r) == '"') {
            adv(r);
            int c;
            while ((c = cur(r)) != -1 && c != '\n' && c != '"') {
                adv(r);
                if (c == '\\' && (cur(r) == '"' || cur(r) == '\\')) {
                    c = cur(r);
                    adv(r);
                }
                if (k + 1 < sizeof text)
                    text[k++] = (char)c;
            }
            text[k] = '\0';
            if (c == '"') {
                adv(r);
                kr__pp_skip_hspace(S);
                if (cur(r) == ')')
                    kr__pp_pragma_words(text, words, sizeof words);
            }
        }
    }
    it->word = kr__pp_dup_n(S, words, strlen(words));
}

/* One token outside a directive's name (in_directive: on a directive
 * line, where parentheses are not counted). */
static void token(scanner *S, int in_directive)
{
    rd *r = &S->r;
    int c = cur(r);
    unsigned line = r->line;
    if (is_hspace(c)) {
        adv(r);
        return;
    }
    if (c == '/' && kr__pp_skip_comment(S, NULL))
        return;
    if (is_ident_start(c)) {
        char id[64];
        kr__pp_read_ident(S, id, sizeof id);
        if (cur(r) == '\\' && (ahead(r) == 'u' || ahead(r) == 'U')) {
            kr__pp_refuse(S, line, "a universal character name (\\u) outside a literal");
            return;
        }
        if (cur(r) == '"' && S->mode.raw_strings &&
            (!strcmp(id, "R") || !strcmp(id, "u8R") || !strcmp(id, "uR") || !strcmp(id, "UR") ||
             !strcmp(id, "LR"))) {
            S->after_defined = 0;
            kr__pp_read_raw(S);
            return;
        }
        int operand = S->after_defined != 0;
        S->after_defined = id[0] == 'd' && strcmp(id, "defined") == 0;
        if (!operand && kr__pp_has_include_like(id))
            has_include_op(S, id, line);
        else if (!operand && id[0] == '_' && strcmp(id, "_Pragma") == 0)
            pragma_op(S, line);
        return;
    }
    if (c == '\\' && (ahead(r) == 'u' || ahead(r) == 'U')) {
        kr__pp_refuse(S, line, "a universal character name (\\u) outside a literal");
        adv(r);
        return;
    }
    if (c == '(' && S->after_defined == 1) {
        S->after_defined = 2;
        adv(r);
        return;
    }
    S->after_defined = 0;
    if ((c >= '0' && c <= '9') || (c == '.' && ahead(r) >= '0' && ahead(r) <= '9')) {
        kr__pp_read_number(S);
    } else if (c == '"' || c == '\'') {
        kr__pp_read_quoted(S, c);
    } else {
        if (!in_directive && c == '(')
            S->depth++;
        else if (!in_directive && c == ')' && S->depth > 0)
            S->depth--;
        adv(r);
    }
}

static void rest_of_line(scanner *S)
{
    while (!stopped(S) && cur(&S->r) != -1 && cur(&S->r) != '\n')
        token(S, 1);
}

/* #if groups: the text's parenthesis depth after a group is the deepest
 * any of its branches (or skipping it) leaves, so a ')' hidden in a dead
 * branch cannot make an include inside a macro's arguments look outside. */
static void cond_directive(scanner *S, const char *d, unsigned line)
{
    if (!strcmp(d, "if") || !strcmp(d, "ifdef") || !strcmp(d, "ifndef")) {
        if (S->ncond == MAX_COND) {
            kr__pp_refuse(S, line, "#if groups nested too deep");
            return;
        }
        S->cond[S->ncond].at_if = S->depth;
        S->cond[S->ncond].max_end = S->depth;
        S->cond[S->ncond].has_else = 0;
        S->ncond++;
    } else if (S->ncond && (!strcmp(d, "elif") || !strcmp(d, "else") || !strcmp(d, "elifdef") ||
                            !strcmp(d, "elifndef"))) {
        cond_group *g = &S->cond[S->ncond - 1];
        if (S->depth > g->max_end)
            g->max_end = S->depth;
        S->depth = g->at_if;
        if (!strcmp(d, "else"))
            g->has_else = 1;
    } else if (S->ncond && !strcmp(d, "endif")) {
        S->ncond--;
        int end = S->cond[S->ncond].max_end;
        if (S->depth > end)
            end = S->depth;
        S->depth = end;
    }
}

static void directive(scanner *S)
{
    rd *r = &S->r;
    unsigned line = r->line;
    if (cur(r) == '%')
        adv(r);
    adv(r);
    kr__pp_skip_hspace(S);
    int c = cur(r);
    if (c == '\\' && (ahead(r) == 'u' || ahead(r) == 'U')) {
        kr__pp_refuse(S, line, "a universal character name (\\u) in a directive name");
        return;
    }
    if (c >= '0' && c <= '9') { /* # 12 "file": a line marker */
        kr__pp_read_number(S);
        kr__pp_skip_hspace(S);
        kr__pp_item *it = add_item(S, KR__PP_LINE, line);
        if (it && cur(r) == '"') {
            int delim;
            it->word = kr__pp_read_header_name(S, &delim);
        }
        rest_of_line(S);
        return;
    }
    if (!is_ident_start(c)) {
        rest_of_line(S);
        return;
    }
    char d[32];
    kr__pp_read_ident(S, d, sizeof d);
    if (cur(r) == '\\' && (ahead(r) == 'u' || ahead(r) == 'U')) {
        kr__pp_refuse(S, line, "a universal character name (\\u) in a directive name");
        return;
    }
    S->after_defined = 0;
    if (strstr(d, "include") || !strcmp(d, "import") || !strcmp(d, "embed")) {
        kr__pp_item *it = add_item(S, KR__PP_INCLUDE, line);
        if (!it || !(it->word = kr__pp_dup_n(S, d, strlen(d))))
            return;
        it->in_parens = S->depth > 0;
        kr__pp_skip_hspace(S);
        kr__pp_read_operand(S, it);
        if (!it->name) { /* computed: the operand is the rest of the line */
            size_t at = (size_t)(it - S->out->items);
            rest_of_line(S); /* may grow (move) the items */
            if (!stopped(S))
                S->out->items[at].span_end = r->i;
            return;
        }
    } else if (!strcmp(d, "define") || !strcmp(d, "undef")) {
        kr__pp_skip_hspace(S);
        kr__pp_item *it = add_item(S, d[0] == 'd' ? KR__PP_DEFINE : KR__PP_UNDEF, line);
        if (!it)
            return;
        char name[128];
        kr__pp_read_ident(S, name, sizeof name);
        if (!(it->word = kr__pp_dup_n(S, name, strlen(name))))
            return;
        if (d[0] == 'd' && cur(r) == '(') {
            it->function_like = 1;
            while (cur(r) != -1 && cur(r) != '\n' && cur(r) != ')')
                adv(r);
            if (cur(r) == ')')
                adv(r);
        }
        it->body_start = r->i;
        size_t at = (size_t)(it - S->out->items);
        rest_of_line(S); /* may grow (move) the items */
        if (!S->out->oom)
            S->out->items[at].body_end = r->i;
        return;
    } else if (!strcmp(d, "pragma")) {
        kr__pp_skip_hspace(S);
        size_t start = r->i;
        char text[128];
        size_t k = 0;
        while (cur(r) != -1 && cur(r) != '\n' && k + 1 < sizeof text && r->i - start < 512) {
            int ch = cur(r);
            text[k++] = is_hspace(ch) ? ' ' : (char)ch;
            adv(r);
        }
        text[k] = '\0';
        char words[64];
        kr__pp_pragma_words(text, words, sizeof words);
        kr__pp_item *it = add_item(S, KR__PP_PRAGMA, line);
        if (it)
            it->word = kr__pp_dup_n(S, words, strlen(words));
    } else if (!strcmp(d, "line")) {
        kr__pp_skip_hspace(S);
        kr__pp_read_number(S);
        kr__pp_skip_hspace(S);
        kr__pp_item *it = add_item(S, KR__PP_LINE, line);
        if (it && cur(r) == '"') {
            int delim;
            it->word = kr__pp_read_header_name(S, &delim);
        }
    } else {
        cond_directive(S, d, line);
        if (!strcmp(d, "ifdef") || !strcmp(d, "ifndef") || !strcmp(d, "elifdef") ||
            !strcmp(d, "elifndef"))
            S->after_defined = 1;
    }
    rest_of_line(S);
    S->after_defined = 0;
}

static void check_trigraphs(scanner *S)
{
    const char *s = S->r.s;
    unsigned line = 1;
    for (size_t i = 0; i + 2 < S->r.n; i++) {
        if (s[i] == '\n')
            line++;
        if (s[i] == '?' && s[i + 1] == '?' && strchr("=/'()!<>-", s[i + 2]) && s[i + 2]) {
            kr__pp_refuse(S, line,
                          "a trigraph (??x), which NVRTC translates in this language mode");
            return;
        }
    }
}

int kr__pp_scan_text(kr__pp_scan *scan, const char *text, size_t len, kr__pp_mode mode)
{
    memset(scan, 0, sizeof *scan);
    scanner *S = calloc(1, sizeof *S);
    if (!S)
        return -1;
    S->r.s = text;
    S->r.n = len;
    S->r.line = 1;
    S->out = scan;
    S->mode = mode;
    if (mode.trigraphs && !mode.lenient)
        check_trigraphs(S);
    splices(&S->r);
    int at_bol = 1;
    while (!stopped(S) && cur(&S->r) != -1) {
        int c = cur(&S->r);
        if (c == '\n') {
            at_bol = 1;
            adv(&S->r);
        } else if (inert[c]) {
            if (skip_inert(&S->r)) {
                at_bol = 0;
                S->after_defined = 0;
            }
        } else if (c == '/' && (ahead(&S->r) == '/' || ahead(&S->r) == '*')) {
            int nl = 0;
            kr__pp_skip_comment(S, &nl);
            if (nl)
                at_bol = 1;
        } else if (at_bol && (c == '#' || (c == '%' && ahead(&S->r) == ':'))) {
            directive(S);
            at_bol = 0;
        } else {
            at_bol = 0;
            token(S, 0);
        }
    }
    free(S);
    return scan->oom ? -1 : 0;
}

void kr__pp_scan_free(kr__pp_scan *scan)
{
    for (size_t i = 0; i < scan->count; i++) {
        free(scan->items[i].word);
        free(scan->items[i].name);
    }
    free(scan->items);
    memset(scan, 0, sizeof *scan);
}
