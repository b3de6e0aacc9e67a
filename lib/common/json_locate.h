/* Where a field is in JSON text, for error messages.
 *
 * jansson parses the documents, but keeps no positions once parsed; a
 * semantic error ("unknown dim") must still say file:line:column. This walks
 * the raw text along a path such as "tensors[1].shape[0]" and reports where
 * that value starts. Only called on the error path. */
#ifndef KR_JSON_LOCATE_H
#define KR_JSON_LOCATE_H

#include <stddef.h>

/* 0 and the 1-based line and column of the value at path; -1 when the path
 * is not found (the position of the deepest part found is still written). */
int kr__json_locate(const char *text, size_t len, const char *path, int *line, int *col);

#endif
