/* CUPTI, loaded lazily at run time (libcupti.so.13), for activity tracing. */
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
    uint32_t version; /* CUPTI API version number */
    char path[512];
    char why[1024];
    KR_CUPTI_FUNCTIONS(KR__CUPTI_FIELD)
} kr__cupti_api;

/* Loads CUPTI once per process (thread-safe); a failed load is retried. */
const kr__cupti_api *kr__cupti(const char *cuda_home);

#endif
