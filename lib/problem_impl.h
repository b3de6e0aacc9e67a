/* The problem's private layout and the parsing helpers shared by its files. */
#ifndef KR_PROBLEM_IMPL_H
#define KR_PROBLEM_IMPL_H

#include "kreward/problem.h"
#include "expr.h"
#include "gen/kr_gen.h"

#include <jansson.h>

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
    kr__expr *bytes_expr, *flops_expr;
    size_t num_baselines;
    kr__baseline *baselines;
    char hash[33];
    kr_golden_fn golden;
    void *golden_user;
};

/* Parser state: the text for locating errors, the context for reporting. */
typedef struct kr__spec {
    kr_context *ctx;
    const char *text;
    size_t len;
    const char *file;
    const char *base_dir;
    kr_problem *problem;
} kr__spec;

/* Reports "file:line:col: path: message" on the context; returns KR_EPARSE
 * (or code when given through kr__spec_fail_code). */
int kr__spec_fail(kr__spec *sp, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
int kr__spec_fail_code(kr__spec *sp, int code, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Fails on any key of obj not in allowed (NULL-terminated). */
int kr__spec_only_keys(kr__spec *sp, json_t *obj, const char *path, const char *const *allowed);
/* An expression given as a JSON string or integer, over the problem's dims. */
int kr__spec_expr(kr__spec *sp, json_t *v, const char *path, kr__expr **out);

int kr__spec_parse_tensors(kr__spec *sp, json_t *root);
/* Per case: every shape evaluates, sizes are non-negative and fit. */
int kr__spec_size_cases(kr__spec *sp);

void kr__tensor_clear(kr__tensor *t);

/* "f32" distribution defaults and checks live with the tensors. */
int kr__problem_tensor_dims(const kr_problem *p, size_t tensor, size_t case_index,
                            int64_t *extents, size_t max, char *why, size_t why_size);

/* Resolves a name to a dim index (or SIZE_MAX). */
size_t kr__problem_find_dim(const kr_problem *p, const char *name);
size_t kr__problem_find_scalar(const kr_problem *p, const char *name);

#endif
