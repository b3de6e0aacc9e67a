/* Launch plans: the parsed text form (kr_plan), and a plan bound to a
 * problem and a program, ready to evaluate per case (kr__bound_plan). */
#ifndef KR_PLAN_IMPL_H
#define KR_PLAN_IMPL_H

#include "kreward/plan.h"
#include "common/expr.h"
#include "compile/program_impl.h"

/* 8-byte argument slots: 512 fill the 4 KiB of kernel parameters every CUDA
 * device takes (32 KiB need CUDA 12.1 and Volta or later) */
#define KR__PLAN_MAX_ARGS 512
#define KR__PLAN_MAX_SCRATCH 64

typedef struct kr__launch_text {
    char where[64];       /* "plan line 3" or "launches[0]", for messages */
    char *kernel;
    size_t num_grid, num_block;
    char *grid[3], *block[3];
    char *smem;           /* NULL: 0 */
    size_t num_args;
    char **args;
} kr__launch_text;

typedef struct kr__scratch_text {
    char where[64];
    char *name;
    char *bytes;
    int zero;             /* 1: zero-filled before each run, 0: poisoned */
} kr__scratch_text;

struct kr_plan {
    char *name;
    size_t num_launches;
    kr__launch_text *launches;
    size_t num_scratch;
    kr__scratch_text *scratch;
};

enum kr__arg_kind { KR__ARG_TENSOR = 1, KR__ARG_SCRATCH, KR__ARG_SCALAR, KR__ARG_INT };

typedef struct kr__bound_arg {
    int kind;
    size_t index;         /* tensor, scratch or scalar index */
    kr__expr *expr;       /* KR__ARG_INT */
    uint32_t size;        /* the kernel parameter's size */
    uint32_t offset;
} kr__bound_arg;

typedef struct kr__bound_launch {
    const kr__launch_text *text;
    size_t kernel;        /* index in the program */
    kr__expr *grid[3], *block[3], *smem;
    size_t num_args;
    kr__bound_arg *args;
} kr__bound_launch;

typedef struct kr__bound_plan {
    const kr_plan *plan;
    const kr_problem *problem;
    const kr_program *program;
    size_t num_launches;
    kr__bound_launch *launches;
    kr__expr **scratch_bytes;
} kr__bound_plan;

/* Device limits a launch must respect. */
typedef struct kr__limits {
    int64_t max_threads;       /* per block */
    int64_t max_block[3];
    int64_t max_grid[3];
    int64_t smem_default;      /* dynamic shared memory without the opt-in */
    int64_t smem_optin;        /* with CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES */
} kr__limits;

/* One launch evaluated for one case. */
typedef struct kr__launch_dims {
    unsigned grid[3], block[3];
    unsigned smem;
} kr__launch_dims;

/* plan_parse.c: a plan's text form, shared with plan_parse_json.c. */
/* A new, empty plan of that name (NULL when out of memory). */
kr_plan *kr__plan_new(const char *name);
/* Room for one more launch or scratch buffer (NULL past the limit or when
 * out of memory). */
kr__launch_text *kr__plan_new_launch(kr_plan *plan);
kr__scratch_text *kr__plan_new_scratch(kr_plan *plan);
/* The error for a scratch buffer kr__plan_new_scratch could not add. */
int kr__plan_scratch_refused(kr_context *ctx, const kr_plan *plan);

void kr__limits_for(kr_context *ctx, const char *arch, kr__limits *out);

/* Resolves names and compiles expressions; checks arity and sizes against
 * the program's kernels. Errors are set on ctx with the launch's `where`. */
int kr__plan_bind(kr_context *ctx, const kr_plan *plan, const kr_problem *problem,
                  const kr_program *program, kr__bound_plan *out);
void kr__plan_unbind(kr__bound_plan *bp);

/* Grid, block and shared memory of launch l in case c, checked against the
 * limits and the kernel's own thread limit. */
int kr__plan_dims(kr_context *ctx, const kr__bound_plan *bp, size_t l, size_t c,
                  const kr__limits *lim, kr__launch_dims *out);
/* The bytes of scratch buffer s in case c. */
int kr__plan_scratch_bytes(kr_context *ctx, const kr__bound_plan *bp, size_t s, size_t c,
                           uint64_t *out);
/* Writes the value of argument a of launch l in case c into dst (size bytes)
 * for integers and scalars; pointers are the caller's. */
int kr__plan_arg_value(kr_context *ctx, const kr__bound_plan *bp, size_t l, size_t a, size_t c,
                       unsigned char *dst);

#endif
