/* Integer expressions over named values: a recursive-descent parser to a
 * postfix program, and a checked int64 evaluator. */
#include "common/expr.h"
#include "common/strbuf.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum op { OP_CONST, OP_NAME, OP_ADD, OP_SUB, OP_MUL, OP_DIV, OP_MOD, OP_NEG, OP_MIN, OP_MAX, OP_CDIV };

typedef struct {
    enum op op;
    int64_t value; /* OP_CONST: the constant; OP_NAME: the name's index */
} instr;

struct kr__expr {
    instr *code;
    size_t len, cap;
    size_t depth;  /* stack needed */
    char *text;
};

typedef struct {
    const char *src, *p;
    const char *const *names;
    size_t count;
    kr__expr *e;
    char *why;
    size_t why_size;
    int failed;
    int nesting;
} parser;

#define MAX_NESTING 64
#define MAX_CODE 4096

static void fail(parser *ps, const char *at, const char *fmt, const char *arg)
{
    if (ps->failed)
        return;
    ps->failed = 1;
    char msg[600];
    snprintf(msg, sizeof msg, fmt, arg);
    snprintf(ps->why, ps->why_size, "column %d: %s", (int)(at - ps->src) + 1, msg);
}

static void emit(parser *ps, enum op op, int64_t value)
{
    kr__expr *e = ps->e;
    if (ps->failed)
        return;
    if (e->len == MAX_CODE) {
        fail(ps, ps->p, "%s", "expression too long");
        return;
    }
    if (e->len == e->cap) {
        size_t cap = e->cap ? e->cap * 2 : 16;
        instr *grown = realloc(e->code, cap * sizeof *grown);
        if (!grown) {
            fail(ps, ps->p, "%s", "out of memory");
            return;
        }
        e->code = grown;
        e->cap = cap;
    }
    e->code[e->len].op = op;
    e->code[e->len].value = value;
    e->len++;
}

static void skip_space(parser *ps)
{
    while (isspace((unsigned char)*ps->p))
        ps->p++;
}

static int accept(parser *ps, char c)
{
    skip_space(ps);
    if (*ps->p != c)
        return 0;
    ps->p++;
    return 1;
}

static void expect(parser *ps, char c)
{
    if (!accept(ps, c)) {
        char want[4] = {'\'', c, '\'', 0};
        fail(ps, ps->p, *ps->p ? "expected %s" : "expected %s before the end", want);
    }
}

static void parse_sum(parser *ps);

static void parse_call(parser *ps, const char *start, size_t n)
{
    static const struct {
        const char *name;
        enum op op;
    } funcs[] = {{"min", OP_MIN}, {"max", OP_MAX}, {"cdiv", OP_CDIV}};
    for (size_t i = 0; i < sizeof funcs / sizeof funcs[0]; i++) {
        if (strlen(funcs[i].name) == n && strncmp(start, funcs[i].name, n) == 0) {
            parse_sum(ps);
            expect(ps, ',');
            parse_sum(ps);
            expect(ps, ')');
            emit(ps, funcs[i].op, 0);
            return;
        }
    }
    char name[64];
    snprintf(name, sizeof name, "%.*s", (int)(n < 60 ? n : 60), start);
    fail(ps, start, "unknown function '%s' (known: min, max, cdiv)", name);
}

static void parse_name(parser *ps)
{
    const char *start = ps->p;
    while (isalnum((unsigned char)*ps->p) || *ps->p == '_')
        ps->p++;
    size_t n = (size_t)(ps->p - start);
    if (accept(ps, '(')) {
        parse_call(ps, start, n);
        return;
    }
    for (size_t i = 0; i < ps->count; i++) {
        if (strlen(ps->names[i]) == n && strncmp(ps->names[i], start, n) == 0) {
            emit(ps, OP_NAME, (int64_t)i);
            return;
        }
    }
    kr__buf known = KR__BUF_INIT;
    for (size_t i = 0; i < ps->count; i++)
        kr__buf_printf(&known, "%s%s", i ? ", " : "", ps->names[i]);
    char msg[500];
    snprintf(msg, sizeof msg, "unknown name '%.*s' (known: %s)", (int)(n < 60 ? n : 60), start,
             known.data ? known.data : "none");
    kr__buf_free(&known);
    fail(ps, start, "%s", msg);
}

static void parse_number(parser *ps)
{
    const char *start = ps->p;
    int64_t v = 0;
    while (isdigit((unsigned char)*ps->p)) {
        if (__builtin_mul_overflow(v, 10, &v) || __builtin_add_overflow(v, *ps->p - '0', &v)) {
            fail(ps, start, "%s", "integer constant too large for int64");
            return;
        }
        ps->p++;
    }
    if (isalpha((unsigned char)*ps->p) || *ps->p == '_' || *ps->p == '.')
        fail(ps, ps->p, "%s", "a number must be a plain integer");
    emit(ps, OP_CONST, v);
}

static void parse_unary(parser *ps)
{
    skip_space(ps);
    if (++ps->nesting > MAX_NESTING) {
        fail(ps, ps->p, "%s", "expression nested too deeply");
        return;
    }
    if (accept(ps, '-')) {
        parse_unary(ps);
        emit(ps, OP_NEG, 0);
    } else if (accept(ps, '+')) {
        parse_unary(ps);
    } else if (accept(ps, '(')) {
        parse_sum(ps);
        expect(ps, ')');
    } else if (isdigit((unsigned char)*ps->p)) {
        parse_number(ps);
    } else if (isalpha((unsigned char)*ps->p) || *ps->p == '_') {
        parse_name(ps);
    } else {
        char c[8];
        snprintf(c, sizeof c, "'%c'", *ps->p);
        fail(ps, ps->p, *ps->p ? "unexpected %s" : "expected a value before the end",
             isprint((unsigned char)*ps->p) ? c : "character");
    }
    ps->nesting--;
}

