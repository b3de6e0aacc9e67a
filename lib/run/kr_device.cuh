/* Device helpers of the verify and benchmark engines, compiled by NVRTC
 * together with kr_gen.h into the context's builtin module (builtin_source.c).
 * Everything a candidate could tamper with is checked against values the
 * host keeps: hashes, canary counts, comparison statistics. */

/* Comparison statistics of one output tensor; the host zeroes it. */
struct kr_cmp_stats {
    unsigned long long mismatches;
    unsigned long long unwritten;     /* still holding the poison pattern */
    unsigned long long nan_mismatch;  /* NaN where the reference has none, or the reverse */
    unsigned long long first_bad;     /* smallest mismatching index (init: ~0) */
    unsigned long long max_abs_bits;  /* double bits: non-negative doubles order like integers */
    unsigned long long max_rel_bits;
    double sum_sq_err;
    double sum_sq_ref;
};

/* An element's value from its raw bits (the low bytes of raw), and in
 * *bits the part kr_compare holds against the poison pattern. */
template <kr_u32 DT>
static __device__ __forceinline__ double kr_decode(kr_u64 raw, kr_u32 *bits)
{
    switch (DT) {
    case KR_GEN_F32:
        *bits = (kr_u32)raw;
        return (double)__uint_as_float((kr_u32)raw);
    case KR_GEN_F64: /* 8-byte types compare their high word with the poison */
        *bits = (kr_u32)(raw >> 32);
        return __longlong_as_double((long long)raw);
    case KR_GEN_F16: {
        kr_u32 h = (kr_u32)raw & 0xffffu;
        *bits = h;
        kr_u32 sign = h >> 15, e = (h >> 10) & 31u, m = h & 1023u;
        double v = e == 31 ? (m ? __longlong_as_double(0x7ff8000000000000ll) : __longlong_as_double(0x7ff0000000000000ll))
                 : e == 0 ? (double)m * 5.9604644775390625e-8
                          : (double)(m | 1024u) * __longlong_as_double((long long)(e - 25 + 1023) << 52);
        return sign ? -v : v;
    }
    case KR_GEN_BF16: {
        kr_u32 h = (kr_u32)raw & 0xffffu;
        *bits = h;
        return (double)__uint_as_float(h << 16);
    }
    case KR_GEN_FP8_E4M3:
    case KR_GEN_FP8_E5M2: {
        kr_u32 c = (kr_u32)raw & 0xffu;
        *bits = c;
        const int m4 = DT == KR_GEN_FP8_E4M3;
        const kr_u32 mb = m4 ? 3u : 2u, bias = m4 ? 7u : 15u;
        kr_u32 e = (c >> mb) & (m4 ? 15u : 31u), m = c & ((1u << mb) - 1u);
        double v;
        if (m4 && e == 15 && m == 7)
            v = __longlong_as_double(0x7ff8000000000000ll);
        else if (!m4 && e == 31)
            v = m ? __longlong_as_double(0x7ff8000000000000ll) : __longlong_as_double(0x7ff0000000000000ll);
        else if (e == 0)
            v = (double)m * __longlong_as_double((long long)(1023 + 1 - (int)bias - (int)mb) << 52);
        else
            v = (double)(m | (1u << mb)) * __longlong_as_double((long long)(1023 + (int)e - (int)bias - (int)mb) << 52);
        return (c & 0x80) ? -v : v;
    }
    case KR_GEN_I8:
        *bits = (kr_u32)raw & 0xffu;
        return (double)(signed char)(kr_u8)raw;
    case KR_GEN_U8:
    case KR_GEN_BOOL:
        *bits = (kr_u32)raw & 0xffu;
        return (double)((kr_u32)raw & 0xffu);
    case KR_GEN_I32:
        *bits = (kr_u32)raw;
        return (double)(int)(kr_u32)raw;
    default: /* i64 */
        *bits = (kr_u32)(raw >> 32);
        return (double)(long long)raw;
    }
}

/* Element i's raw bits (SIZE bytes) loaded on its own. */
template <int SIZE>
static __device__ __forceinline__ kr_u64 kr_raw_at(const kr_u8 *p, kr_u64 i)
{
    return SIZE == 8 ? ((const kr_u64 *)p)[i] : SIZE == 4 ? ((const kr_u32 *)p)[i]
         : SIZE == 2 ? ((const kr_u16 *)p)[i] : p[i];
}

