/* The engine's state on a context's device, shared by every engine verb:
 * the stream, the builtin kernels (generator, compare, hash, canary check,
 * spin, clock probe), result slots, the host-mapped flag page and measured
 * peaks. Created on first use; the context frees it through the destructor
 * it registers (the driver layer never calls the engine). */
#ifndef KR_ENGINE_H
#define KR_ENGINE_H

#include "driver/context_impl.h"
#include "kreward/problem.h"
#include "kreward/program.h"
#include "common/kr_gen.h"
#include "run/gen_kernels.h"
#include "run/gpu_profile.h"
#include "run/profile.h"
#include "run/wait_sites.h"

/* bench/baseline_memo.h defines it; the state only holds bench's table. */
struct kr__memo_table;

/* Returns the mapped status from the enclosing function when a driver call
 * fails (kr__cuda_fail also poisons the context on sticky errors). */
#define KR__CU(ctx, call, what)                            \
    do {                                                   \
        CUresult r_ = (call);                              \
        if (r_ != CUDA_SUCCESS)                            \
            return kr__cuda_fail((ctx), r_, (what));       \
    } while (0)

/* Mirrors struct kr_cmp_stats in run/kr_device.cuh. */
typedef struct kr__cmp_stats {
    unsigned long long mismatches, unwritten, nan_mismatch, first_bad;
    unsigned long long max_abs_bits, max_rel_bits;
    double sum_sq_err, sum_sq_ref;
} kr__cmp_stats;

/* Small results written by helper kernels: one slot (8 bytes) per value,
 * copied to the host in one transfer (checks.h hands them out). A
 * verification unit's comparison batch takes 18 per output (both runs'
 * statistics, their bit difference, the first run's outputs hashed again):
 * room for 455 outputs. */
#define KR__SLOTS 8192

/* Device printf output per launch (what does not fit is dropped). */
#define KR__PRINTF_FIFO_BYTES (64u << 10)

/* The host-mapped flag page: the flag kr_spin_until waits on, the clock
 * probe's nanoseconds and cycles at these byte offsets, one of each per
 * benchmark sample in flight (slot 0 or 1: bench_sample.c); 32 is
 * KR__OCCUPY_FLAG_OFFSET. */
#define KR__FLAG_PAGE_BYTES 64
#define KR__SPIN_FLAG_OFFSET(slot) ((slot) ? 8 : 0)
#define KR__PROBE_NS_OFFSET(slot) ((slot) ? 40 : 16)
#define KR__PROBE_CYCLES_OFFSET(slot) ((slot) ? 48 : 24)

/* A problem's soundness, computed once per context (sanity.c). */
typedef struct kr__sound_entry {
    char hash[33];              /* kr_problem_hash */
    int weak;
} kr__sound_entry;

/* A problem's fast reference, checked against its reference once per
 * context (fast_reference.c), remembered by fast_memo.c. */
typedef struct kr__fast_entry {
    char hash[33];              /* kr_problem_hash */
    int agreed;
    char why[320];              /* why not, where it did not */
} kr__fast_entry;

/* What the reference took on each case of a problem, measured once per
 * context (verify_deadline.c): a candidate's run may take a multiple. */
typedef struct kr__ref_time_entry {
    char hash[33];              /* kr_problem_hash */
    size_t num_cases;
    double *seconds;            /* per case; 0 where not measured yet */
} kr__ref_time_entry;

/* A freed device buffer kept for the next allocation of the same size
 * (dbuf.c), zeroed when it was given back. */
#define KR__SPARE_BUFFERS 256
typedef struct kr__spare {
    CUdeviceptr base;
    uint64_t alloc;
} kr__spare;

typedef struct kr__engine {
    CUstream stream;
    kr_program *builtins;
    CUfunction f_generate, f_compare, f_hash, f_check_bytes, f_bitdiff, f_spin_until,
        f_spin_cycles, f_fma_peak, f_mma_peak, f_scrub_shared, f_device_write;
    CUfunction f_gen_special[KR__GEN_SPECIAL]; /* KR_GEN_SPECIALISED's kernels, in its order */
    int gen_generic_only;       /* KR_GEN_SPECIALISED=0: the generic kernel for all (A/B runs) */
    double peak_bytes_per_s;    /* measured device copy bandwidth (read + write), 0 until measured */
    double peak_flops;          /* measured fp32 FMA rate */
    double peak_mma_flops;      /* measured bf16 tensor-core rate (mma.sync); 0 below sm_80 */
    CUdeviceptr slots_dev;      /* KR__SLOTS x 8 bytes */
    unsigned long long *slots;  /* pinned host mirror */
    size_t slots_used;
    int *flag;                  /* the flag page (host side) */
    CUdeviceptr flag_dev;
    CUdeviceptr write_staging;  /* kr__k_device_write's source bytes, grown as needed */
    size_t write_staging_bytes;
    void *pinned;               /* host staging for copies, grown as needed; scrubbed after use */
    size_t pinned_bytes;
    int sm_count;
    int scrub_bytes; /* kr_scrub_shared's dynamic shared memory: a block's most */
    int l2_bytes;
    kr__sound_entry *sound;     /* problems checked for soundness so far */
    size_t num_sound;
    kr__fast_entry *fast;       /* problems whose fast reference was checked so far */
    size_t num_fast;
    kr__ref_time_entry *ref_times; /* problems whose reference was timed so far */
    size_t num_ref_times;
    double prof[KR__PROF_N];    /* where the time goes (profile.h) */
    unsigned long waits;        /* kr__engine_wait calls, for the profile */
    unsigned long mem_allocs, mem_frees; /* cuMemAlloc / cuMemFree calls (spares missed), for the profile */
    double generated_bytes;     /* inputs written by the generator, for the profile */
    kr__gpu_timer gpu;          /* the GPU's time per category, in profile mode */
    kr__wait_sites sites;       /* where the host works between waits, in profile mode */
    struct kr__memo_table *memo; /* baseline samples shared between benchmarks, made on first use */
    kr__spare spare[KR__SPARE_BUFFERS]; /* freed buffers kept for reuse (dbuf.c) */
    size_t num_spare;
    uint64_t spare_bytes, spare_cap; /* kept, and at most kept (0 until first asked) */
} kr__engine;

