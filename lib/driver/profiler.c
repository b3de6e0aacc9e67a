/* CUPTI's range profiler (cupti_range_profiler.h) and profiler host API
 * (cupti_profiler_host.h), resolved from the CUPTI library tracing loaded.
 *
 * cupti_profiler_host.h includes the C++ header <string>, so this C file
 * cannot include it: its parameter structs are mirrored below, field for
 * field (CUPTI reads only the prefix that structSize announces, the same
 * contract that lets those structs grow). */
#include "driver/profiler.h"

#include "common/dynlib.h"
#include "driver/cupti_api.h"

#include <cupti_profiler_target.h>
#include <cupti_range_profiler.h>
#include <cupti_target.h>
#include <dlfcn.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KR__PSIZE(type, last) (offsetof(type, last) + sizeof(((type *)0)->last))

/* ---- cupti_profiler_host.h, mirrored (CUDA 12.6 to 13.x layouts) ---- */

typedef struct host_object host_object;
enum { HOST_RANGE_PROFILER = 0 }; /* CUPTI_PROFILER_TYPE_RANGE_PROFILER */

typedef struct {
    size_t structSize;
    void *pPriv;
    int profilerType;
    const char *pChipName;
    const uint8_t *pCounterAvailabilityImage;
    host_object *pHostObject;
} host_init_params;

typedef struct {
    size_t structSize;
    void *pPriv;
    host_object *pHostObject;
} host_deinit_params;

typedef struct {
    size_t structSize;
    void *pPriv;
    host_object *pHostObject;
    const char *pMetricName;
    const char *pDescription;
    const char *pHwUnit;
    const char *pDimUnit;
    int metricType;
} host_properties_params;

typedef struct {
    size_t structSize;
    void *pPriv;
    host_object *pHostObject;
    const char **ppMetricNames;
    size_t numMetrics;
} host_add_params;

typedef struct {
    size_t structSize;
    void *pPriv;
    host_object *pHostObject;
    size_t configImageSize;
} host_config_size_params;

typedef struct {
    size_t structSize;
    void *pPriv;
    host_object *pHostObject;
    size_t configImageSize;
    uint8_t *pConfigImage;
} host_config_params;

typedef struct {
    size_t structSize;
    void *pPriv;
    size_t configImageSize;
    uint8_t *pConfigImage;
    size_t numOfPasses;
} host_passes_params;

typedef struct {
    size_t structSize;
    void *pPriv;
    host_object *pHostObject;
    const uint8_t *pCounterDataImage;
    size_t counterDataImageSize;
    size_t rangeIndex;
    const char **ppMetricNames;
    size_t numMetrics;
    double *pMetricValues;
} host_evaluate_params;

/* ---- the entry points ---- */

#define KR__PROFILER_TARGET(X)                  \
    X(cuptiGetResultString)                     \
    X(cuptiProfilerInitialize)                  \
    X(cuptiProfilerDeInitialize)                \
    X(cuptiDeviceGetChipName)                   \
    X(cuptiProfilerGetCounterAvailability)      \
    X(cuptiRangeProfilerEnable)                 \
    X(cuptiRangeProfilerDisable)                \
    X(cuptiRangeProfilerGetCounterDataSize)     \
    X(cuptiRangeProfilerCounterDataImageInitialize) \
    X(cuptiRangeProfilerSetConfig)              \
    X(cuptiRangeProfilerStart)                  \
    X(cuptiRangeProfilerStop)                   \
    X(cuptiRangeProfilerDecodeData)             \
    X(cuptiRangeProfilerGetCounterDataInfo)

#define KR__PROFILER_HOST(X)                                             \
    X(cuptiProfilerHostInitialize, host_init_params)                     \
    X(cuptiProfilerHostDeinitialize, host_deinit_params)                 \
    X(cuptiProfilerHostGetMetricProperties, host_properties_params)      \
    X(cuptiProfilerHostConfigAddMetrics, host_add_params)                \
    X(cuptiProfilerHostGetConfigImageSize, host_config_size_params)      \
    X(cuptiProfilerHostGetConfigImage, host_config_params)               \
    X(cuptiProfilerHostGetNumOfPasses, host_passes_params)               \
    X(cuptiProfilerHostEvaluateToGpuValues, host_evaluate_params)

