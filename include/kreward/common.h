/* libkreward: status codes, export macro, versions and memory ownership.
 *
 * Every public call returns an int status: 0 (KR_OK) on success, a negative
 * KR_E* code on failure. The numeric values are part of the ABI and never
 * change or get reused; new codes are only appended. */
#ifndef KREWARD_COMMON_H
#define KREWARD_COMMON_H

#include <stddef.h>
#include <stdint.h>

#if defined(KREWARD_BUILDING) && defined(__GNUC__)
#define KR_API __attribute__((visibility("default")))
#else
#define KR_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* Pinned forever: append only. */
enum kr_status {
    KR_OK = 0,
    KR_EINVAL = -1,        /* an argument or option is invalid */
    KR_ENOMEM = -2,        /* out of host memory */
    KR_EUNAVAILABLE = -3,  /* a run-time library (libcuda, NVRTC, CUPTI) is missing */
    KR_ENODEVICE = -4,     /* the call needs a GPU and the context has none */
    KR_ECOMPILE = -5,      /* the source did not compile; the log is the detail */
    KR_ETIMEOUT = -6,      /* a time limit was reached */
    KR_EPARSE = -7,        /* malformed input text (JSON, plan, expression) */
    KR_ECUDA = -8,         /* a CUDA driver call failed */
    KR_EIO = -9,           /* file system error */
    KR_EVERSION = -10,     /* a struct or plugin is newer than this library */
    KR_ETOOBIG = -11,      /* input over a configured size limit */
    KR_EPLAN = -12,        /* a launch plan does not fit the kernel or the device */
    KR_EPLUGIN = -13,      /* a reward term or plugin reported an error */
    KR_EPOISONED = -14,    /* an earlier kernel fault made the context unusable */
    KR_ENOTFOUND = -15,    /* a named thing (kernel, tensor, term, file) does not exist */
    KR_ERANGE = -16,       /* a value is out of range (overflow, negative size) */
    KR_EUNSUPPORTED = -17, /* valid request this build or machine cannot do */
    KR_ESTATE = -18,       /* the call is not valid in the object's current state */
    KR_EFAULT = -19,       /* a kernel faulted (illegal address, trap) */
    KR_ECANCELED = -20,    /* cancelled by the caller */
    KR_EUNSOUND = -21,     /* a problem can be passed without computing it */
};

/* Text for a status code; never NULL, also for unknown codes. */
KR_API const char *kr_strerror(int code);
/* Symbolic name of a status code, e.g. "KR_EPARSE". */
KR_API const char *kr_status_name(int code);

/* "MAJOR.MINOR.PATCH" of the library that is loaded. */
KR_API const char *kr_version(void);
/* MAJOR*10000 + MINOR*100 + PATCH. */
KR_API uint32_t kr_version_number(void);

/* Version of the ABI (bumped only with the soname). A binding compares it with
 * KR_ABI_VERSION it was written for. */
#define KR_ABI_VERSION 0u
KR_API uint32_t kr_abi_version(void);

/* Frees memory the library handed to the caller (strings, JSON texts).
 * kr_free(NULL) does nothing. */
KR_API void kr_free(void *ptr);

#ifdef __cplusplus
}
#endif
#endif
