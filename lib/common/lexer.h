/* A C/CUDA lexer for reading what a candidate wrote: tokens with their kind,
 * byte range, physical lines and the preprocessor conditionals around them.
 * It does not preprocess (no macro expansion, no includes): it tells code
 * from comments and literals the way the compiler's first phases do (line
 * splices, comments, string, character and raw string literals, digit
 * separators), and follows #if/#ifdef/#ifndef/#elif/#else/#endif nesting,
 * with groups whose condition is a literal 0 or 1 (#if 0) known dead or
 * live.
 *
 * Any input is safe: never a read outside [src, src + len), work linear in
 * len (each byte is looked at a bounded number of times), no allocation.
 * Where the compiler would reject the text (unterminated comments or
 * literals, stray characters) the lexer still ends the token somewhere
 * sensible and says so (KR__TOKF_UNTERMINATED). NVRTC's front end was
 * checked on the cases that differ between compilers: only a backslash
 * directly before \n or \r\n splices lines (not one followed by spaces),
 * a lone \r is not a line end, trigraphs are off. */
#ifndef KR_LEXER_H
#define KR_LEXER_H

#include <stddef.h>
#include <stdint.h>

enum kr__tok_kind {
    KR__TOK_EOF = 0,
    KR__TOK_IDENT,         /* an identifier the source chose */
    KR__TOK_KEYWORD,       /* keyword-ish: a C/C++ keyword, a CUDA qualifier or builtin
                            * variable (threadIdx ...), or a directive's name */
    KR__TOK_NUMBER,        /* a preprocessing number (1'000, 0x1p-3f, 1e+5 ...) */
    KR__TOK_STRING,        /* "..." with its prefix (u8, L ...), or a raw R"d(...)d" */
    KR__TOK_CHAR,          /* '...' with its prefix */
    KR__TOK_PUNCT,         /* an operator or punctuator; also any stray character */
    KR__TOK_DIRECTIVE,     /* the # (or %:) that starts a preprocessor directive */
    KR__TOK_LINE_COMMENT,  /* // ... to the end of its line (and spliced lines) */
    KR__TOK_BLOCK_COMMENT, /* slash-star ... star-slash */
};

/* Which directive a token's logical line is (KR__DIR_NONE off directive lines). */
enum kr__directive {
    KR__DIR_NONE = 0,
    KR__DIR_NULL,          /* a # alone, or followed by something that is not a name */
    KR__DIR_IF,
    KR__DIR_IFDEF,
    KR__DIR_IFNDEF,
    KR__DIR_ELIF,          /* also #elifdef and #elifndef */
    KR__DIR_ELSE,
    KR__DIR_ENDIF,
    KR__DIR_INCLUDE,       /* also #include_next, #import */
    KR__DIR_DEFINE,
    KR__DIR_UNDEF,
    KR__DIR_PRAGMA,
    KR__DIR_OTHER,         /* #line, #error, #warning, # 12 "file" ... */
};

#define KR__TOKF_UNTERMINATED 0x01u /* a comment or literal that never ends (or a
                                     * string or character literal cut at its line's end) */
#define KR__TOKF_DEAD 0x02u         /* inside a conditional group known false (#if 0) */
#define KR__TOKF_LINE_START 0x04u   /* no code token before it on its logical line */
#define KR__TOKF_SPLICED 0x08u      /* holds a line splice (backslash-newline) */
#define KR__TOKF_RAW 0x10u          /* a raw string literal */

typedef struct kr__token {
    int kind;               /* KR__TOK_* */
    unsigned flags;         /* KR__TOKF_* */
    int directive;          /* KR__DIR_*: the directive whose line holds the token */
    size_t start, end;      /* its bytes: [start, end) of the source, splices included */
    uint32_t line;          /* physical line (from 1) of its first byte */
    uint32_t end_line;      /* ... and of its last byte */
    uint32_t cond_depth;    /* conditional groups open around it (0: none) */
} kr__token;

#define KR__LEX_MAX_NEST 64 /* groups followed individually; deeper ones count as unknown */

typedef struct kr__lexer {
    const char *src;
    size_t len, pos;
    uint32_t line;          /* at pos */
    int line_start;         /* no code token yet on this logical line */
    int directive;          /* KR__DIR_* of the current line, NONE outside directives */
    int expect_name;        /* the next token is the directive's name */
    /* a #if/#elif condition seen so far: ( ... ( value ) ... ) */
    int cond_opens, cond_closes, cond_value, cond_junk;
    uint32_t depth;         /* conditional groups open */
    uint32_t dead_levels;   /* followed groups whose branch is known false */
    uint8_t group[KR__LEX_MAX_NEST];
} kr__lexer;

void kr__lex_init(kr__lexer *L, const char *src, size_t len);
/* The next token, comments included; KR__TOK_EOF (returned too) at the end,
 * again on every later call. */
int kr__lex_next(kr__lexer *L, kr__token *t);

/* The token's text as the compiler reads it: line splices removed (raw
 * strings keep theirs, as the language says). Writes at most cap bytes, no
 * terminator; returns the whole length (never more than end - start). */
size_t kr__lex_spell(const char *src, const kr__token *t, char *out, size_t cap);

/* Where a byte offset of the source is. */
enum kr__lex_context {
    KR__AT_CODE = 0,        /* a code token, or the space between tokens */
    KR__AT_LINE_COMMENT,
    KR__AT_BLOCK_COMMENT,
    KR__AT_STRING,          /* ordinary or raw */
    KR__AT_CHAR,
    KR__AT_END,             /* at or past the end of the source */
};

typedef struct kr__lex_where {
    int context;            /* KR__AT_* */
    int directive;          /* KR__DIR_* of the line there (NONE outside directives) */
    uint32_t cond_depth;    /* conditional groups open there */
    int dead;               /* inside a group known false */
    size_t token_start;     /* the token holding it (its start), or the next one */
} kr__lex_where;

/* Lexes up to offset and says where it falls (linear in offset). */
void kr__lex_where_offset(const char *src, size_t len, size_t offset, kr__lex_where *out);
/* The same for the first byte of a physical line (from 1): e.g. whether the
 * line begins inside a block comment, a raw string or an #if 0 group;
 * KR__AT_END when the source has fewer lines. */
void kr__lex_where_line(const char *src, size_t len, uint32_t line, kr__lex_where *out);

/* Calls fn for every line comment, in order; every one is at top level (not
 * inside a block comment or a literal, by construction). The token says its
 * line, whether it is inside a conditional group (cond_depth, DEAD), on a
 * directive's line (directive) or after code (no LINE_START), and whether it
 * runs on to the next line through a splice (end_line > line). A non-zero
 * return from fn stops the walk and is returned. */
typedef int (*kr__line_comment_fn)(void *user, const char *src, const kr__token *comment);
int kr__lex_line_comments(const char *src, size_t len, kr__line_comment_fn fn, void *user);

#endif
