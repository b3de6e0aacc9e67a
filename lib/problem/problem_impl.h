/* The problem's private layout and its run-time helpers. */
#ifndef KR_PROBLEM_IMPL_H
#define KR_PROBLEM_IMPL_H

#include "kreward/problem.h"
#include "common/expr.h"
#include "common/kr_gen.h"


typedef struct kr__tensor {
    char *name;
    int dtype;
    int role;
    size_t rank;
    kr__expr **shape;
    kr_gen_dist dist;     /* inputs and in-outs */
    double rtol, atol;    /* outputs and in-outs */
} kr__tensor;

typedef struct kr__scalar {
    char *name;
    int dtype;            /* f32, f64, i32, i64 */
    double value;
    int64_t ivalue;
} kr__scalar;

typedef struct kr__case {
    char *name;
    int64_t *dims;        /* one per problem dim */
    uint64_t *bytes;      /* one per tensor */
} kr__case;

typedef struct kr__baseline {
    char *device;
    double us;            /* as written in the spec */
} kr__baseline;

struct kr_problem {
    char *name;
    char *description;
    char *file;           /* for messages */
    char *spec;           /* the spec as parsed, the reference inlined (json_dumps: malloc) */
    size_t num_dims;
    char **dims;
    size_t num_cases;
    kr__case *cases;
    size_t timing_case;
    size_t num_tensors;
    kr__tensor *tensors;
    size_t num_scalars;
    kr__scalar *scalars;
    int reference_kind;
    char *reference_source;      /* CUDA text */
    char *reference_name;        /* its file name, for messages */
    char *reference_plan_json;   /* the plan if given in the problem, else NULL (annotations) */
    char *fast_source;           /* reference.fast: the same function, faster (or NULL) */
    char *fast_name;
    char *fast_plan_json;
    kr__expr *bytes_expr, *flops_expr;
    size_t num_baselines;
    kr__baseline *baselines;
    char hash[33];
    kr_golden_fn golden;
    void *golden_user;
    void (*golden_destroy)(void *user);
};

/* Frees what a tensor owns (name, shape). */
void kr__tensor_clear(kr__tensor *t);

/* The extents of a tensor in a case (writes up to max); -1 with why when a
 * shape expression fails or is negative. */
int kr__problem_tensor_dims(const kr_problem *p, size_t tensor, size_t case_index,
                            int64_t *extents, size_t max, char *why, size_t why_size);

/* Resolves a name to a dim index (or SIZE_MAX). */
size_t kr__problem_find_dim(const kr_problem *p, const char *name);
size_t kr__problem_find_scalar(const kr_problem *p, const char *name);

#endif
