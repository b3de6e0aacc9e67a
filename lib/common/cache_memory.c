/* In-memory LRU cache of compile blobs, bounded in bytes. */
#include "common/cache.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define BUCKETS 4096u /* power of two; keys are uniform hashes */

struct entry {
    kr__hash128 key;
    void *blob;
    size_t len;
    struct entry *bucket_next;
    struct entry *newer, *older; /* LRU list */
};

struct kr__mem_cache {
    pthread_mutex_t lock;
    uint64_t budget, used, count;
    struct entry *buckets[BUCKETS];
    struct entry *newest, *oldest;
};

struct kr__mem_cache *kr__mem_cache_new(uint64_t budget_bytes)
{
    struct kr__mem_cache *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    pthread_mutex_init(&c->lock, NULL);
    c->budget = budget_bytes;
    return c;
}

static struct entry **slot_of(struct kr__mem_cache *c, kr__hash128 key)
{
    struct entry **p = &c->buckets[key.lo & (BUCKETS - 1)];
    while (*p && !kr__hash128_equal((*p)->key, key))
        p = &(*p)->bucket_next;
    return p;
}

static void lru_unlink(struct kr__mem_cache *c, struct entry *e)
{
    if (e->newer)
        e->newer->older = e->older;
    else
        c->newest = e->older;
    if (e->older)
        e->older->newer = e->newer;
    else
        c->oldest = e->newer;
    e->newer = e->older = NULL;
}

static void lru_push_newest(struct kr__mem_cache *c, struct entry *e)
{
    e->older = c->newest;
    e->newer = NULL;
    if (c->newest)
        c->newest->newer = e;
    c->newest = e;
    if (!c->oldest)
        c->oldest = e;
}

static void remove_entry(struct kr__mem_cache *c, struct entry *e)
{
    struct entry **p = slot_of(c, e->key);
    *p = e->bucket_next;
    lru_unlink(c, e);
    c->used -= e->len;
    c->count--;
    free(e->blob);
    free(e);
}

void kr__mem_cache_free(struct kr__mem_cache *c)
{
    if (!c)
        return;
    while (c->oldest)
        remove_entry(c, c->oldest);
    pthread_mutex_destroy(&c->lock);
    free(c);
}

int kr__mem_cache_get(struct kr__mem_cache *c, kr__hash128 key, void **blob, size_t *len)
{
    int found = 0;
    pthread_mutex_lock(&c->lock);
    struct entry *e = *slot_of(c, key);
    if (e) {
        lru_unlink(c, e);
        lru_push_newest(c, e);
        *blob = malloc(e->len ? e->len : 1);
        if (*blob) {
            memcpy(*blob, e->blob, e->len);
            *len = e->len;
            found = 1;
        } else {
            found = -1;
        }
    }
    pthread_mutex_unlock(&c->lock);
    return found;
}

int kr__mem_cache_put(struct kr__mem_cache *c, kr__hash128 key, const void *blob, size_t len)
{
    if (len > c->budget)
        return 0;
    void *copy = malloc(len ? len : 1);
    if (!copy)
        return -1;
    memcpy(copy, blob, len);
    pthread_mutex_lock(&c->lock);
    struct entry *old = *slot_of(c, key);
    if (old)
        remove_entry(c, old);
    while (c->oldest && c->used + len > c->budget)
        remove_entry(c, c->oldest);
    struct entry *e = calloc(1, sizeof *e);
    if (!e) {
        pthread_mutex_unlock(&c->lock);
        free(copy);
        return -1;
    }
    e->key = key;
    e->blob = copy;
    e->len = len;
    struct entry **slot = slot_of(c, key);
    *slot = e;
    lru_push_newest(c, e);
    c->used += len;
    c->count++;
    pthread_mutex_unlock(&c->lock);
    return 0;
}

void kr__mem_cache_stats(struct kr__mem_cache *c, uint64_t *used, uint64_t *entries,
                         uint64_t *budget)
{
    pthread_mutex_lock(&c->lock);
    *used = c->used;
    *entries = c->count;
    *budget = c->budget;
    pthread_mutex_unlock(&c->lock);
}
