/* libkreward: problems: what a kernel must compute, on what data.
 *
 * A problem is read from JSON (docs/problem-format.md): named dims, several
 * cases (concrete dim values; one is the timing case), tensors with dtype,
 * shape expressions, role, input distribution and output tolerances, typed
 * scalars, and a reference (CUDA source + plan, or golden outputs computed
 * by the caller). Inputs come from a counter-based generator whose values
 * are identical on the GPU and on the host.
 *
 * A problem is a value: it holds no device state, may outlive the context
 * it was parsed with and may be used by several contexts and threads at
 * once. It is immutable once parsed, except for kr_problem_set_golden,
 * which must not be called while the problem is in use. */
#ifndef KREWARD_PROBLEM_H
#define KREWARD_PROBLEM_H

#include "context.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kr_problem kr_problem;

enum kr_role { KR_ROLE_IN = 1, KR_ROLE_OUT = 2, KR_ROLE_INOUT = 3 };

enum kr_reference_kind { KR_REFERENCE_SOURCE = 1, KR_REFERENCE_GOLDEN = 2 };

/* Reads a problem from a file; a reference "source" path is relative to it. */
KR_API int kr_problem_load(kr_problem **out, kr_context *ctx, const char *path);
/* Parses a problem from memory. name is used in messages (may be NULL); base_dir
 * resolves a reference source path (NULL: the current directory). */
KR_API int kr_problem_parse(kr_problem **out, kr_context *ctx, const char *json, size_t len,
                            const char *name, const char *base_dir);
KR_API void kr_problem_free(kr_problem *problem);

KR_API const char *kr_problem_name(const kr_problem *problem);
/* XXH3-128 over the canonical JSON and the reference source: 32 hex digits. */
KR_API const char *kr_problem_hash(const kr_problem *problem);

KR_API size_t kr_problem_dim_count(const kr_problem *problem);
KR_API const char *kr_problem_dim_name(const kr_problem *problem, size_t dim);

KR_API size_t kr_problem_case_count(const kr_problem *problem);
KR_API const char *kr_problem_case_name(const kr_problem *problem, size_t case_index);
KR_API int64_t kr_problem_case_dim(const kr_problem *problem, size_t case_index, size_t dim);
KR_API size_t kr_problem_timing_case(const kr_problem *problem);

KR_API size_t kr_problem_tensor_count(const kr_problem *problem);
KR_API const char *kr_problem_tensor_name(const kr_problem *problem, size_t tensor);
KR_API int kr_problem_tensor_dtype(const kr_problem *problem, size_t tensor);
KR_API int kr_problem_tensor_role(const kr_problem *problem, size_t tensor);
/* Shape of a tensor in a case: writes up to max_dims extents, returns the rank. */
KR_API size_t kr_problem_tensor_shape(int64_t *extents, size_t max_dims, const kr_problem *problem,
                                      size_t tensor, size_t case_index);
KR_API uint64_t kr_problem_tensor_bytes(const kr_problem *problem, size_t tensor,
                                        size_t case_index);
KR_API int kr_problem_tensor_tolerance(double *rtol, double *atol, const kr_problem *problem,
                                       size_t tensor);
/* Index of a tensor by name, SIZE_MAX when absent. */
KR_API size_t kr_problem_find_tensor(const kr_problem *problem, const char *name);

KR_API int kr_problem_reference_kind(const kr_problem *problem);
/* The parsed problem with every case's sizes, as JSON (caller frees). */
KR_API int kr_problem_json(char **json_out, const kr_problem *problem);

/* Compiles the reference (source problems) and checks its plan against its
 * kernels in every case, and the same for its fast kernel (reference.fast)
 * where it has one (the error then begins "reference.fast: "); KR_OK for
 * golden problems. Whether the fast kernel agrees is found on a GPU, by
 * the first evaluation (its report's verify.expected_from). */
KR_API int kr_problem_check_reference(kr_context *ctx, const kr_problem *problem);

/* GPU soundness checks: the reference (or golden callback) runs on every
 * case, its outputs are not near-constant, and do-nothing outputs (zeros, a
 * constant, a copy of an input) fail the tolerance on at least one case. On
 * KR_OK or KR_EUNSOUND, *summary (caller frees) lists each check. */
KR_API int kr_problem_sanity(char **summary, kr_context *ctx, const kr_problem *problem);

/* Fills buf (at least kr_problem_tensor_bytes bytes) with the values the GPU
 * generator produces for this tensor, case and seed: the same bits. Works
 * for input and in-out tensors. */
KR_API int kr_problem_generate_host(void *buf, size_t buf_bytes, kr_context *ctx,
                                    const kr_problem *problem, size_t tensor, size_t case_index,
                                    uint64_t seed);
/* The generator seed of a tensor for (evaluation seed, case): the value the
 * report records is the evaluation seed; this derives the per-case one. */
KR_API uint64_t kr_problem_case_seed(uint64_t evaluation_seed, size_t case_index);

/* Golden outputs: for problems whose reference is "golden", the caller
 * computes the outputs from the library's inputs. The library fills every
 * input in host[] (exactly the bits the GPU saw) and the callback writes
 * every output (out and inout tensors) in host[], in the problem's tensor
 * order. Return 0, or non-zero with a message in errbuf. */
#define KR_GOLDEN_REQUEST_VERSION 1u
typedef struct kr_golden_request {
    uint32_t version;
    uint32_t case_index;
    uint64_t seed;            /* the case seed (kr_problem_case_seed) */
    size_t num_tensors;
    void *const *host;        /* one host buffer per tensor */
    const uint64_t *bytes;    /* their sizes */
    const int64_t *dims;      /* the case's dim values, in the problem's dim order */
    char *errbuf;
    size_t errbuf_size;
} kr_golden_request;
typedef int (*kr_golden_fn)(void *user, const kr_golden_request *request);
/* Sets the callback (fn NULL clears it). The problem owns user from here on:
 * destroy(user) is called (when not NULL) once the callback is replaced or
 * the problem is freed. The callback may be called from any thread that
 * evaluates the problem. */
KR_API int kr_problem_set_golden(kr_problem *problem, kr_golden_fn fn, void *user,
                                 void (*destroy)(void *user));

#ifdef __cplusplus
}
#endif
#endif