static void parse_product(parser *ps)
{
    parse_unary(ps);
    for (;;) {
        if (accept(ps, '*')) {
            parse_unary(ps);
            emit(ps, OP_MUL, 0);
        } else if (accept(ps, '/')) {
            parse_unary(ps);
            emit(ps, OP_DIV, 0);
        } else if (accept(ps, '%')) {
            parse_unary(ps);
            emit(ps, OP_MOD, 0);
        } else {
            return;
        }
        if (ps->failed)
            return;
    }
}

static void parse_sum(parser *ps)
{
    parse_product(ps);
    for (;;) {
        if (accept(ps, '+')) {
            parse_product(ps);
            emit(ps, OP_ADD, 0);
        } else if (accept(ps, '-')) {
            parse_product(ps);
            emit(ps, OP_SUB, 0);
        } else {
            return;
        }
        if (ps->failed)
            return;
    }
}

static size_t stack_depth(const kr__expr *e)
{
    size_t depth = 0, most = 0;
    for (size_t i = 0; i < e->len; i++) {
        enum op op = e->code[i].op;
        if (op == OP_CONST || op == OP_NAME)
            depth++;
        else if (op != OP_NEG)
            depth--;
        if (depth > most)
            most = depth;
    }
    return most;
}

kr__expr *kr__expr_parse(const char *text, const char *const *names, size_t count, char *why,
                         size_t why_size)
{
    kr__expr *e = calloc(1, sizeof *e);
    if (!e || !(e->text = kr__strdup(text ? text : ""))) {
        free(e);
        snprintf(why, why_size, "out of memory");
        return NULL;
    }
    parser ps = {e->text, e->text, names, count, e, why, why_size, 0, 0};
    skip_space(&ps);
    if (!*ps.p)
        fail(&ps, ps.p, "%s", "empty expression");
    parse_sum(&ps);
    skip_space(&ps);
    if (!ps.failed && *ps.p) {
        char c[8];
        snprintf(c, sizeof c, "'%c'", *ps.p);
        fail(&ps, ps.p, "unexpected %s after the expression", isprint((unsigned char)*ps.p) ? c : "character");
    }
    if (ps.failed) {
        kr__expr_free(e);
        return NULL;
    }
    e->depth = stack_depth(e);
    return e;
}

void kr__expr_free(kr__expr *e)
{
    if (!e)
        return;
    free(e->code);
    free(e->text);
    free(e);
}

const char *kr__expr_text(const kr__expr *e)
{
    return e->text;
}

int kr__expr_uses(const kr__expr *e, size_t name_index)
{
    for (size_t i = 0; i < e->len; i++)
        if (e->code[i].op == OP_NAME && (size_t)e->code[i].value == name_index)
            return 1;
    return 0;
}

static int cdiv(int64_t a, int64_t b, int64_t *out)
{
    if (b == -1 && a == INT64_MIN)
        return -1;
    int64_t q = a / b;
    if (a % b != 0 && ((a > 0) == (b > 0)))
        q++;
    *out = q;
    return 0;
}

static int apply(enum op op, int64_t a, int64_t b, int64_t *r, const char **why)
{
    switch (op) {
    case OP_ADD:
        *why = "overflow in +";
        return __builtin_add_overflow(a, b, r) ? -1 : 0;
    case OP_SUB:
        *why = "overflow in -";
        return __builtin_sub_overflow(a, b, r) ? -1 : 0;
    case OP_MUL:
        *why = "overflow in *";
        return __builtin_mul_overflow(a, b, r) ? -1 : 0;
    case OP_DIV:
    case OP_MOD:
    case OP_CDIV:
        if (b == 0) {
            *why = op == OP_MOD ? "modulo by zero" : "division by zero";
            return -1;
        }
        *why = "overflow in division";
        if (op == OP_CDIV)
            return cdiv(a, b, r);
        if (a == INT64_MIN && b == -1)
            return -1;
        *r = op == OP_DIV ? a / b : a % b;
        return 0;
    case OP_MIN:
        *r = a < b ? a : b;
        return 0;
    case OP_MAX:
        *r = a > b ? a : b;
        return 0;
    default:
        *why = "internal error";
        return -1;
    }
}

int kr__expr_eval(const kr__expr *e, const int64_t *values, int64_t *out, char *why,
                  size_t why_size)
{
    int64_t small[32];
    int64_t *stack = e->depth <= 32 ? small : malloc(e->depth * sizeof *stack);
    if (!stack) {
        snprintf(why, why_size, "out of memory");
        return -1;
    }
    size_t sp = 0;
    int rc = 0;
    for (size_t i = 0; i < e->len && rc == 0; i++) {
        const instr *in = &e->code[i];
        const char *reason = NULL;
        switch (in->op) {
        case OP_CONST:
            stack[sp++] = in->value;
            break;
        case OP_NAME:
            stack[sp++] = values[in->value];
            break;
        case OP_NEG:
            if (stack[sp - 1] == INT64_MIN) {
                rc = -1;
                reason = "overflow in unary -";
            } else {
                stack[sp - 1] = -stack[sp - 1];
            }
            break;
        default:
            sp--;
            rc = apply(in->op, stack[sp - 1], stack[sp], &stack[sp - 1], &reason);
            break;
        }
        if (rc != 0)
            snprintf(why, why_size, "%s in '%s'", reason, e->text);
    }
    if (rc == 0)
        *out = stack[0];
    if (stack != small)
        free(stack);
    return rc;
}
