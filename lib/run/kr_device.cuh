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

static __device__ __forceinline__ double kr_load(const kr_u8 *p, kr_u64 i, kr_u32 dtype,
                                                 kr_u32 *bits)
{
    switch (dtype) {
    case KR_GEN_F32: {
        kr_u32 u = ((const kr_u32 *)p)[i];
        *bits = u;
        return (double)__uint_as_float(u);
    }
    case KR_GEN_F64: { /* 8-byte types compare their high word with the poison */
        kr_u64 u = ((const kr_u64 *)p)[i];
        *bits = (kr_u32)(u >> 32);
        return __longlong_as_double((long long)u);
    }
    case KR_GEN_F16: {
        kr_u16 h = ((const kr_u16 *)p)[i];
        *bits = h;
        kr_u32 sign = (kr_u32)(h >> 15), e = (h >> 10) & 31u, m = h & 1023u;
        double v = e == 31 ? (m ? __longlong_as_double(0x7ff8000000000000ll) : __longlong_as_double(0x7ff0000000000000ll))
                 : e == 0 ? (double)m * 5.9604644775390625e-8
                          : (double)(m | 1024u) * __longlong_as_double((long long)(e - 25 + 1023) << 52);
        return sign ? -v : v;
    }
    case KR_GEN_BF16: {
        kr_u16 h = ((const kr_u16 *)p)[i];
        *bits = h;
        return (double)__uint_as_float((kr_u32)h << 16);
    }
    case KR_GEN_FP8_E4M3:
    case KR_GEN_FP8_E5M2: {
        kr_u8 c = p[i];
        *bits = c;
        int m4 = dtype == KR_GEN_FP8_E4M3;
        kr_u32 mb = m4 ? 3u : 2u, bias = m4 ? 7u : 15u;
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
        *bits = p[i];
        return (double)(signed char)p[i];
    case KR_GEN_U8:
    case KR_GEN_BOOL:
        *bits = p[i];
        return (double)p[i];
    case KR_GEN_I32: {
        int v = ((const int *)p)[i];
        *bits = (kr_u32)v;
        return (double)v;
    }
    default: { /* i64 */
        long long v = ((const long long *)p)[i];
        *bits = (kr_u32)((kr_u64)v >> 32);
        return (double)v;
    }
    }
}

/* allclose with NaN and Inf rules; counts, extremes and L2 sums. poison is
 * the pattern the output held before the run (per element, as *bits gives). */
extern "C" __global__ void kr_compare(const kr_u8 *got, const kr_u8 *want, kr_u64 n, kr_u32 dtype,
                                      double rtol, double atol, kr_u32 poison,
                                      kr_cmp_stats *stats)
{
    unsigned long long bad = 0, unwritten = 0, nanbad = 0, first = ~0ull;
    double max_abs = 0, max_rel = 0, sq_err = 0, sq_ref = 0;
    kr_u64 stride = (kr_u64)gridDim.x * blockDim.x;
    for (kr_u64 i = (kr_u64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        kr_u32 gb, wb;
        double g = kr_load(got, i, dtype, &gb), w = kr_load(want, i, dtype, &wb);
        int g_nan = g != g, w_nan = w != w, ok;
        if (gb == poison && wb != poison)
            unwritten++;
        if (w_nan || g_nan) {
            ok = w_nan && g_nan && gb != poison;
            nanbad += !ok;
        } else if (isinf(w) || isinf(g)) {
            ok = g == w;
        } else {
            double err = fabs(g - w);
            ok = err <= atol + rtol * fabs(w);
            max_abs = fmax(max_abs, err);
            if (w != 0)
                max_rel = fmax(max_rel, err / fabs(w));
            sq_err += err * err;
            sq_ref += w * w;
        }
        if (!ok) {
            bad++;
            if (i < first)
                first = i;
        }
    }
    for (int off = 16; off > 0; off >>= 1) {
        bad += __shfl_down_sync(0xffffffffu, bad, off);
        unwritten += __shfl_down_sync(0xffffffffu, unwritten, off);
        nanbad += __shfl_down_sync(0xffffffffu, nanbad, off);
        unsigned long long f = __shfl_down_sync(0xffffffffu, first, off);
        first = f < first ? f : first;
        max_abs = fmax(max_abs, __shfl_down_sync(0xffffffffu, max_abs, off));
        max_rel = fmax(max_rel, __shfl_down_sync(0xffffffffu, max_rel, off));
        sq_err += __shfl_down_sync(0xffffffffu, sq_err, off);
        sq_ref += __shfl_down_sync(0xffffffffu, sq_ref, off);
    }
    if ((threadIdx.x & 31) == 0) {
        if (bad)
            atomicAdd(&stats->mismatches, bad);
        if (unwritten)
            atomicAdd(&stats->unwritten, unwritten);
        if (nanbad)
            atomicAdd(&stats->nan_mismatch, nanbad);
        if (first != ~0ull)
            atomicMin(&stats->first_bad, first);
        atomicMax(&stats->max_abs_bits, (unsigned long long)__double_as_longlong(max_abs));
        atomicMax(&stats->max_rel_bits, (unsigned long long)__double_as_longlong(max_rel));
        atomicAdd(&stats->sum_sq_err, sq_err);
        atomicAdd(&stats->sum_sq_ref, sq_ref);
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

extern "C" __global__ void kr_hash(const kr_u8 *p, kr_u64 bytes, kr_u64 key, kr_u64 *out)
{
    kr_u64 words = bytes / 4, h = 0;
    kr_u64 stride = (kr_u64)gridDim.x * blockDim.x;
    for (kr_u64 i = (kr_u64)blockIdx.x * blockDim.x + threadIdx.x; i < words; i += stride)
        h += kr_mix64(key ^ (i * 0x9E3779B97F4A7C15ull) ^ ((kr_u64)((const kr_u32 *)p)[i] << 17));
    kr_u64 tail = (kr_u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (tail < bytes % 4)
        h += kr_mix64(key ^ ((words * 4 + tail) * 0xD6E8FEB86659FD93ull) ^ p[words * 4 + tail]);
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

/* Counts elements (elem bytes each) whose bits differ between two buffers:
 * the determinism check compares it with the unwritten count. */
extern "C" __global__ void kr_bitdiff(const kr_u8 *a, const kr_u8 *b, kr_u64 n, kr_u32 elem,
                                      unsigned long long *count)
{
    unsigned long long c = 0;
    kr_u64 stride = (kr_u64)gridDim.x * blockDim.x;
    for (kr_u64 i = (kr_u64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
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
