/* The compile cache: opaque blobs keyed by XXH3-128, in memory (LRU within a
 * byte budget, thread-safe) and on disk (one file per key, written
 * atomically, checksummed, owner-checked, size-capped, safe for several
 * processes). */
#ifndef KR_CACHE_H
#define KR_CACHE_H

#include "common/hash.h"

#include <stddef.h>
#include <stdint.h>

struct kr__mem_cache;

struct kr__mem_cache *kr__mem_cache_new(uint64_t budget_bytes);
void kr__mem_cache_free(struct kr__mem_cache *c);
/* 1 and a malloc'd copy on a hit, 0 on a miss, -1 when out of memory. */
int kr__mem_cache_get(struct kr__mem_cache *c, kr__hash128 key, void **blob, size_t *len);
/* Inserts (or refreshes) an entry, evicting least recently used ones to stay
 * within the budget. A blob larger than the budget is not kept. */
int kr__mem_cache_put(struct kr__mem_cache *c, kr__hash128 key, const void *blob, size_t len);
void kr__mem_cache_stats(struct kr__mem_cache *c, uint64_t *used, uint64_t *entries,
                         uint64_t *budget);

enum { KR__DISK_MISS = 0, KR__DISK_HIT = 1, KR__DISK_CORRUPT = 2, KR__DISK_ERROR = -1 };
/* Reads an entry. KR__DISK_CORRUPT (with the reason in why) means the file
 * exists but failed a check; the caller recompiles and overwrites it. */
int kr__disk_cache_get(const char *dir, kr__hash128 key, void **blob, size_t *len, char *why,
                       size_t why_size);
/* Writes an entry atomically (temporary file + rename in the same folder). */
int kr__disk_cache_put(const char *dir, kr__hash128 key, const void *blob, size_t len, char *why,
                       size_t why_size);
/* Path of the file for a key (for tests and messages). */
void kr__disk_cache_path(const char *dir, kr__hash128 key, char *out, size_t size);

/* The disk cache trusts only a folder, subfolders and entries that belong
 * to this user and that no one else can write (it creates them 0700 and
 * 0600); anything else is reported and not used. Its size is capped: */
#define KR__DISK_CACHE_DEFAULT_MAX ((uint64_t)1 << 30)
/* The cap: $KREWARD_CACHE_MAX_BYTES (bytes, or with a K, M or G suffix,
 * binary; 0: no cap), else 1 GiB. */
uint64_t kr__disk_cache_max_bytes(void);
/* When the entries take more than max_bytes, removes the least recently
 * used ones (a hit refreshes its entry's mtime) until they take at most 7/8
 * of it; also removes temporary files a killed writer left over an hour
 * ago. Returns the number of entries removed (and the bytes left in
 * *bytes_after when not NULL), or -1 with why. */
int kr__disk_cache_evict(const char *dir, uint64_t max_bytes, uint64_t *bytes_after, char *why,
                         size_t why_size);

#endif
