/* The program's private layout, shared by compile, load and getters. */
#ifndef KR_PROGRAM_IMPL_H
#define KR_PROGRAM_IMPL_H

#include "kreward/program.h"
#include "compile/kernels.h"
#include "compile/ptx_code.h"
#include "driver/cuda_api.h"

/* What a region held at load: its nonzero spans (offset and length within
 * the region), their bytes back to back after the spans; every byte outside
 * them was zero. One block: free() releases it. */
typedef struct kr__global_span {
    size_t offset, bytes;
} kr__global_span;

typedef struct kr__global_snapshot {
    size_t num_spans;
    kr__global_span span[];
} kr__global_snapshot;

/* A writable region of a loaded module's device memory: one of its own
 * sections (a CUBIN's globals or constant bank, cut to the allocation the
 * driver says holds it), or one global where no section is placed (PTX),
 * and what it held at load (every call of the program starts from that). */
typedef struct kr__global_region {
    CUdeviceptr addr;
    size_t bytes;
    kr__global_snapshot *initial; /* pageable host copy; NULL when it was all zero */
    int by_kernel; /* the driver's copies refuse its padding: written by a kernel (globals.c) */
} kr__global_region;

struct kr_program {
    kr_context *ctx;
    int kind;                  /* enum kr_binary_kind */
    unsigned char *image;
    size_t image_len;
    char *log;
    char arch[32];
    double compile_seconds;
    int cache_result;
    char hash[33];
    size_t num_kernels;
    kr__kernel *kernels;
    size_t num_lowered;
    char **lowered_expr;
    char **lowered_name;
    CUmodule module;           /* NULL without a device */
    char load_why[1024];       /* why the module did not load, "" when it did */
    kr__image_facts facts;     /* writable globals, heap use (read without a device) */
    size_t num_regions;        /* the globals on the device, once loaded */
    kr__global_region *regions;
    uint64_t global_bytes;     /* the located globals' own bytes (not their sections') */
    char refusal[300];         /* why it may not run as a candidate; "" when it may */
    char *ptx;                 /* the PTX NVRTC wrote beside a CUBIN; NULL when there is none
                              * (and for a PTX image, which is its own) */
    size_t ptx_len;
};

/* Cache blob <-> program fields (kind, arch, image, PTX, log, lowered names,
 * time). */
int kr__program_to_blob(const kr_program *prog, void **blob, size_t *len);
int kr__program_from_blob(kr_program *prog, const void *blob, size_t len);

/* Allocates an empty program bound to ctx. */
kr_program *kr__program_alloc(kr_context *ctx);
/* Reads the kernels from the image and, with a device, loads the module and
 * reads each kernel's resources. Errors are set on ctx. */
int kr__program_finish(kr_program *prog);
/* The same without loading the module (an image to read, not to run). */
int kr__program_finish_unloaded(kr_program *prog);
/* Loads the module on the context's device (no-op when loaded). */
int kr__program_load(kr_program *prog);

/* globals.c: finds the module's writable globals on the device, and the
 * sections that hold them, and keeps their contents at load (called by
 * kr__program_load); the program is refused as a candidate when a
 * writable global (not a constant) cannot be found. */
int kr__program_locate_globals(kr_program *prog);
/* Queues the restore of every global region to its contents at load. */
int kr__program_restore_globals(kr_context *ctx, const kr_program *prog, CUstream stream);
/* KR_OK when prog may run as a candidate; else KR_ECOMPILE with the reason
 * (device heap, managed variables, globals that cannot be reset). */
int kr__program_admissible(kr_context *ctx, const kr_program *prog);

/* KR_EINVAL with a message naming `what` when prog was made by another
 * context than ctx (its module lives there). */
int kr__program_check_owner(kr_context *ctx, const kr_program *prog, const char *what);

kr__kernel *kr__program_kernel(const kr_program *prog, const char *name);

/* The program's PTX text (len bytes), or NULL when it has none (a CUBIN
 * compiled elsewhere). */
const char *kr__program_ptx(const kr_program *prog, size_t *len);
/* Reads the program's PTX code (its instructions, kernel by kernel) into
 * *out, which the caller frees with kr__ptx_code_free: 0, or -1 when it has
 * no PTX or the PTX cannot be read. On demand: most programs (references
 * built to run, the builtin kernels) never need it. */
int kr__program_read_code(const kr_program *prog, kr__ptx_code *out);

/* kr_compile without loading the module on the device: the image, its
 * kernels and code, for reading only (e.g. the reference's code compiled
 * under a candidate's options, to compare with the candidate's). */
int kr__compile_image(kr_program **out, kr_context *ctx, const char *source, size_t len,
                      const kr_compile_options *opts);

#endif
