/* Library and ABI versions, and freeing what the library handed out. */
#include "kreward/common.h"
#include "version_gen.h"

#include <stdlib.h>

const char *kr_version(void)
{
    return KR_VERSION_STRING;
}

uint32_t kr_version_number(void)
{
    return KR_VERSION_MAJOR * 10000u + KR_VERSION_MINOR * 100u + KR_VERSION_PATCH;
}

uint32_t kr_abi_version(void)
{
    return KR_ABI_VERSION;
}

void kr_free(void *ptr)
{
    free(ptr);
}
