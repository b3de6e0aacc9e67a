/* The CUDA driver API, loaded at run time.
 *
 * libkreward never links libcuda: it dlopens libcuda.so.1 and resolves each
 * entry point through cuGetProcAddress with the explicit CUDA version whose
 * signature we were written against (the suffix of the PFN type), as
 * cuda-python does. So the library loads on machines without a driver, and a
 * newer driver cannot silently hand us a function with another ABI. */
#ifndef KR_CUDA_API_H
#define KR_CUDA_API_H

#include <cudaTypedefs.h>

/* X(name, version): one driver entry point, requested at that version. */
#define KR_CUDA_FUNCTIONS(X)                          \
    X(cuInit, 2000)                                   \
    X(cuDriverGetVersion, 2020)                       \
    X(cuGetErrorName, 6000)                           \
    X(cuGetErrorString, 6000)                         \
    X(cuDeviceGetCount, 2000)                         \
    X(cuDeviceGet, 2000)                              \
    X(cuDeviceGetName, 2000)                          \
    X(cuDeviceGetAttribute, 2000)                     \
    X(cuDeviceTotalMem, 3020)                         \
    X(cuDevicePrimaryCtxRetain, 7000)                 \
    X(cuDevicePrimaryCtxRelease, 11000)               \
    X(cuCtxSetCurrent, 4000)                          \
    X(cuCtxSynchronize, 2000)                         \
    X(cuCtxSetLimit, 3010)                            \
    X(cuCtxGetLimit, 3010)                            \
    X(cuCtxResetPersistingL2Cache, 11000)             \
    X(cuModuleLoadDataEx, 2010)                       \
    X(cuModuleUnload, 2000)                           \
    X(cuModuleGetFunction, 2000)                      \
    X(cuModuleGetGlobal, 3020)                        \
    X(cuFuncGetAttribute, 2020)                       \
    X(cuFuncSetAttribute, 9000)                       \
    X(cuFuncGetParamInfo, 12040)                      \
    X(cuOccupancyMaxActiveBlocksPerMultiprocessor, 6050) \
    X(cuMemAlloc, 3020)                               \
    X(cuMemFree, 3020)                                \
    X(cuMemGetInfo, 3020)                             \
    X(cuMemGetAddressRange, 3020)                     \
    X(cuMemcpyHtoD, 3020)                             \
    X(cuMemcpyDtoH, 3020)                             \
    X(cuMemcpyDtoD, 3020)                             \
    X(cuMemcpyHtoDAsync, 3020)                        \
    X(cuMemcpyDtoHAsync, 3020)                        \
    X(cuMemcpyDtoDAsync, 3020)                        \
    X(cuMemsetD8, 3020)                               \
    X(cuMemsetD32, 3020)                              \
    X(cuMemsetD8Async, 3020)                          \
    X(cuMemsetD16Async, 3020)                         \
    X(cuMemsetD32Async, 3020)                         \
    X(cuMemHostAlloc, 2020)                           \
    X(cuMemFreeHost, 2000)                            \
    X(cuMemHostGetDevicePointer, 3020)                \
    X(cuLaunchKernel, 4000)                           \
    X(cuStreamCreate, 2000)                           \
    X(cuStreamDestroy, 4000)                          \
    X(cuStreamSynchronize, 2000)                      \
    X(cuStreamQuery, 2000)                            \
    X(cuEventCreate, 2000)                            \
    X(cuEventDestroy, 4000)                           \
    X(cuEventRecord, 2000)                            \
    X(cuEventSynchronize, 2000)                       \
    X(cuEventQuery, 2000)                             \
    X(cuEventElapsedTime, 12080)                      \
    X(cuStreamBeginCapture, 10010)                    \
    X(cuStreamEndCapture, 10000)                      \
    X(cuGraphInstantiateWithFlags, 11040)             \
    X(cuGraphLaunch, 10000)                           \
    X(cuGraphExecDestroy, 10000)                      \
    X(cuGraphDestroy, 10000)

#define KR__CUDA_FIELD(name, ver) PFN_##name##_v##ver name;

typedef struct kr__cuda_api {
    int loaded;           /* 1 when every entry point resolved and cuInit succeeded */
    int driver_version;   /* e.g. 13000 */
    int init_result;      /* CUresult of cuInit, for the reason text */
    char why[256];        /* why it is not loaded */
    KR_CUDA_FUNCTIONS(KR__CUDA_FIELD)
} kr__cuda_api;

/* The process-wide driver table, loaded once (thread-safe). Never NULL;
 * check ->loaded. */
const kr__cuda_api *kr__cuda(void);

/* The CUDA version the installed driver supports (e.g. 12080), 0 when there
 * is no driver. Does not initialise CUDA (no cuInit): the NVRTC and CUPTI
 * loaders ask it to pick a version the driver can run, also in processes
 * that never open a device. */
int kr__cuda_driver_version(void);

/* "CUDA_ERROR_ILLEGAL_ADDRESS (an illegal memory access was encountered)" */
void kr__cuda_describe(CUresult r, char *buf, size_t size);

/* Errors after which the CUDA context (and the process) is unusable. */
int kr__cuda_is_sticky(CUresult r);

#endif
