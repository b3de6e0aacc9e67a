/* The list of kernels a program image defines (kernels.h). */
#include "compile/kernels.h"
#include "common/strbuf.h"

#include <stdlib.h>
#include <string.h>

int kr__kernels_add(kr__kernel **list, size_t *count, const char *name, size_t len)
{
    kr__kernel *grown = realloc(*list, (*count + 1) * sizeof *grown);
    if (!grown)
        return -1;
    *list = grown;
    kr__kernel *k = &grown[*count];
    memset(k, 0, sizeof *k);
    for (int i = 0; i < KR__KERNEL_ATTR_MAX; i++)
        k->attrs[i] = -1;
    if (!(k->name = kr__strndup(name, len)))
        return -1;
    (*count)++;
    return 0;
}

void kr__kernels_free(kr__kernel *list, size_t count)
{
    for (size_t i = 0; i < count; i++) {
        free(list[i].name);
        free(list[i].param_offset);
        free(list[i].param_size);
    }
    free(list);
}

void kr__image_facts_free(kr__image_facts *facts)
{
    for (size_t i = 0; i < facts->num_globals; i++)
        free(facts->globals[i].name);
    free(facts->globals);
    free(facts->groups);
    memset(facts, 0, sizeof *facts);
}