/* Compiles the builtin kernels for the context's arch; works without a
 * device (the unit tests do). */
int kr__builtins_compile(kr_context *ctx, kr_program **out);

/* The context's engine state, created on first use (compiles the builtin
 * kernels: about 0.3 s once per context, then from the compile cache).
 * Also makes the context's device current. */
int kr__engine_get(kr_context *ctx, kr__engine **out);
/* The state if it exists (NULL otherwise); for code running inside a verb
 * that already called kr__engine_get. */
kr__engine *kr__engine_of(kr_context *ctx);

/* Waits for the stream with a deadline; a kernel still running then is a
 * hang the process cannot recover from: the context is poisoned. */
int kr__engine_wait(kr_context *ctx, double timeout_s, const char *what);
/* The same for one event: work queued after it may still run (the next
 * benchmark sample's fresh inputs, bench_sample.c). */
int kr__engine_wait_event(kr_context *ctx, CUevent ev, double timeout_s, const char *what);
/* After a plan's launch was refused (rc) with launches before it queued:
 * waits for those within timeout_s, and a hang or fault of theirs is the
 * answer (the candidate's, not the next wait's, which would call it its
 * own); rc otherwise. */
int kr__engine_settle_refused(kr_context *ctx, int rc, double timeout_s, const char *what);

/* Pinned host memory of at least bytes (reused between calls). Whoever
 * stages reference results in it scrubs it before a candidate runs: pinned
 * memory is reachable from the device at a fixed address. */
int kr__engine_pinned(kr_context *ctx, size_t bytes, void **out);

/* fast_memo.c: the entry of the problem of this hash (NULL: not checked in
 * this context, or no hash); remember adds or overwrites it (an empty
 * hash is never remembered). */
const kr__fast_entry *kr__fast_memo_find(const kr__engine *e, const char *hash);
void kr__fast_memo_remember(kr__engine *e, const char *hash, int agreed, const char *why);

/* Profile mode's GPU timer on the engine's stream (gpu_profile.h): no-ops
 * without an engine or a profile. */
static inline int kr__gpu_begin(kr__engine *e, int cat)
{
    return e ? kr__gpu_timer_begin(&e->gpu, cat, e->stream) : -1;
}
static inline void kr__gpu_end(kr__engine *e, int slot)
{
    if (e)
        kr__gpu_timer_end(&e->gpu, slot, e->stream);
}
static inline void kr__gpu_bytes(kr__engine *e, int cat, double bytes)
{
    if (e)
        kr__gpu_timer_bytes(&e->gpu, cat, bytes);
}

/* A grid-stride launch of 256-thread blocks over n items: enough blocks to
 * fill the device, no more. */
static inline unsigned kr__grid_blocks(const kr__engine *e, uint64_t n)
{
    uint64_t b = (n + 255) / 256, cap = (uint64_t)(e->sm_count > 0 ? e->sm_count : 1) * 16;
    return (unsigned)(b < 1 ? 1 : b > cap ? cap : b);
}

/* Launchers of the builtin kernels on the engine's stream (builtin_launch.c). */
int kr__k_generate(kr_context *ctx, CUdeviceptr out, uint64_t n, const kr_gen_dist *d,
                   uint64_t seed, uint32_t tensor);
int kr__k_hash(kr_context *ctx, CUdeviceptr p, uint64_t bytes, uint64_t key, CUdeviceptr out);
int kr__k_check_bytes(kr_context *ctx, CUdeviceptr p, uint64_t n, unsigned value,
                      CUdeviceptr count, CUdeviceptr first);
int kr__k_compare(kr_context *ctx, CUdeviceptr got, CUdeviceptr want, uint64_t n, int dtype,
                  double rtol, double atol, uint32_t poison, CUdeviceptr stats);
/* bytes written at dst by a kernel on stream (src NULL: zeros): the
 * context's device_write (context_impl.h; engine.c) */
int kr__k_device_write(kr_context *ctx, CUdeviceptr dst, const void *src, size_t bytes,
                       CUstream stream);
/* Every SM's shared memory filled with fresh random words (kr_scrub_shared). */
int kr__k_scrub_shared(kr_context *ctx);
/* Counts elements of elem bytes whose bits differ. */
int kr__k_bitdiff(kr_context *ctx, CUdeviceptr a, CUdeviceptr b, uint64_t n, uint32_t elem,
                  CUdeviceptr count);

#endif
