/* Per-context GPU state shared by verify and benchmark: the stream, the
 * builtin kernels (generator, compare, hash, canary check, spin), pinned
 * result slots, and device buffers with canary guard zones. */
#ifndef KR_GPU_H
#define KR_GPU_H

#include "context_impl.h"
#include "kreward/program.h"
#include "gen/kr_gen.h"

/* Mirrors struct kr_cmp_stats in gen/kr_device.cuh. */
typedef struct kr__cmp_stats {
    unsigned long long mismatches, unwritten, nan_mismatch, first_bad;
    unsigned long long max_abs_bits, max_rel_bits;
    double sum_sq_err, sum_sq_ref;
} kr__cmp_stats;

/* Small results written by helper kernels: one slot per check, copied to
 * the host in one transfer. */
#define KR__SLOTS 4096

typedef struct kr__gpu {
    CUstream stream;
    kr_program *builtins;
    CUfunction f_generate, f_compare, f_hash, f_check_bytes, f_bitdiff, f_spin_until,
        f_spin_cycles, f_fma_peak;
    double peak_bytes_per_s;    /* measured device copy bandwidth (read + write), 0 until measured */
    double peak_flops;          /* measured fp32 FMA rate */
    CUdeviceptr slots_dev;      /* KR__SLOTS x 8 bytes */
    unsigned long long *slots;  /* pinned host mirror */
    size_t slots_used;
    int *flag;                  /* host-mapped page: [0] the flag for kr_spin_until,
                                   then the clock probe's ns (u64 at byte 16) and cycles (at 24) */
    CUdeviceptr flag_dev;
    void *pinned;               /* host staging for reference outputs, grown as needed */
    size_t pinned_bytes;
    int sm_count;
    int l2_bytes;
    size_t free_bytes_at_start;
} kr__gpu;

/* Compiles the builtin kernels (generator, compare, hash, canaries, spin)
 * for the context's arch; works without a device (the unit tests do). */
int kr__builtins_compile(kr_context *ctx, kr_program **out);

/* The context's GPU state, created on first use (compiles the builtin
 * kernels: about 0.3 s once per context, then from the compile cache). */
int kr__gpu_get(kr_context *ctx, kr__gpu **out);
void kr__gpu_free(kr_context *ctx);

/* Waits for the stream with a deadline; a kernel still running then is a
 * hang the process cannot recover from: the context is poisoned. */
int kr__gpu_wait(kr_context *ctx, double timeout_s, const char *what);

/* Pinned host memory of at least bytes (reused between calls). */
int kr__gpu_pinned(kr_context *ctx, size_t bytes, void **out);

/* Result slots: take n zeroed slots (device address), fetch them after
 * kr__gpu_wait with kr__gpu_fetch_slots. Slots are reset per check. */
int kr__gpu_slots_reset(kr_context *ctx, kr__gpu *g);
CUdeviceptr kr__gpu_slot(kr__gpu *g, size_t n, size_t *index);
int kr__gpu_fetch_slots(kr_context *ctx, kr__gpu *g);

/* Launchers of the builtin kernels on the context's stream. */
int kr__k_generate(kr_context *ctx, CUdeviceptr out, uint64_t n, const kr_gen_dist *d,
                   uint64_t seed, uint32_t tensor);
int kr__k_hash(kr_context *ctx, CUdeviceptr p, uint64_t bytes, uint64_t key, CUdeviceptr out);
int kr__k_check_bytes(kr_context *ctx, CUdeviceptr p, uint64_t n, unsigned value,
                      CUdeviceptr count, CUdeviceptr first);
int kr__k_compare(kr_context *ctx, CUdeviceptr got, CUdeviceptr want, uint64_t n, int dtype,
                  double rtol, double atol, uint32_t poison, CUdeviceptr stats);
/* Counts elements of elem bytes whose bits differ. */
int kr__k_bitdiff(kr_context *ctx, CUdeviceptr a, CUdeviceptr b, uint64_t n, uint32_t elem,
                  CUdeviceptr count);

/* A device buffer with canary guard zones before and after. */
#define KR__GUARD_BYTES 65536u
#define KR__CANARY 0xC3u
typedef struct kr__dbuf {
    CUdeviceptr base;   /* the allocation */
    CUdeviceptr ptr;    /* what kernels see: base + guard */
    uint64_t bytes;     /* usable bytes */
    uint64_t alloc;     /* allocation size */
} kr__dbuf;

int kr__dbuf_alloc(kr_context *ctx, kr__dbuf *b, uint64_t bytes, const char *what);
/* Zeroes (scrubs) and frees; a no-op on an empty buffer. */
void kr__dbuf_free(kr_context *ctx, kr__dbuf *b);
/* Queues a check of both guard zones into two slots (count, first offset). */
int kr__dbuf_check_guards(kr_context *ctx, kr__gpu *g, const kr__dbuf *b, size_t *slot);

/* Fills a tensor buffer with the poison pattern for its dtype (variant 0 or 1). */
int kr__poison(kr_context *ctx, const kr__dbuf *b, int dtype, int variant);
/* The per-element bits kr_compare sees in a poisoned element. */
uint32_t kr__poison_bits(int dtype, int variant);

#endif
