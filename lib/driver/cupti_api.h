/* CUPTI, loaded lazily at run time (libcupti.so.13 or .so.12: lib/common/dynlib.h),
 * for activity tracing. */
#ifndef KR_CUPTI_API_H
#define KR_CUPTI_API_H

#include <cupti.h>

#define KR_CUPTI_FUNCTIONS(X)            \
    X(cuptiGetVersion)                   \
    X(cuptiGetResultString)              \
    X(cuptiGetTimestamp)                 \
    X(cuptiActivityEnable)               \
    X(cuptiActivityDisable)              \
    X(cuptiActivityRegisterCallbacks)    \
    X(cuptiActivityFlushAll)             \
    X(cuptiActivityGetNextRecord)        \
    X(cuptiActivityGetNumDroppedRecords) \
    X(cuptiGetStreamIdEx)                \
    X(cuptiSubscribe)                    \
    X(cuptiEnableCallback)

#define KR__CUPTI_FIELD(name) __typeof__(&name) name;

typedef struct kr__cupti_api {
    int loaded;
    uint32_t version; /* CUPTI API version: 130001 for 13.0; 18 to 28 for 12.x */
    char path[512];
    char source[64];        /* where path was found: "toolkit", "wheel", ... */
    char note[256];         /* a caveat about the copy loaded, or "" */
    char why[2048];
    KR_CUPTI_FUNCTIONS(KR__CUPTI_FIELD)
} kr__cupti_api;

/* Loads CUPTI once per process (thread-safe), found as NVRTC is
 * ($KREWARD_CUPTI_LIBRARY, else CUDA 13 or 12); a failed load is retried. */
const kr__cupti_api *kr__cupti(const char *cuda_home);

#endif