/* Element k (a compile-time constant once unrolled) of a 16-byte vector of
 * SIZE-byte elements, little-endian as in memory. */
template <int SIZE>
static __device__ __forceinline__ kr_u64 kr_raw_lane(const uint4 &v, int k)
{
    const int byte = k * SIZE, word = byte / 4;
    kr_u32 w = word == 0 ? v.x : word == 1 ? v.y : word == 2 ? v.z : v.w;
    if (SIZE == 8) {
        kr_u32 hi = word == 0 ? v.y : v.w;
        return (kr_u64)w | (kr_u64)hi << 32;
    }
    if (SIZE == 4)
        return w;
    return (w >> (8 * (byte % 4))) & (SIZE == 2 ? 0xffffu : 0xffu);
}

/* Whether both pointers may be read as 16-byte vectors. */
static __device__ __forceinline__ int kr_aligned16(const void *a, const void *b)
{
    return (((unsigned long long)a | (unsigned long long)b) & 15u) == 0;
}

/* One thread's running comparison statistics. */
struct kr_cmp_acc {
    unsigned long long bad, unwritten, nanbad, first;
    double max_abs, max_rel, sq_err, sq_ref;
};

template <kr_u32 DT>
static __device__ __forceinline__ void kr_cmp_one(kr_cmp_acc &a, kr_u64 graw, kr_u64 wraw, kr_u64 i,
                                                  double rtol, double atol, kr_u32 poison)
{
    kr_u32 gb, wb;
    double g = kr_decode<DT>(graw, &gb), w = kr_decode<DT>(wraw, &wb);
    int g_nan = g != g, w_nan = w != w, ok;
    if (gb == poison && wb != poison)
        a.unwritten++;
    if (w_nan || g_nan) {
        ok = w_nan && g_nan && gb != poison;
        a.nanbad += !ok;
    } else if (isinf(w) || isinf(g)) {
        ok = g == w;
    } else {
        double err = fabs(g - w), aw = fabs(w);
        ok = err <= atol + rtol * aw;
        a.max_abs = fmax(a.max_abs, err);
        /* a division only where the ratio may grow (a few times a
         * thread), not per element: it made the comparison compute-bound.
         * >=, not >: a product rounded (or overflowed) up to err must not
         * hide a larger ratio */
        if (w != 0 && err != 0 && err >= a.max_rel * aw)
            a.max_rel = fmax(a.max_rel, err / aw);
        a.sq_err += err * err;
        a.sq_ref += w * w;
    }
    if (!ok) {
        a.bad++;
        if (i < a.first)
            a.first = i;
    }
}

/* The comparison of one dtype: 16-byte vectors of both buffers where they
 * are aligned (several loads in flight a thread), the rest element by
 * element. */
template <kr_u32 DT, int SIZE>
static __device__ void kr_compare_dt(const kr_u8 *got, const kr_u8 *want, kr_u64 n, double rtol,
                                     double atol, kr_u32 poison, kr_cmp_acc &a)
{
    const int PER = 16 / SIZE;
    kr_u64 tid = (kr_u64)blockIdx.x * blockDim.x + threadIdx.x, stride = (kr_u64)gridDim.x * blockDim.x;
    kr_u64 vecs = kr_aligned16(got, want) ? n / PER : 0;
    for (kr_u64 v = tid; v < vecs; v += stride) {
        uint4 gv = ((const uint4 *)got)[v], wv = ((const uint4 *)want)[v];
#pragma unroll
        for (int k = 0; k < PER; k++)
            kr_cmp_one<DT>(a, kr_raw_lane<SIZE>(gv, k), kr_raw_lane<SIZE>(wv, k), v * PER + k, rtol,
                           atol, poison);
    }
    for (kr_u64 i = vecs * PER + tid; i < n; i += stride)
        kr_cmp_one<DT>(a, kr_raw_at<SIZE>(got, i), kr_raw_at<SIZE>(want, i), i, rtol, atol, poison);
}

/* allclose with NaN and Inf rules; counts, extremes and L2 sums. poison is
 * the pattern the output held before the run (per element, as kr_decode's
 * bits give). */
