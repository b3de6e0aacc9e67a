/* A map from byte strings to longs: open addressing, FNV-1a, doubled at
 * half full. */
#include "compile/name_map.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static uint64_t fnv1a(const char *s, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
    return h;
}

static long *slot(kr__name_map *m, const char *key, size_t n, int *found)
{
    *found = 0;
    if (!m->cap)
        return NULL;
    for (size_t i = fnv1a(key, n) & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
        if (!m->keys[i])
            return &m->vals[i];
        if (m->lens[i] == n && memcmp(m->keys[i], key, n) == 0) {
            *found = 1;
            return &m->vals[i];
        }
    }
}

int kr__name_map_get(const kr__name_map *m, const char *key, size_t n, long *val)
{
    int found;
    long *v = slot((kr__name_map *)m, key, n, &found);
    if (found)
        *val = *v;
    return found;
}

int kr__name_map_put(kr__name_map *m, const char *key, size_t n, long val)
{
    if ((m->count + 1) * 2 > m->cap) {
        kr__name_map bigger = {NULL, NULL, NULL, m->cap ? m->cap * 2 : 64, 0};
        bigger.keys = calloc(bigger.cap, sizeof *bigger.keys);
        bigger.lens = calloc(bigger.cap, sizeof *bigger.lens);
        bigger.vals = calloc(bigger.cap, sizeof *bigger.vals);
        if (!bigger.keys || !bigger.lens || !bigger.vals) {
            free(bigger.keys);
            free(bigger.lens);
            free(bigger.vals);
            return -1;
        }
        for (size_t i = 0; i < m->cap; i++) {
            if (!m->keys[i])
                continue;
            int found;
            long *v = slot(&bigger, m->keys[i], m->lens[i], &found);
            size_t at = (size_t)(v - bigger.vals);
            bigger.keys[at] = m->keys[i];
            bigger.lens[at] = m->lens[i];
            *v = m->vals[i];
        }
        bigger.count = m->count;
        free(m->keys);
        free(m->lens);
        free(m->vals);
        *m = bigger;
    }
    int found;
    long *v = slot(m, key, n, &found);
    if (!found) {
        size_t at = (size_t)(v - m->vals);
        if (!(m->keys[at] = malloc(n ? n : 1)))
            return -1;
        memcpy(m->keys[at], key, n);
        m->lens[at] = n;
        m->count++;
    }
    *v = val;
    return 0;
}

void kr__name_map_free(kr__name_map *m)
{
    for (size_t i = 0; i < m->cap; i++)
        free(m->keys[i]);
    free(m->keys);
    free(m->lens);
    free(m->vals);
    memset(m, 0, sizeof *m);
}
