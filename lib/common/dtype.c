/* Element types: names, sizes, ranges and default tolerances. */
#include "common/dtype.h"
#include "common/kr_gen.h"

#include <math.h>
#include <string.h>

static const struct {
    int dtype;
    const char *name;
    int size;
    int is_float;
    double max;
    double rtol, atol;
} dtypes[] = {
    /* tolerances: KernelBench-like for f32 (1e-4), wider for 16-bit and fp8 formats,
     * exact for integers and bool */
    {KR_DTYPE_F32, "f32", 4, 1, 3.4028234663852886e38, 1e-4, 1e-5},
    {KR_DTYPE_F16, "f16", 2, 1, 65504.0, 1e-2, 1e-3},
    {KR_DTYPE_BF16, "bf16", 2, 1, 3.3895313892515355e38, 2e-2, 1e-2},
    {KR_DTYPE_F64, "f64", 8, 1, 1.7976931348623157e308, 1e-7, 1e-9},
    {KR_DTYPE_I8, "i8", 1, 0, 127.0, 0, 0},
    {KR_DTYPE_U8, "u8", 1, 0, 255.0, 0, 0},
    {KR_DTYPE_I32, "i32", 4, 0, 2147483647.0, 0, 0},
    {KR_DTYPE_I64, "i64", 8, 0, 9.2233720368547758e18, 0, 0},
    {KR_DTYPE_BOOL, "bool", 1, 0, 1.0, 0, 0},
    {KR_DTYPE_FP8_E4M3, "fp8_e4m3", 1, 1, 448.0, 1.25e-1, 6.25e-2},
    {KR_DTYPE_FP8_E5M2, "fp8_e5m2", 1, 1, 57344.0, 2.5e-1, 1.25e-1},
};

#define N_DTYPES (sizeof dtypes / sizeof dtypes[0])

static int find(int dtype)
{
    for (size_t i = 0; i < N_DTYPES; i++)
        if (dtypes[i].dtype == dtype)
            return (int)i;
    return -1;
}

int kr__dtype_from_name(const char *name)
{
    for (size_t i = 0; i < N_DTYPES; i++)
        if (strcmp(dtypes[i].name, name) == 0)
            return dtypes[i].dtype;
    return 0;
}

const char *kr__dtype_name(int dtype)
{
    int i = find(dtype);
    return i < 0 ? NULL : dtypes[i].name;
}

int kr__dtype_size(int dtype)
{
    int i = find(dtype);
    return i < 0 ? 0 : dtypes[i].size;
}

int kr__dtype_is_float(int dtype)
{
    int i = find(dtype);
    return i >= 0 && dtypes[i].is_float;
}

double kr__dtype_max(int dtype)
{
    int i = find(dtype);
    return i < 0 ? 0 : dtypes[i].max;
}

void kr__dtype_int_range(int dtype, int64_t *lo, int64_t *hi)
{
    switch (dtype) {
    case KR_DTYPE_I8: *lo = -128; *hi = 127; break;
    case KR_DTYPE_U8: *lo = 0; *hi = 255; break;
    case KR_DTYPE_I32: *lo = INT32_MIN; *hi = INT32_MAX; break;
    case KR_DTYPE_I64: *lo = INT64_MIN; *hi = INT64_MAX; break;
    case KR_DTYPE_BOOL: *lo = 0; *hi = 1; break;
    default: *lo = 0; *hi = 0; break;
    }
}

void kr__dtype_default_tolerance(int dtype, double *rtol, double *atol)
{
    int i = find(dtype);
    *rtol = i < 0 ? 0 : dtypes[i].rtol;
    *atol = i < 0 ? 0 : dtypes[i].atol;
}

const char *kr__dtype_names(void)
{
    return "f32, f16, bf16, f64, i8, u8, i32, i64, bool, fp8_e4m3, fp8_e5m2";
}

static double small_float(uint32_t code, int mbits, int bias, int total_bits, int has_inf)
{
    uint32_t sign = code >> (total_bits - 1);
    uint32_t e = (code >> mbits) & ((1u << (total_bits - 1 - mbits)) - 1);
    uint32_t m = code & ((1u << mbits) - 1);
    uint32_t emax = (1u << (total_bits - 1 - mbits)) - 1;
    double v;
    if (e == emax && has_inf)
        v = m ? NAN : INFINITY;
    else if (e == emax && !has_inf && m == (1u << mbits) - 1)
        v = NAN; /* e4m3: only S.1111.111 is NaN */
    else if (e == 0)
        v = ldexp((double)m, 1 - bias - mbits);
    else
        v = ldexp((double)(m | (1u << mbits)), (int)e - bias - mbits);
    return sign ? -v : v;
}

double kr__dtype_load(int dtype, const void *base, uint64_t i)
{
    const unsigned char *p = (const unsigned char *)base + i * (uint64_t)kr__dtype_size(dtype);
    switch (dtype) {
    case KR_DTYPE_F32: {
        float f;
        memcpy(&f, p, 4);
        return f;
    }
    case KR_DTYPE_F64: {
        double d;
        memcpy(&d, p, 8);
        return d;
    }
    case KR_DTYPE_F16:
        return small_float((uint32_t)p[0] | (uint32_t)p[1] << 8, 10, 15, 16, 1);
    case KR_DTYPE_BF16: {
        uint32_t u = ((uint32_t)p[0] | (uint32_t)p[1] << 8) << 16;
        float f;
        memcpy(&f, &u, 4);
        return f;
    }
    case KR_DTYPE_FP8_E4M3:
        return small_float(p[0], 3, 7, 8, 0);
    case KR_DTYPE_FP8_E5M2:
        return small_float(p[0], 2, 15, 8, 1);
    case KR_DTYPE_I8:
        return (int8_t)p[0];
    case KR_DTYPE_U8:
    case KR_DTYPE_BOOL:
        return p[0];
    case KR_DTYPE_I32: {
        int32_t v;
        memcpy(&v, p, 4);
        return v;
    }
    case KR_DTYPE_I64: {
        int64_t v;
        memcpy(&v, p, 8);
        return (double)v;
    }
    default:
        return NAN;
    }
}

const char *kr_dtype_name(int dtype)
{
    return kr__dtype_name(dtype);
}

size_t kr_dtype_size(int dtype)
{
    return (size_t)kr__dtype_size(dtype);
}
