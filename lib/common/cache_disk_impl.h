/* Inside the disk cache: trusted folders (cache_disk_dir.c) and the size cap
 * (cache_disk_evict.c), shared by the entry reader and writer
 * (cache_disk.c). */
#ifndef KR_CACHE_DISK_IMPL_H
#define KR_CACHE_DISK_IMPL_H

#include <stddef.h>
#include <stdint.h>

enum { KR__CACHE_DIR_MISSING = -2, KR__CACHE_DIR_ERROR = -1 };

/* 0 when fd is a folder (want_dir) or a regular file of this user that
 * neither its group nor others may write; else -1 and why (naming `what`). */
int kr__cache_trusted(int fd, const char *what, int want_dir, char *why, size_t why_size);
/* A descriptor of the cache folder, created 0700 (with missing parents) when
 * `create`; KR__CACHE_DIR_MISSING, or KR__CACHE_DIR_ERROR with why (also
 * for a folder that is not trusted). */
int kr__cache_dir_open(const char *dir, int create, char *why, size_t why_size);
/* The same for dir/name, opened through dirfd without following a link. */
int kr__cache_subdir_open(int dirfd, const char *dir, const char *name, int create, char *why,
                          size_t why_size);
/* Called after an entry of `bytes` was written: now and then (the first
 * write of a process, then every 1/16 of the cap written) trims the folder
 * to the cap. */
void kr__cache_after_write(const char *dir, uint64_t bytes);

#endif