extern "C" __global__ void kr_compare(const kr_u8 *got, const kr_u8 *want, kr_u64 n, kr_u32 dtype,
                                      double rtol, double atol, kr_u32 poison,
                                      kr_cmp_stats *stats)
{
    kr_cmp_acc a = {0, 0, 0, ~0ull, 0, 0, 0, 0};
    switch (dtype) { /* the same for every thread: one instantiation runs */
    case KR_GEN_F32: kr_compare_dt<KR_GEN_F32, 4>(got, want, n, rtol, atol, poison, a); break;
    case KR_GEN_F64: kr_compare_dt<KR_GEN_F64, 8>(got, want, n, rtol, atol, poison, a); break;
    case KR_GEN_F16: kr_compare_dt<KR_GEN_F16, 2>(got, want, n, rtol, atol, poison, a); break;
    case KR_GEN_BF16: kr_compare_dt<KR_GEN_BF16, 2>(got, want, n, rtol, atol, poison, a); break;
    case KR_GEN_FP8_E4M3: kr_compare_dt<KR_GEN_FP8_E4M3, 1>(got, want, n, rtol, atol, poison, a); break;
    case KR_GEN_FP8_E5M2: kr_compare_dt<KR_GEN_FP8_E5M2, 1>(got, want, n, rtol, atol, poison, a); break;
    case KR_GEN_I8: kr_compare_dt<KR_GEN_I8, 1>(got, want, n, rtol, atol, poison, a); break;
    case KR_GEN_U8: kr_compare_dt<KR_GEN_U8, 1>(got, want, n, rtol, atol, poison, a); break;
    case KR_GEN_BOOL: kr_compare_dt<KR_GEN_BOOL, 1>(got, want, n, rtol, atol, poison, a); break;
    case KR_GEN_I32: kr_compare_dt<KR_GEN_I32, 4>(got, want, n, rtol, atol, poison, a); break;
    default: kr_compare_dt<KR_GEN_I64, 8>(got, want, n, rtol, atol, poison, a); break;
    }
    for (int off = 16; off > 0; off >>= 1) {
        a.bad += __shfl_down_sync(0xffffffffu, a.bad, off);
        a.unwritten += __shfl_down_sync(0xffffffffu, a.unwritten, off);
        a.nanbad += __shfl_down_sync(0xffffffffu, a.nanbad, off);
        unsigned long long f = __shfl_down_sync(0xffffffffu, a.first, off);
        a.first = f < a.first ? f : a.first;
        a.max_abs = fmax(a.max_abs, __shfl_down_sync(0xffffffffu, a.max_abs, off));
        a.max_rel = fmax(a.max_rel, __shfl_down_sync(0xffffffffu, a.max_rel, off));
        a.sq_err += __shfl_down_sync(0xffffffffu, a.sq_err, off);
        a.sq_ref += __shfl_down_sync(0xffffffffu, a.sq_ref, off);
    }
    if ((threadIdx.x & 31) == 0) {
        if (a.bad)
            atomicAdd(&stats->mismatches, a.bad);
        if (a.unwritten)
            atomicAdd(&stats->unwritten, a.unwritten);
        if (a.nanbad)
            atomicAdd(&stats->nan_mismatch, a.nanbad);
        if (a.first != ~0ull)
            atomicMin(&stats->first_bad, a.first);
        atomicMax(&stats->max_abs_bits, (unsigned long long)__double_as_longlong(a.max_abs));
        atomicMax(&stats->max_rel_bits, (unsigned long long)__double_as_longlong(a.max_rel));
        atomicAdd(&stats->sum_sq_err, a.sq_err);
        atomicAdd(&stats->sum_sq_ref, a.sq_ref);
    }
}

/* Keyed, position-sensitive hash of a buffer: the sum over 32-bit words of
 * mix(word, index, key). Order-independent (so parallel), and a candidate
 * that does not know the key cannot change the input and keep the sum. The
 * expected value lives on the host. Tail bytes are hashed one by one. */
