/* A job as it travels to a worker: the JOB message's body (the problem's
 * self-contained spec, the candidate, its options) and back, and the
 * options it carries, encoded as JSON fields. Large binaries (a Triton
 * cubin) travel as a blob. */
#ifndef KR_POOL_JOB_H
#define KR_POOL_JOB_H

#include "kreward/pool.h"

#include <jansson.h>

/* The body of a JOB message for job (id, stage "compile" or "gpu"); the
 * job's option pointers must point at full structs of this library's
 * version (the pool copies the caller's at submission). A binary travels
 * as the frame's blob 0. */
json_t *kr__job_encode(const kr_job *job, const char *plan_json, uint64_t id, const char *stage,
                       int has_binary_blob);

/* What a worker needs to run a job, decoded from a JOB body. Owns its
 * strings and arrays. */
typedef struct kr__job_spec {
    uint64_t id;
    char stage[16];
    char *problem;          /* the spec text */
    char *source;           /* source jobs */
    size_t source_len;
    char *plan;             /* binary jobs: the plan as JSON */
    char *name;
    uint32_t flags;         /* KR_EVALUATE_* */
    int problem_weak;       /* the pool's knowledge of the problem's soundness: -1 unknown */
    kr_compile_options compile;
    kr_verify_options verify;
    kr_bench_options bench;
    char **strings;         /* backing store of the compile options' arrays */
    size_t num_strings;
    const char **lists[4];  /* defines, include_dirs, name_expressions, extra_options */
} kr__job_spec;

/* KR_EPARSE with why when the body is not a job this library understands. */
int kr__job_decode(const json_t *body, kr__job_spec *out, char *why, size_t why_size);
void kr__job_spec_free(kr__job_spec *spec);

#endif
