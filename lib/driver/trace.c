/* CUPTI activity tracing: kernel start/end records for every kernel, and
 * the library's own marker launches recognised by function handle and
 * correlation id.
 *
 * The engine registers the function handles of its spin kernel and clock
 * probe (which frame a benchmark sample). A driver-API callback on
 * cuLaunchKernel sees every launch with its function handle and the
 * correlation id CUPTI gives the launch's kernel record; a launch of a
 * registered handle is noted as (correlation id, marker). Kernel records
 * are matched to markers by that id at collection: never by name, so a
 * candidate's kernel that calls itself kr_spin_cycles is just a kernel. */
#include "driver/trace.h"
#include "driver/cupti_api.h"

#include <cupti_driver_cbid.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BUFFER_BYTES (1u << 20)
#define MAX_RECORDS (1u << 20) /* beyond this the oldest are dropped: never unbounded */

typedef struct {
    uint32_t correlation;
    uint8_t marker;
} mark;

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;     /* the record buffers */
static pthread_mutex_t g_measure = PTHREAD_MUTEX_INITIALIZER;  /* one measurement at a time */
static const kr__cupti_api *g_cupti;
static int g_state;            /* 0 not tried, 1 active, -1 failed */
static char g_why[512];
static kr__kernel_record *g_records;
static size_t g_count, g_cap;
static mark *g_marks;
static size_t g_num_marks, g_cap_marks;
#define MAX_MARKER_FNS 64
static struct {
    CUfunction fn;
    uint8_t marker;
} g_marker_fns[MAX_MARKER_FNS]; /* the engine's spin and probe kernels, per context */
static CUpti_SubscriberHandle g_subscriber;

static void CUPTIAPI buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records)
{
    *buffer = aligned_alloc(8, BUFFER_BYTES);
    *size = *buffer ? BUFFER_BYTES : 0;
    *max_records = 0;
}

static int grow(void **items, size_t *cap, size_t count, size_t size)
{
    if (count < *cap)
        return 0;
    size_t ncap = *cap ? *cap * 2 : 4096;
    void *grown = realloc(*items, ncap * size);
    if (!grown)
        return -1;
    *items = grown;
    *cap = ncap;
    return 0;
}

static void append_kernel(const CUpti_ActivityKernel10 *k)
{
    if (g_count == MAX_RECORDS)
        g_count = 0; /* nobody collected for a long time: start over */
    if (grow((void **)&g_records, &g_cap, g_count, sizeof *g_records) != 0)
        return;
    kr__kernel_record *r = &g_records[g_count++];
    r->start = k->start;
    r->end = k->end;
    r->stream = k->streamId;
    r->correlation = k->correlationId;
    /* CUPTI 12 writes CUpti_ActivityKernel9 records, which end where
     * Kernel10 adds isDeviceLaunched (the fields above share offsets): read
     * it only from CUPTI 13, else it is the next record's bytes */
    r->device_launched = g_cupti->version >= 130000 ? k->isDeviceLaunched : 0;
    r->marker = 0; /* set at collection, from the marks */
}

static void append_mark(uint32_t correlation, uint8_t marker)
{
    if (g_num_marks == MAX_RECORDS)
        g_num_marks = 0;
    if (grow((void **)&g_marks, &g_cap_marks, g_num_marks, sizeof *g_marks) != 0)
        return;
    g_marks[g_num_marks].correlation = correlation;
    g_marks[g_num_marks].marker = marker;
    g_num_marks++;
}

/* Every cuLaunchKernel, on the launching thread: a launch of a registered
 * marker function is noted with its correlation id. */
static void CUPTIAPI on_launch(void *user, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                               const void *data)
{
    (void)user;
    const CUpti_CallbackData *cb = data;
    if (domain != CUPTI_CB_DOMAIN_DRIVER_API || cbid != CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel ||
        cb->callbackSite != CUPTI_API_ENTER)
        return;
    CUfunction f = ((const cuLaunchKernel_params *)cb->functionParams)->f;
    pthread_mutex_lock(&g_lock);
    for (size_t i = 0; i < MAX_MARKER_FNS; i++)
        if (g_marker_fns[i].fn && g_marker_fns[i].fn == f) {
            append_mark(cb->correlationId, g_marker_fns[i].marker);
            break;
        }
    pthread_mutex_unlock(&g_lock);
}

static void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream, uint8_t *buffer, size_t size,
                                      size_t valid)
{
    (void)ctx;
    (void)stream;
    (void)size;
    CUpti_Activity *record = NULL;
    pthread_mutex_lock(&g_lock);
    while (g_cupti && g_cupti->cuptiActivityGetNextRecord(buffer, valid, &record) == CUPTI_SUCCESS) {
        if (record->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL)
            append_kernel((const CUpti_ActivityKernel10 *)record);
    }
    pthread_mutex_unlock(&g_lock);
    free(buffer);
}

/* Kernel records, and a callback on cuLaunchKernel (only) for the markers. */
static CUptiResult enable(const kr__cupti_api *cp)
{
    CUptiResult r = cp->cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed);
    if (r == CUPTI_SUCCESS)
        r = cp->cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
    if (r == CUPTI_SUCCESS)
        r = cp->cuptiSubscribe(&g_subscriber, on_launch, NULL);
    if (r == CUPTI_SUCCESS)
        r = cp->cuptiEnableCallback(1, g_subscriber, CUPTI_CB_DOMAIN_DRIVER_API,
                                    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel);
    return r;
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
        } else if ((r = enable(cp)) != CUPTI_SUCCESS) {
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

void kr__trace_register_marker(CUfunction fn, uint8_t marker)
{
    pthread_mutex_lock(&g_lock);
    for (size_t i = 0; i < MAX_MARKER_FNS; i++)
        if (!g_marker_fns[i].fn) {
            g_marker_fns[i].fn = fn;
            g_marker_fns[i].marker = marker;
            break;
        }
    pthread_mutex_unlock(&g_lock);
}

void kr__trace_unregister_marker(CUfunction fn)
{
    pthread_mutex_lock(&g_lock);
    for (size_t i = 0; i < MAX_MARKER_FNS; i++)
        if (g_marker_fns[i].fn == fn)
            g_marker_fns[i].fn = NULL;
    pthread_mutex_unlock(&g_lock);
}

static int by_start(const void *a, const void *b)
{
    uint64_t x = ((const kr__kernel_record *)a)->start, y = ((const kr__kernel_record *)b)->start;
    return (x > y) - (x < y);
}

static int by_correlation(const void *a, const void *b)
{
    uint32_t x = ((const mark *)a)->correlation, y = ((const mark *)b)->correlation;
    return (x > y) - (x < y);
}

/* Kernels launched by the host inside a marker region carry its marker. */
static void apply_marks(kr__kernel_record *r, size_t n, mark *marks, size_t num_marks)
{
    qsort(marks, num_marks, sizeof *marks, by_correlation);
    for (size_t i = 0; i < n; i++) {
        if (r[i].device_launched)
            continue;
        mark key = {r[i].correlation, 0};
        const mark *m = bsearch(&key, marks, num_marks, sizeof *marks, by_correlation);
        r[i].marker = m ? m->marker : 0;
    }
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
    mark *marks = g_marks;
    size_t num_marks = g_num_marks;
    g_records = NULL;
    g_count = g_cap = 0;
    g_marks = NULL;
    g_num_marks = g_cap_marks = 0;
    pthread_mutex_unlock(&g_lock);
    apply_marks(*records, *count, marks, num_marks);
    free(marks);
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