static __device__ __forceinline__ kr_u64 kr_mix64(kr_u64 z)
{
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static __device__ __forceinline__ kr_u64 kr_hash_word(kr_u64 key, kr_u64 i, kr_u32 word)
{
    return kr_mix64(key ^ (i * 0x9E3779B97F4A7C15ull) ^ ((kr_u64)word << 17));
}

/* Words four at a time where the buffer is 16-byte aligned: the same sum. */
extern "C" __global__ void kr_hash(const kr_u8 *p, kr_u64 bytes, kr_u64 key, kr_u64 *out)
{
    kr_u64 words = bytes / 4, h = 0;
    kr_u64 tid = (kr_u64)blockIdx.x * blockDim.x + threadIdx.x, stride = (kr_u64)gridDim.x * blockDim.x;
    kr_u64 vecs = kr_aligned16(p, p) ? words / 4 : 0;
    for (kr_u64 v = tid; v < vecs; v += stride) {
        uint4 q = ((const uint4 *)p)[v];
        h += kr_hash_word(key, 4 * v, q.x) + kr_hash_word(key, 4 * v + 1, q.y) +
             kr_hash_word(key, 4 * v + 2, q.z) + kr_hash_word(key, 4 * v + 3, q.w);
    }
    for (kr_u64 i = vecs * 4 + tid; i < words; i += stride)
        h += kr_hash_word(key, i, ((const kr_u32 *)p)[i]);
    if (tid < bytes % 4)
        h += kr_mix64(key ^ ((words * 4 + tid) * 0xD6E8FEB86659FD93ull) ^ p[words * 4 + tid]);
    for (int off = 16; off > 0; off >>= 1)
        h += __shfl_down_sync(0xffffffffu, h, off);
    if ((threadIdx.x & 31) == 0 && h)
        atomicAdd((unsigned long long *)out, (unsigned long long)h);
}

/* Counts bytes that differ from value (canary guard zones); records the
 * lowest such offset. */
extern "C" __global__ void kr_check_bytes(const kr_u8 *p, kr_u64 n, kr_u32 value,
                                          unsigned long long *count, unsigned long long *first)
{
    kr_u64 stride = (kr_u64)gridDim.x * blockDim.x;
    for (kr_u64 i = (kr_u64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        if (p[i] != (kr_u8)value) {
            atomicAdd(count, 1ull);
            atomicMin(first, (unsigned long long)i);
        }
    }
}

/* Elements of a 16-byte vector pair whose SIZE-byte bits differ. */
template <int SIZE>
static __device__ __forceinline__ unsigned kr_lanes_differ(const uint4 &a, const uint4 &b)
{
    unsigned c = 0;
#pragma unroll
    for (int k = 0; k < 16 / SIZE; k++)
        c += kr_raw_lane<SIZE>(a, k) != kr_raw_lane<SIZE>(b, k);
    return c;
}

/* Counts elements (elem bytes each) whose bits differ between two buffers:
 * the determinism check compares it with the unwritten count. 16-byte
 * vectors where both are aligned and elem is 1, 2, 4 or 8. */
extern "C" __global__ void kr_bitdiff(const kr_u8 *a, const kr_u8 *b, kr_u64 n, kr_u32 elem,
                                      unsigned long long *count)
{
    unsigned long long c = 0;
    kr_u64 tid = (kr_u64)blockIdx.x * blockDim.x + threadIdx.x, stride = (kr_u64)gridDim.x * blockDim.x;
    int vector = kr_aligned16(a, b) && (elem == 1 || elem == 2 || elem == 4 || elem == 8);
    kr_u64 per = vector ? 16 / elem : 1, vecs = vector ? n / per : 0;
    for (kr_u64 v = tid; v < vecs; v += stride) {
        uint4 x = ((const uint4 *)a)[v], y = ((const uint4 *)b)[v];
        c += elem == 1 ? kr_lanes_differ<1>(x, y) : elem == 2 ? kr_lanes_differ<2>(x, y)
           : elem == 4 ? kr_lanes_differ<4>(x, y) : kr_lanes_differ<8>(x, y);
    }
    for (kr_u64 i = vecs * per + tid; i < n; i += stride) {
        int differs = 0;
        for (kr_u32 k = 0; k < elem; k++)
            differs |= a[i * elem + k] != b[i * elem + k];
        c += differs;
    }
    for (int off = 16; off > 0; off >>= 1)
        c += __shfl_down_sync(0xffffffffu, c, off);
    if ((threadIdx.x & 31) == 0 && c)
        atomicAdd(count, c);
}

/* Fills the block's dynamic shared memory with words drawn from seed.
 * Shared memory keeps what the last block on an SM left, so a candidate
 * could carry a counter from call to call there: before every call the
 * engine launches this with the largest shared memory a block can have
 * (one block fills one SM's) on twice as many blocks as SMs, so what a
 * later call finds is fresh randomness, never a value it wrote. */
extern "C" __global__ void kr_scrub_shared(kr_u64 seed, kr_u32 words)
{
    extern __shared__ kr_u32 kr_scrub_words[];
    volatile kr_u32 *s = kr_scrub_words;
    kr_u64 base = seed ^ ((kr_u64)blockIdx.x * 0xD1B54A32D192ED03ull);
    for (kr_u32 i = threadIdx.x; i < words; i += blockDim.x) {
        kr_u64 z = base + (kr_u64)(i + 1) * 0x9E3779B97F4A7C15ull; /* splitmix64 */
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        s[i] = (kr_u32)(z ^ (z >> 31));
    }
}

/* Writes bytes at dst from src (a staging buffer of the engine's), or zeros
 * when src is 0: a module's sections restored where the driver's copies
 * refuse the bytes between the variables it registers (compile/globals.c);
 * a kernel's store reaches whatever the module's own kernels can. */
extern "C" __global__ void kr_device_write(kr_u8 *dst, const kr_u8 *src, kr_u64 bytes)
{
    for (kr_u64 i = blockIdx.x * (kr_u64)blockDim.x + threadIdx.x; i < bytes;
         i += (kr_u64)gridDim.x * blockDim.x)
        dst[i] = src ? src[i] : (kr_u8)0;
}

/* Blocks the stream until the host writes a non-zero value to *flag (host
 * mapped memory), so the launches queued behind it start back to back and
 * host launch latency stays out of the timed interval (as nvbench does).
 * Gives up after timeout_ns of %globaltimer so a lost release cannot hang. */
extern "C" __global__ void kr_spin_until(volatile int *flag, kr_u64 timeout_ns)
{
    kr_u64 start, now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
    while (*flag == 0) {
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
        if (now - start > timeout_ns)
            break;
    }
}

/* Busy-waits a given number of SM clock cycles: a kernel of known duration
 * for timing tests, and the clock probe (cycles and ns over the same span
 * give the SM clock). */
extern "C" __global__ void kr_spin_cycles(long long cycles, volatile kr_u64 *ns_out,
                                          volatile long long *cycles_out)
{
    kr_u64 t0, t1;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    long long c0 = clock64(), c1 = c0;
    while (c1 - c0 < cycles)
        c1 = clock64();
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t1));
    if (ns_out && threadIdx.x == 0 && blockIdx.x == 0) {
        *ns_out = t1 - t0;
        *cycles_out = c1 - c0;
    }
}

