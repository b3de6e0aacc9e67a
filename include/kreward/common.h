/* libkreward: status codes, export macro, versions, element types, memory
 * ownership, and the conventions every other header follows.
 *
 * Conventions (docs/api.md says more):
 * - Every call that can fail returns an int status: 0 (KR_OK) or a negative
 *   KR_E* code. The numeric values are ABI: never changed, never reused.
 * - A pointer the library writes a result through comes first: the new
 *   handle (kr_x **out), the JSON text (char **json_out), the number. An
 *   engine verb (verify, benchmark, evaluate) writes into the report it is
 *   given, which comes first too. The handle acted on follows; inputs last.
 *   On failure *out is NULL, never a half-built object.
 * - kr_<object>_free(NULL) does nothing. Strings the library allocates for
 *   the caller are freed with kr_free; `const char *` results belong to the
 *   handle they came from and live as long as it does.
 * - Versioned structs begin with `uint32_t version`. Fields are only ever
 *   appended, with a version bump; the library accepts any version up to its
 *   own and reads only the prefix the caller's version had, so a program
 *   built against an older header keeps working. A newer version than the
 *   library knows is refused with KR_EVERSION.
 * - Enumerations are passed as `int` to and from functions, and stored as
 *   `uint32_t` in versioned structs (a fixed size whatever the compiler). */
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
/* Symbolic name of a status code, e.g. "KR_EPARSE"; "KR_UNKNOWN" for others. */
KR_API const char *kr_status_name(int code);

/* "MAJOR.MINOR.PATCH" of the library that is loaded. */
KR_API const char *kr_version(void);
/* MAJOR*10000 + MINOR*100 + PATCH. */
KR_API uint32_t kr_version_number(void);

/* Version of the ABI (bumped only with the soname). A binding compares it with
 * KR_ABI_VERSION it was written for. */
#define KR_ABI_VERSION 1u
KR_API uint32_t kr_abi_version(void);

/* Frees memory the library handed to the caller (strings, JSON texts).
 * kr_free(NULL) does nothing. */
KR_API void kr_free(void *ptr);

/* Element types of tensors. Pinned: these numbers appear in reports and in
 * the input generator. */
enum kr_dtype {
    KR_DTYPE_F32 = 1,
    KR_DTYPE_F16 = 2,
    KR_DTYPE_BF16 = 3,
    KR_DTYPE_F64 = 4,
    KR_DTYPE_I8 = 5,
    KR_DTYPE_U8 = 6,
    KR_DTYPE_I32 = 7,
    KR_DTYPE_I64 = 8,
    KR_DTYPE_BOOL = 9,
    KR_DTYPE_FP8_E4M3 = 10,
    KR_DTYPE_FP8_E5M2 = 11,
};

/* Name ("f32", ...) and element size in bytes of a dtype; NULL / 0 if unknown. */
KR_API const char *kr_dtype_name(int dtype);
KR_API size_t kr_dtype_size(int dtype);

#ifdef __cplusplus
}
#endif
#endif
