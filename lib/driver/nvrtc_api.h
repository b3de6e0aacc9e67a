/* NVRTC, loaded lazily at run time (libnvrtc.so.13 or .so.12: lib/common/dynlib.h). */
#ifndef KR_NVRTC_API_H
#define KR_NVRTC_API_H

#include <nvrtc.h>

#define KR_NVRTC_FUNCTIONS(X)  \
    X(nvrtcGetErrorString)     \
    X(nvrtcVersion)            \
    X(nvrtcGetNumSupportedArchs) \
    X(nvrtcGetSupportedArchs)  \
    X(nvrtcCreateProgram)      \
    X(nvrtcDestroyProgram)     \
    X(nvrtcCompileProgram)     \
    X(nvrtcGetPTXSize)         \
    X(nvrtcGetPTX)             \
    X(nvrtcGetCUBINSize)       \
    X(nvrtcGetCUBIN)           \
    X(nvrtcGetProgramLogSize)  \
    X(nvrtcGetProgramLog)      \
    X(nvrtcAddNameExpression)  \
    X(nvrtcGetLoweredName)

#define KR__NVRTC_FIELD(name) __typeof__(&name) name;

typedef struct kr__nvrtc_api {
    int loaded;
    int major, minor;
    char path[512];
    char source[64];        /* where path was found: "toolkit", "wheel", ... */
    char note[256];         /* a caveat about the copy loaded, or "" */
    char why[2048];
    int num_archs;
    int archs[64];          /* e.g. 75, 80, ..., 90, 100, 120 */
    KR_NVRTC_FUNCTIONS(KR__NVRTC_FIELD)
    /* optional (NVRTC 12.8+): cooperative cancellation */
    nvrtcResult (*nvrtcSetFlowCallback)(nvrtcProgram, int (*)(void *, void *), void *);
} kr__nvrtc_api;

/* Loads NVRTC once per process (thread-safe): $KREWARD_NVRTC_LIBRARY, else
 * the newest of CUDA 13 and 12 the driver runs, from the loader path,
 * cuda_home, or NVIDIA's wheels (kr__dynlib_find). A failed load is retried
 * on the next call. */
const kr__nvrtc_api *kr__nvrtc(const char *cuda_home);

#endif
