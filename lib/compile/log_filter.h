/* No compile log carries a line of a file the candidate did not write:
 * NVRTC echoes the source line of whatever file a diagnostic is in (and
 * its message can quote that file), so diagnostics located in any other
 * file are withheld and replaced by one line saying where they were. */
#ifndef KR_LOG_FILTER_H
#define KR_LOG_FILTER_H

#include <stddef.h>

/* The log with every diagnostic not located in `own` (the candidate's file
 * name) withheld; *withheld (may be NULL) counts them. malloc'd; NULL when
 * out of memory. */
char *kr__log_filter(const char *log, const char *own, size_t *withheld);

#endif
