/* A map from byte strings (NULs allowed) to longs: the include resolver's
 * indexes (files by real path and by in-memory name, resolutions, macro
 * names). */
#ifndef KR_NAME_MAP_H
#define KR_NAME_MAP_H

#include <stddef.h>

typedef struct kr__name_map {
    char **keys;
    size_t *lens;
    long *vals;
    size_t cap, count;
} kr__name_map; /* zero-initialised: empty */

/* 1 and *val set when key is there, else 0. */
int kr__name_map_get(const kr__name_map *m, const char *key, size_t n, long *val);
/* Adds or replaces (the key is copied); -1 when out of memory. */
int kr__name_map_put(kr__name_map *m, const char *key, size_t n, long val);
void kr__name_map_free(kr__name_map *m);

#endif
