/* CUPTI activity tracing: kernel start/end records for every kernel. */
#include "driver/trace.h"
#include "driver/cupti_api.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BUFFER_BYTES (1u << 20)
#define MAX_RECORDS (1u << 20) /* beyond this the oldest are dropped: never unbounded */

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;     /* the record buffer */
static pthread_mutex_t g_measure = PTHREAD_MUTEX_INITIALIZER;  /* one measurement at a time */
static const kr__cupti_api *g_cupti;
static int g_state;            /* 0 not tried, 1 active, -1 failed */
static char g_why[512];
static kr__kernel_record *g_records;
static size_t g_count, g_cap;

static void CUPTIAPI buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records)
{
    *buffer = aligned_alloc(8, BUFFER_BYTES);
    *size = *buffer ? BUFFER_BYTES : 0;
    *max_records = 0;
}

static void append(const CUpti_ActivityKernel10 *k)
{
    if (g_count == MAX_RECORDS)
        g_count = 0; /* nobody collected for a long time: start over */
    if (g_count == g_cap) {
        size_t cap = g_cap ? g_cap * 2 : 4096;
        kr__kernel_record *grown = realloc(g_records, cap * sizeof *grown);
        if (!grown)
            return;
        g_records = grown;
        g_cap = cap;
    }
    kr__kernel_record *r = &g_records[g_count++];
    r->start = k->start;
    r->end = k->end;
    r->stream = k->streamId;
    r->correlation = k->correlationId;
    r->device_launched = k->isDeviceLaunched;
    r->marker = !k->name ? 0 : strcmp(k->name, "kr_spin_until") == 0 ? 1
                             : strcmp(k->name, "kr_spin_cycles") == 0 ? 2 : 0;
}

static void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream, uint8_t *buffer, size_t size,
                                      size_t valid)
{
    (void)ctx;
    (void)stream;
    (void)size;
    CUpti_Activity *record = NULL;
    pthread_mutex_lock(&g_lock);
    while (g_cupti && g_cupti->cuptiActivityGetNextRecord(buffer, valid, &record) == CUPTI_SUCCESS)
        if (record->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL)
            append((const CUpti_ActivityKernel10 *)record);
    pthread_mutex_unlock(&g_lock);
    free(buffer);
}

int kr__trace_start(const char *cuda_home, char *why, size_t why_size)
{
    pthread_mutex_lock(&g_lock);
    if (g_state == 0) {
        const char *env = getenv("KREWARD_CUPTI");
        const kr__cupti_api *cp = kr__cupti(cuda_home);
        CUptiResult r;
        const char *text = NULL;
        if (env && strcmp(env, "0") == 0) {
            snprintf(g_why, sizeof g_why, "disabled by KREWARD_CUPTI=0");
            g_state = -1;
        } else if (!cp->loaded) {
            snprintf(g_why, sizeof g_why, "CUPTI not available: %s", cp->why);
            g_state = -1;
        } else if ((r = cp->cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed)) !=
                       CUPTI_SUCCESS ||
                   (r = cp->cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL)) != CUPTI_SUCCESS) {
            cp->cuptiGetResultString(r, &text);
            snprintf(g_why, sizeof g_why, "CUPTI activity tracing refused (%s); another profiler "
                     "in this process?", text ? text : "?");
            g_state = -1;
        } else {
            g_cupti = cp;
            g_state = 1;
        }
    }
    int state = g_state;
    if (state < 0 && why)
        snprintf(why, why_size, "%s", g_why);
    pthread_mutex_unlock(&g_lock);
    return state > 0 ? 0 : -1;
}

int kr__trace_active(void)
{
    return g_state > 0;
}

static int by_start(const void *a, const void *b)
{
    uint64_t x = ((const kr__kernel_record *)a)->start, y = ((const kr__kernel_record *)b)->start;
    return (x > y) - (x < y);
}

int kr__trace_collect(kr__kernel_record **records, size_t *count)
{
    *records = NULL;
    *count = 0;
    if (g_state <= 0)
        return -1;
    /* outside the lock: completion callbacks run inside the flush */
    g_cupti->cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    pthread_mutex_lock(&g_lock);
    *records = g_records;
    *count = g_count;
    g_records = NULL;
    g_count = g_cap = 0;
    pthread_mutex_unlock(&g_lock);
    if (*count)
        qsort(*records, *count, sizeof **records, by_start);
    return 0;
}

void kr__trace_discard(void)
{
    kr__kernel_record *r;
    size_t n;
    if (kr__trace_collect(&r, &n) == 0)
        free(r);
}

void kr__trace_lock(void)
{
    pthread_mutex_lock(&g_measure);
}

void kr__trace_unlock(void)
{
    pthread_mutex_unlock(&g_measure);
}