/* Peak fp32 FMA rate: independent FMA chains per thread, no memory traffic.
 * out is written so the compiler keeps the work. */
extern "C" __global__ void kr_fma_peak(float *out, int iterations)
{
    float a = threadIdx.x * 1e-7f, b = 1.0000001f, c0 = 0.5f, c1 = 0.25f, c2 = 0.125f, c3 = 0.0625f;
    for (int i = 0; i < iterations; i++) {
        c0 = fmaf(a, b, c0);
        c1 = fmaf(a, b, c1);
        c2 = fmaf(a, b, c2);
        c3 = fmaf(a, b, c3);
        c0 = fmaf(c1, b, c0);
        c1 = fmaf(c2, b, c1);
        c2 = fmaf(c3, b, c2);
        c3 = fmaf(c0, b, c3);
    }
    if (c0 + c1 + c2 + c3 == 12345.0f)
        out[0] = c0;
}

/* Peak tensor-core rate on bf16 (mma.sync m16n8k16, fp32 accumulate): eight
 * independent accumulators per warp, operands in registers, no memory
 * traffic; 4096 flops per instruction per warp. Operands near 1, never
 * zero (zeros can run faster). A no-op below sm_80. */
extern "C" __global__ void kr_mma_peak(float *out, int iterations)
{
#if __CUDA_ARCH__ >= 800
    kr_u32 a0 = 0x3F803F81u ^ threadIdx.x, a1 = a0 ^ 0x10001u, a2 = a0 ^ 0x20002u,
           a3 = a0 ^ 0x30003u, b0 = 0x3F813F82u ^ threadIdx.x, b1 = b0 ^ 0x10001u;
    float c[8][4];
    for (int j = 0; j < 8; j++)
        c[j][0] = c[j][1] = c[j][2] = c[j][3] = 0.0f;
    for (int i = 0; i < iterations; i++) {
#pragma unroll
        for (int j = 0; j < 8; j++)
            asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
                         "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                         : "+f"(c[j][0]), "+f"(c[j][1]), "+f"(c[j][2]), "+f"(c[j][3])
                         : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
    }
    float s = 0.0f;
    for (int j = 0; j < 8; j++)
        s += c[j][0] + c[j][1] + c[j][2] + c[j][3];
    if (s == 12345.0f)
        out[0] = s;
#else
    (void)out;
    (void)iterations;
#endif
}