#define KR__TARGET_FIELD(name) __typeof__(&name) name;
#define KR__HOST_FIELD(name, params) CUptiResult(CUPTIAPI *name)(params *);

typedef struct profiler_api {
    int state; /* 0 not tried, 1 loaded, -1 failed */
    char why[600];
    KR__PROFILER_TARGET(KR__TARGET_FIELD)
    KR__PROFILER_HOST(KR__HOST_FIELD)
} profiler_api;

static profiler_api g_api;
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER; /* the table, and one session at a time */

static void load(const char *cuda_home)
{
    const kr__cupti_api *cp = kr__cupti(cuda_home);
    if (!cp->loaded) {
        snprintf(g_api.why, sizeof g_api.why, "CUPTI not available: %.500s", cp->why);
        g_api.state = -1;
        return;
    }
    /* the same file tracing opened: dlopen only takes another reference */
    void *lib = dlopen(cp->path, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        snprintf(g_api.why, sizeof g_api.why, "cannot reopen %.400s", cp->path);
        g_api.state = -1;
        return;
    }
#define KR__RESOLVE(name, ...)                                                              \
    if (kr__dynlib_sym(lib, #name, &g_api.name, sizeof g_api.name) != 0) {                  \
        snprintf(g_api.why, sizeof g_api.why, "%.400s has no %s: hardware counters need "    \
                 "CUPTI 12.6 or later (its range profiler)", cp->path, #name);              \
        g_api.state = -1;                                                                   \
        return;                                                                             \
    }
    KR__PROFILER_TARGET(KR__RESOLVE)
    KR__PROFILER_HOST(KR__RESOLVE)
#undef KR__RESOLVE
    g_api.state = 1;
}

/* One session's state, freed in one place. */
typedef struct session {
    const profiler_api *a;
    kr__profiler_out *out;
    char *why;
    size_t why_size;
    int initialized;
    host_object *host;
    CUpti_RangeProfiler_Object *obj;
    uint8_t *avail, *config, *data;
    size_t config_size, data_size;
    const char **kept;    /* the metrics the chip knows */
    size_t *kept_index;   /* their places in the caller's list */
    size_t num_kept;
    double *row;
} session;

/* 0 on success; else the reason (a refusal for privileges marked). */
static int check(session *s, CUptiResult r, const char *what)
{
    if (r == CUPTI_SUCCESS)
        return 0;
    const char *text = NULL;
    s->a->cuptiGetResultString(r, &text);
    if (r == CUPTI_ERROR_INSUFFICIENT_PRIVILEGES ||
        r == CUPTI_ERROR_VIRTUALIZED_DEVICE_INSUFFICIENT_PRIVILEGES) {
        s->out->no_permission = 1;
        snprintf(s->why, s->why_size, "%s: no permission to read GPU performance counters "
                 "(the driver restricts them to administrators: NVreg_RestrictProfilingToAdminUsers"
                 "=1); run as root or load the nvidia module with "
                 "NVreg_RestrictProfilingToAdminUsers=0", what);
    } else {
        snprintf(s->why, s->why_size, "%s failed: %s (%d)%s", what, text ? text : "?", (int)r,
                 r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED
                     ? "; another profiler in this process?" : "");
    }
    return -1;
}

static void host_release(session *s)
{
    host_deinit_params p = {KR__PSIZE(host_deinit_params, pHostObject), NULL, s->host};
    s->a->cuptiProfilerHostDeinitialize(&p);
    s->host = NULL;
    s->num_kept = 0;
}

/* A host object for the chip with the metrics it knows added (those with
 * "_sass_" in their names left out when asked). */
static int host_metrics(session *s, const char *chip, const char *const *metrics,
                        size_t num_metrics, int no_sass)
{
    const profiler_api *a = s->a;
    host_init_params hi = {KR__PSIZE(host_init_params, pHostObject), NULL, HOST_RANGE_PROFILER,
                           chip, s->avail, NULL};
    if (check(s, a->cuptiProfilerHostInitialize(&hi), "cuptiProfilerHostInitialize"))
        return -1;
    s->host = hi.pHostObject;
    /* a metric this chip does not have would fail the whole config: ask
     * about each first, collect those it knows */
    for (size_t m = 0; m < num_metrics; m++) {
        if (no_sass && strstr(metrics[m], "_sass_"))
            continue;
        host_properties_params mp = {KR__PSIZE(host_properties_params, metricType), NULL, s->host,
                                     metrics[m], NULL, NULL, NULL, 0};
        if (a->cuptiProfilerHostGetMetricProperties(&mp) == CUPTI_SUCCESS) {
            s->kept[s->num_kept] = metrics[m];
            s->kept_index[s->num_kept++] = m;
        }
    }
    s->out->num_collected = s->num_kept;
    if (!s->num_kept)
        return snprintf(s->why, s->why_size, "chip %s has none of the counters asked for",
                        chip ? chip : "?"), -1;
    host_add_params am = {KR__PSIZE(host_add_params, numMetrics), NULL, s->host, s->kept, s->num_kept};
    return check(s, a->cuptiProfilerHostConfigAddMetrics(&am), "cuptiProfilerHostConfigAddMetrics");
}

/* Host side: the chip, the metrics it knows, the config image. */
static int configure(session *s, CUcontext cu, int device_index, const char *const *metrics,
                     size_t num_metrics)
{
    const profiler_api *a = s->a;
    CUpti_Profiler_Initialize_Params ip = {CUpti_Profiler_Initialize_Params_STRUCT_SIZE, NULL};
    if (check(s, a->cuptiProfilerInitialize(&ip), "cuptiProfilerInitialize"))
        return -1;
    s->initialized = 1;
    CUpti_Device_GetChipName_Params cn = {CUpti_Device_GetChipName_Params_STRUCT_SIZE, NULL,
                                          (size_t)device_index, NULL};
    if (check(s, a->cuptiDeviceGetChipName(&cn), "cuptiDeviceGetChipName"))
        return -1;
    CUpti_Profiler_GetCounterAvailability_Params ca = {
        CUpti_Profiler_GetCounterAvailability_Params_STRUCT_SIZE, NULL, cu, 0, NULL};
    if (check(s, a->cuptiProfilerGetCounterAvailability(&ca), "cuptiProfilerGetCounterAvailability"))
        return -1;
    if (!(s->avail = calloc(1, ca.counterAvailabilityImageSize + 1)))
        return snprintf(s->why, s->why_size, "out of memory"), -1;
    ca.pCounterAvailabilityImage = s->avail;
    if (check(s, a->cuptiProfilerGetCounterAvailability(&ca), "cuptiProfilerGetCounterAvailability"))
        return -1;
    int rc = host_metrics(s, cn.pChipName, metrics, num_metrics, 0);
    /* SASS-patched metrics (branch targets) are the first a chip or a
     * driver refuses to schedule: without them rather than without all */
    if (rc != 0 && s->host && !s->out->no_permission) {
        host_release(s);
        rc = host_metrics(s, cn.pChipName, metrics, num_metrics, 1);
    }
    if (rc != 0)
        return -1;
    host_config_size_params cs = {KR__PSIZE(host_config_size_params, configImageSize), NULL, s->host, 0};
    if (check(s, a->cuptiProfilerHostGetConfigImageSize(&cs), "cuptiProfilerHostGetConfigImageSize"))
        return -1;
    s->config_size = cs.configImageSize;
    if (!(s->config = calloc(1, s->config_size + 1)))
        return snprintf(s->why, s->why_size, "out of memory"), -1;
    host_config_params ci = {KR__PSIZE(host_config_params, pConfigImage), NULL, s->host,
                             s->config_size, s->config};
    if (check(s, a->cuptiProfilerHostGetConfigImage(&ci), "cuptiProfilerHostGetConfigImage"))
        return -1;
    host_passes_params np = {KR__PSIZE(host_passes_params, numOfPasses), NULL, s->config_size,
                             s->config, 0};
    if (check(s, a->cuptiProfilerHostGetNumOfPasses(&np), "cuptiProfilerHostGetNumOfPasses"))
        return -1;
    s->out->passes = np.numOfPasses;
    return 0;
}

/* Target side: enable on the context, the counter data image, auto ranges
 * with kernel replay. */
static int prepare(session *s, CUcontext cu, size_t max_ranges)
{
    const profiler_api *a = s->a;
    CUpti_RangeProfiler_Enable_Params en = {CUpti_RangeProfiler_Enable_Params_STRUCT_SIZE, NULL,
                                            cu, NULL};
    if (check(s, a->cuptiRangeProfilerEnable(&en), "cuptiRangeProfilerEnable"))
        return -1;
    s->obj = en.pRangeProfilerObject;
    CUpti_RangeProfiler_GetCounterDataSize_Params ds;
    memset(&ds, 0, sizeof ds);
    ds.structSize = CUpti_RangeProfiler_GetCounterDataSize_Params_STRUCT_SIZE;
    ds.pRangeProfilerObject = s->obj;
    ds.pMetricNames = s->kept;
    ds.numMetrics = s->num_kept;
    ds.maxNumOfRanges = max_ranges;
    ds.maxNumRangeTreeNodes = (uint32_t)max_ranges;
    if (check(s, a->cuptiRangeProfilerGetCounterDataSize(&ds), "cuptiRangeProfilerGetCounterDataSize"))
        return -1;
    s->data_size = ds.counterDataSize;
    if (!(s->data = calloc(1, s->data_size + 1)))
        return snprintf(s->why, s->why_size, "out of memory"), -1;
    CUpti_RangeProfiler_CounterDataImage_Initialize_Params di = {
        CUpti_RangeProfiler_CounterDataImage_Initialize_Params_STRUCT_SIZE, NULL, s->obj,
        s->data_size, s->data};
    if (check(s, a->cuptiRangeProfilerCounterDataImageInitialize(&di),
              "cuptiRangeProfilerCounterDataImageInitialize"))
        return -1;
    CUpti_RangeProfiler_SetConfig_Params sc;
    memset(&sc, 0, sizeof sc);
    sc.structSize = CUpti_RangeProfiler_SetConfig_Params_STRUCT_SIZE;
    sc.pRangeProfilerObject = s->obj;
    sc.configSize = s->config_size;
    sc.pConfig = s->config;
    sc.counterDataImageSize = s->data_size;
    sc.pCounterDataImage = s->data;
    sc.range = CUPTI_AutoRange;
    sc.replayMode = CUPTI_KernelReplay;
    sc.maxRangesPerPass = max_ranges;
    sc.numNestingLevels = 1;
    sc.minNestingLevel = 1;
    sc.passIndex = 0;
    sc.targetNestingLevel = 1;
    return check(s, a->cuptiRangeProfilerSetConfig(&sc), "cuptiRangeProfilerSetConfig");
}

static int collect(session *s, kr__profiler_work work, void *user, size_t max_ranges,
                   size_t num_metrics, double *values)
{
    const profiler_api *a = s->a;
    CUpti_RangeProfiler_Start_Params st = {CUpti_RangeProfiler_Start_Params_STRUCT_SIZE, NULL, s->obj};
    if (check(s, a->cuptiRangeProfilerStart(&st), "cuptiRangeProfilerStart"))
        return -1;
    s->out->work_rc = work(user);
    CUpti_RangeProfiler_Stop_Params sp;
    memset(&sp, 0, sizeof sp);
    sp.structSize = CUpti_RangeProfiler_Stop_Params_STRUCT_SIZE;
    sp.pRangeProfilerObject = s->obj;
    int stopped = check(s, a->cuptiRangeProfilerStop(&sp), "cuptiRangeProfilerStop");
    if (s->out->work_rc != 0)
        return snprintf(s->why, s->why_size, "the profiled run failed"), -1;
    if (stopped != 0)
        return -1;
    CUpti_RangeProfiler_DecodeData_Params dd = {CUpti_RangeProfiler_DecodeData_Params_STRUCT_SIZE,
                                                NULL, s->obj, 0};
    if (check(s, a->cuptiRangeProfilerDecodeData(&dd), "cuptiRangeProfilerDecodeData"))
        return -1;
    CUpti_RangeProfiler_GetCounterDataInfo_Params ci = {
        CUpti_RangeProfiler_GetCounterDataInfo_Params_STRUCT_SIZE, NULL, s->data, s->data_size, 0};
    if (check(s, a->cuptiRangeProfilerGetCounterDataInfo(&ci), "cuptiRangeProfilerGetCounterDataInfo"))
        return -1;
    s->out->num_ranges = ci.numTotalRanges < max_ranges ? ci.numTotalRanges : max_ranges;
    for (size_t i = 0; i < max_ranges * num_metrics; i++)
        values[i] = NAN;
    for (size_t r = 0; r < s->out->num_ranges; r++) {
        host_evaluate_params ev = {KR__PSIZE(host_evaluate_params, pMetricValues), NULL, s->host,
                                   s->data, s->data_size, r, s->kept, s->num_kept, s->row};
        if (check(s, a->cuptiProfilerHostEvaluateToGpuValues(&ev),
                  "cuptiProfilerHostEvaluateToGpuValues"))
            return -1;
        for (size_t k = 0; k < s->num_kept; k++)
            values[r * num_metrics + s->kept_index[k]] = s->row[k];
    }
    return 0;
}

static void finish(session *s)
{
    const profiler_api *a = s->a;
    if (s->obj) {
        CUpti_RangeProfiler_Disable_Params p = {CUpti_RangeProfiler_Disable_Params_STRUCT_SIZE,
                                                NULL, s->obj};
        a->cuptiRangeProfilerDisable(&p);
    }
    if (s->host)
        host_release(s);
    if (s->initialized) {
        CUpti_Profiler_DeInitialize_Params p = {CUpti_Profiler_DeInitialize_Params_STRUCT_SIZE, NULL};
        a->cuptiProfilerDeInitialize(&p);
    }
    free(s->avail);
    free(s->config);
    free(s->data);
    free(s->kept);
    free(s->kept_index);
    free(s->row);
}

int kr__profiler_run(const char *cuda_home, CUcontext cu, int device_index,
                     const char *const *metrics, size_t num_metrics, size_t max_ranges,
                     kr__profiler_work work, void *user, double *values, kr__profiler_out *out,
                     char *why, size_t why_size)
{
    memset(out, 0, sizeof *out);
    if (!num_metrics || !max_ranges)
        return snprintf(why, why_size, "no metrics or no kernels to profile"), -1;
    const char *env = getenv("KREWARD_COUNTERS");
    if (env && strcmp(env, "0") == 0)
        return snprintf(why, why_size, "disabled by KREWARD_COUNTERS=0"), -1;
    pthread_mutex_lock(&g_lock);
    if (g_api.state == 0)
        load(cuda_home);
    if (g_api.state < 0) {
        snprintf(why, why_size, "%s", g_api.why);
        g_api.state = 0; /* a CUPTI found later (another cuda_home) may have it */
        pthread_mutex_unlock(&g_lock);
        return -1;
    }
    session s;
    memset(&s, 0, sizeof s);
    s.a = &g_api;
    s.out = out;
    s.why = why;
    s.why_size = why_size;
    s.kept = calloc(num_metrics, sizeof *s.kept);
    s.kept_index = calloc(num_metrics, sizeof *s.kept_index);
    s.row = calloc(num_metrics, sizeof *s.row);
    int rc = -1;
    if (!s.kept || !s.kept_index || !s.row)
        snprintf(why, why_size, "out of memory");
    else if (configure(&s, cu, device_index, metrics, num_metrics) == 0 &&
             prepare(&s, cu, max_ranges) == 0)
        rc = collect(&s, work, user, max_ranges, num_metrics, values);
    finish(&s);
    pthread_mutex_unlock(&g_lock);
    return rc;
}
