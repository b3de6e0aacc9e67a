/* What a context has found of problems' fast kernels (engine.h): checked
 * once per problem, remembered by the problem's hash. */
#include "run/engine.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static kr__fast_entry *find(const kr__engine *e, const char *hash)
{
    for (size_t i = 0; e && hash[0] && i < e->num_fast; i++)
        if (strcmp(e->fast[i].hash, hash) == 0)
            return &e->fast[i];
    return NULL;
}

const kr__fast_entry *kr__fast_memo_find(const kr__engine *e, const char *hash)
{
    return find(e, hash);
}

void kr__fast_memo_remember(kr__engine *e, const char *hash, int agreed, const char *why)
{
    if (!e || !hash[0]) /* problems must not share one remembered answer */
        return;
    kr__fast_entry *x = find(e, hash);
    if (!x) {
        kr__fast_entry *grown = realloc(e->fast, (e->num_fast + 1) * sizeof *grown);
        if (!grown)
            return; /* checked again next time */
        e->fast = grown;
        x = &grown[e->num_fast++];
        snprintf(x->hash, sizeof x->hash, "%s", hash);
    }
    x->agreed = agreed;
    snprintf(x->why, sizeof x->why, "%s", why ? why : "");
}
