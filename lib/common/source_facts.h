/* What a source's tokens say about it (common/lexer.h does the reading):
 * its size, measured so that layout cannot make code look smaller, and a
 * fingerprint that names, comments and layout do not change, for telling
 * a copy of the reference from a kernel of the candidate's own. */
#ifndef KR_SOURCE_FACTS_H
#define KR_SOURCE_FACTS_H

#include "common/hash.h"

#include <stddef.h>

/* The bundled examples hold 8.3 to 18.8 tokens per line of code, median 12:
 * ordinary layout is counted by its lines, and code joined onto fewer lines
 * than tokens / KR__TOKENS_PER_LINE counts as that many. */
#define KR__TOKENS_PER_LINE 12

typedef struct kr__source_facts {
    size_t code_tokens;     /* tokens that are not comments (directives and #if 0 groups
                             * included: the candidate wrote them) */
    size_t token_lines;     /* physical lines holding a code token or part of one */
    size_t code_lines;      /* max(token_lines, ceil(code_tokens / KR__TOKENS_PER_LINE)) */
} kr__source_facts;

/* Never fails; linear in len. */
void kr__source_facts_of(kr__source_facts *out, const char *src, size_t len);
/* kr__source_facts_of(...).code_lines: the report's `code_lines`. */
size_t kr__source_code_lines(const char *src, size_t len);

/* XXH3-128 over the source's tokens, without comments, layout, #include
 * lines, conditional directive lines and groups known dead (#if 0); each
 * identifier the source chose is replaced by the order of its first
 * appearance (member names after . or -> counted apart; keyword-ish names,
 * literals and punctuators are kept as written, splices removed). Two
 * sources that differ only in those agree.
 * KR_OK, or KR_ENOMEM. */
int kr__source_fingerprint(kr__hash128 *out, const char *src, size_t len);

#endif
