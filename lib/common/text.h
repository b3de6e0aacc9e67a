/* Text a candidate controls (its kernel names, its source lines echoed in
 * compile errors) reaches feedback a model or a person reads, and logs a
 * trainer parses line by line. Cleaned, it cannot fake structure there: no
 * control characters, no line separators but '\n', valid UTF-8 only. */
#ifndef KR_TEXT_H
#define KR_TEXT_H

#include <stddef.h>

/* A malloc'd copy of text in which C0 controls (but '\n' and '\t'), DEL,
 * NEL (U+0085), LINE and PARAGRAPH SEPARATOR (U+2028/9) and bytes that are
 * not valid UTF-8 are replaced with '?'. NULL when out of memory. */
char *kr__clean_text(const char *text);
/* A malloc'd copy of text with every line prefixed by prefix (e.g. "| "),
 * cleaned as above: marks the whole as quoted. */
char *kr__quote_lines(const char *text, size_t max_bytes, const char *prefix);

#endif
