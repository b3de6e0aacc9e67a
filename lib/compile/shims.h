/* Standard-header shims for NVRTC (<cstdio>, <cstdint>, <cmath>, ...), built
 * into the library and handed to NVRTC in memory: never read from disk. */
#ifndef KR_SHIMS_H
#define KR_SHIMS_H

#include <stddef.h>
#include <stdint.h>

size_t kr__shim_count(void);
/* Name (as included, e.g. "cstdint"), text and length of shim i; NULL when
 * out of range. */
const char *kr__shim_at(size_t i, const char **text, size_t *len);
/* Index of the shim included as `name`, -1 when none. */
long kr__shim_find(const char *name);
/* XXH3-128 over every shim's name and text: part of the compile cache key,
 * so a program compiled against other shims is never reused. */
void kr__shims_digest(uint64_t *lo, uint64_t *hi);

#endif
