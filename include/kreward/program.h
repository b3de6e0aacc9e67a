/* libkreward: compiling candidates into programs.
 *
 * A program is an immutable compiled module: a CUBIN (or PTX) image, the
 * compile log (kept on success too), the kernels it defines and, where a
 * device exists, what each kernel uses. Programs come from CUDA C++ source
 * through NVRTC (kr_compile) or from a binary another compiler produced, e.g.
 * a Triton cubin (kr_program_from_binary). Compiles are cached by an XXH3-128
 * key over source, options, target, NVRTC version, library version, the real
 * paths of the include directories and a digest of the built-in header shims
 * (docs/compile-safety.md).
 *
 * A program belongs to the context it was made with (its module is loaded
 * there): free it before the context, and pass it only to calls on that
 * context. It is immutable once made and may be read from any thread. */
#ifndef KREWARD_PROGRAM_H
#define KREWARD_PROGRAM_H

#include "context.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kr_program kr_program;

#define KR_COMPILE_OPTIONS_VERSION 2u
typedef struct kr_compile_options {
    uint32_t version;                    /* KR_COMPILE_OPTIONS_VERSION */
    const char *name;                    /* file name shown in the log; NULL: "candidate.cu" */
    const char *arch;                    /* e.g. "sm_90a"; NULL: the context's */
    const char *std;                     /* e.g. "c++17"; NULL: "c++17" */
    const char *const *defines;          /* "NAME=VALUE" or "NAME", passed as -D */
    size_t num_defines;
    const char *const *include_dirs;     /* headers read by the library and handed to NVRTC in
                                          * memory (no -I); "/", /proc, /sys, /dev refused */
    size_t num_include_dirs;
    const char *const *name_expressions; /* e.g. "my_kernel<128>", for templates */
    size_t num_name_expressions;
    const char *const *extra_options;    /* passed to NVRTC verbatim; -I, --include-path,
                                          * -include, --pre-include, -isystem refused */
    size_t num_extra_options;
    int32_t fast_math;                   /* --use_fast_math */
    int32_t line_info;                   /* -lineinfo */
    uint64_t max_source_bytes;           /* 0: 1 MiB */
    double time_limit_s;                 /* 0: 30 s; < 0: none; cancels through NVRTC's
                                          * flow callback */
    uint32_t flags;                      /* KR_COMPILE_* */
    /* version 2 */
    uint64_t max_log_bytes;              /* compile log kept per program; 0: 64 KiB (the rest is cut) */
} kr_compile_options;

/* Skip the compile cache (neither read nor written). */
#define KR_COMPILE_NO_CACHE 0x1u

#define KR_COMPILE_OPTIONS_INIT \
    { KR_COMPILE_OPTIONS_VERSION, NULL, NULL, NULL, NULL, 0, NULL, 0, NULL, 0, NULL, 0, 0, 0, 0, 0.0, 0u, 0 }

/* Fills the fields that existed in `version` with their defaults. */
KR_API int kr_compile_options_init(kr_compile_options *opts, uint32_t version);

/* Compiles CUDA C++ source (len bytes; len 0 means NUL-terminated) into a
 * program. On failure *out is NULL, the context's errmsg says what failed and
 * its errdetail holds the NVRTC log. Empty source is KR_ECOMPILE. */
KR_API int kr_compile(kr_program **out, kr_context *ctx, const char *source, size_t len,
                      const kr_compile_options *opts);

/* Wraps a CUBIN (ELF) or PTX text produced elsewhere (e.g. by Triton).
 * name is for messages and may be NULL. PTX is kept as is and JIT-compiled
 * by the driver when loaded. */
KR_API int kr_program_from_binary(kr_program **out, kr_context *ctx, const void *data, size_t len,
                                  const char *name);

KR_API void kr_program_free(kr_program *prog);

enum kr_binary_kind { KR_BINARY_CUBIN = 1, KR_BINARY_PTX = 2 };
/* The image (CUBIN or PTX), its length and kind (any out may be NULL). */
KR_API int kr_program_binary(const void **data, size_t *len, int *kind, const kr_program *prog);
KR_API const char *kr_program_log(const kr_program *prog);
KR_API const char *kr_program_arch(const kr_program *prog);
/* Seconds NVRTC took for the compile that produced the image (the original
 * compile for a cache hit); 0 for binaries. */
KR_API double kr_program_compile_seconds(const kr_program *prog);

enum kr_cache_result { KR_CACHE_MISS = 0, KR_CACHE_MEMORY = 1, KR_CACHE_DISK = 2, KR_CACHE_SKIPPED = 3 };
KR_API int kr_program_cache_result(const kr_program *prog);
/* 32 lowercase hex digits: the XXH3-128 cache key (or content hash for binaries). */
KR_API const char *kr_program_hash(const kr_program *prog);

KR_API size_t kr_program_kernel_count(const kr_program *prog);
/* Symbol name of kernel i (mangled for C++ kernels), NULL when out of range. */
KR_API const char *kr_program_kernel_name(const kr_program *prog, size_t i);
/* Index of a kernel by symbol name or by a name expression given at compile
 * time; -1 (as size_t: SIZE_MAX) when absent. */
KR_API size_t kr_program_find_kernel(const kr_program *prog, const char *name);
/* Mangled name for a name expression given at compile time, or NULL. */
KR_API const char *kr_program_lowered_name(const kr_program *prog, const char *name_expression);

enum kr_kernel_attr {
    KR_KERNEL_REGISTERS = 1,         /* per thread */
    KR_KERNEL_SHARED_STATIC = 2,     /* bytes */
    KR_KERNEL_LOCAL_BYTES = 3,       /* per thread; > 0 means spills or stack arrays */
    KR_KERNEL_MAX_THREADS = 4,       /* most threads per block this kernel can launch with */
    KR_KERNEL_CONST_BYTES = 5,
    KR_KERNEL_NUM_PARAMS = 6,
    KR_KERNEL_PARAM_BYTES = 7,       /* total size of the parameter block */
};
/* Value of an attribute, or -1 when unknown (register counts and limits need
 * a device; parameters are read from the CUBIN without one). */
KR_API int64_t kr_program_kernel_attr(const kr_program *prog, size_t kernel, int attr);
/* Offset and size in bytes of parameter `param` of kernel `kernel`. */
KR_API int kr_program_kernel_param(uint32_t *offset, uint32_t *size, const kr_program *prog,
                                   size_t kernel, size_t param);

/* Everything above as a JSON object (caller frees with kr_free). */
KR_API int kr_program_json(char **json_out, const kr_program *prog);

#ifdef __cplusplus
}
#endif
#endif
