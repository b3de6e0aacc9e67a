/* Explaining a wrong output in words a model (or a person) can act on:
 * where the first mismatches are, what was expected, and the shape of the
 * part that was never written (a column, a tail, everything). */
#include "common/dtype.h"
#include "verify/verify_impl.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void kr__case_dims_text(const kr_problem *p, size_t c, char *out, size_t size)
{
    size_t used = 0;
    out[0] = '\0';
    for (size_t d = 0; d < p->num_dims && used < size; d++)
        used += (size_t)snprintf(out + used, size - used, "%s%s=%lld", d ? ", " : "", p->dims[d],
                                 (long long)p->cases[c].dims[d]);
}

void kr__count_text(uint64_t n, char *out, size_t size)
{
    if (n >= 10000000000ull)
        snprintf(out, size, "%.2fG", (double)n / 1e9);
    else if (n >= 1000000)
        snprintf(out, size, "%.2fM", (double)n / 1e6);
    else
        snprintf(out, size, "%llu", (unsigned long long)n);
}

void kr__index_text(const kr_problem *p, size_t t, size_t c, uint64_t flat, char *out, size_t size)
{
    int64_t ext[8] = {0};
    size_t rank = kr_problem_tensor_shape(ext, 8, p, t, c);
    uint64_t idx[8] = {0};
    for (size_t i = rank; i-- > 0;) {
        uint64_t e = ext[i] > 0 ? (uint64_t)ext[i] : 1;
        idx[i] = flat % e;
        flat /= e;
    }
    size_t used = (size_t)snprintf(out, size, "[");
    for (size_t i = 0; i < rank && used < size; i++)
        used += (size_t)snprintf(out + used, size - used, "%s%llu", i ? "," : "",
                                 (unsigned long long)idx[i]);
    if (used < size)
        snprintf(out + used, size - used, "]");
}

uint32_t kr__element_bits(int dtype, const void *base, uint64_t i)
{
    const unsigned char *p = base;
    switch (kr__dtype_size(dtype)) {
    case 8: {
        uint32_t hi;
        memcpy(&hi, p + i * 8 + 4, 4);
        return hi;
    }
    case 4: {
        uint32_t w;
        memcpy(&w, p + i * 4, 4);
        return w;
    }
    case 2:
        return (uint32_t)p[i * 2] | (uint32_t)p[i * 2 + 1] << 8;
    default:
        return p[i];
    }
}

int kr__element_ok(double g, double w, uint32_t gb, uint32_t poison, double rtol, double atol)
{
    if (isnan(w) || isnan(g))
        return isnan(w) && isnan(g) && gb != poison;
    if (isinf(w) || isinf(g))
        return g == w;
    return fabs(g - w) <= atol + rtol * fabs(w);
}

static void value_text(double v, int unwritten, char *out, size_t size)
{
    if (unwritten)
        snprintf(out, size, "NaN (never written)");
    else
        snprintf(out, size, "%.6g", v);
}

/* Columns (last-dim indices) in which every element was left unwritten.
 * Row by row, in memory order: walking down each column touched a new
 * cache line per element and took seconds on 128 MiB. */
static size_t dead_columns(const kr_problem *p, size_t t, size_t c, const void *got, uint32_t poison,
                           uint64_t n, uint64_t *cols, size_t max)
{
    int64_t ext[8] = {0};
    size_t rank = kr_problem_tensor_shape(ext, 8, p, t, c);
    if (rank < 2 || ext[rank - 1] <= 1)
        return 0;
    uint64_t width = (uint64_t)ext[rank - 1], rows = n / width;
    if (rows < 2)
        return 0;
    unsigned char *alive = calloc(width, 1); /* 1: a written element seen in the column */
    if (!alive)
        return 0;
    int dtype = p->tensors[t].dtype;
    for (uint64_t r = 0; r < rows; r++)
        for (uint64_t j = 0; j < width; j++)
            alive[j] |= kr__element_bits(dtype, got, r * width + j) != poison;
    size_t found = 0;
    for (uint64_t j = 0; j < width; j++)
        if (!alive[j]) {
            if (found < max)
                cols[found] = j;
            found++;
        }
    free(alive);
    return found;
}

void kr__explain_output(const kr_problem *p, size_t t, size_t c, double share, const void *got,
                        const void *want,
                        uint32_t poison, size_t max_listed, kr__buf *fb, json_t *details)
{
    const kr__tensor *x = &p->tensors[t];
    uint64_t n = p->cases[c].bytes[t] / (uint64_t)kr__dtype_size(x->dtype);
    uint64_t bad = 0, unwritten = 0, first_unwritten = UINT64_MAX, last_written = 0;
    json_t *list = json_array();
    char idx[96], gtxt[64], wtxt[64];
    for (uint64_t i = 0; i < n; i++) {
        double g = kr__dtype_load(x->dtype, got, i), w = kr__dtype_load(x->dtype, want, i);
        uint32_t gb = kr__element_bits(x->dtype, got, i);
        int is_unwritten = gb == poison && kr__element_bits(x->dtype, want, i) != poison;
        if (is_unwritten) {
            unwritten++;
            if (first_unwritten == UINT64_MAX)
                first_unwritten = i;
        } else {
            last_written = i;
        }
        if (kr__element_ok(g, w, gb, poison, share * x->rtol, share * x->atol))
            continue;
        if (bad++ < max_listed) {
            kr__index_text(p, t, c, i, idx, sizeof idx);
            json_t *m = json_object();
            json_object_set_new(m, "index", json_string(idx));
            json_object_set_new(m, "got", is_unwritten || !isfinite(g) ? json_string(is_unwritten ? "unwritten" : isnan(g) ? "nan" : g > 0 ? "inf" : "-inf") : json_real(g));
            json_object_set_new(m, "expected", isfinite(w) ? json_real(w) : json_string(isnan(w) ? "nan" : w > 0 ? "inf" : "-inf"));
            json_array_append_new(list, m);
            if (bad == 1) {
                value_text(g, is_unwritten, gtxt, sizeof gtxt);
                value_text(w, 0, wtxt, sizeof wtxt);
                kr__buf_printf(fb, "output '%s': first wrong at %s: got %s, expected %s", x->name,
                               idx, gtxt, wtxt);
            }
        }
    }
    json_object_set_new(details, "first_mismatches", list);
    if (!unwritten)
        return;
    uint64_t cols[3];
    size_t ncols = dead_columns(p, t, c, got, poison, n, cols, 3);
    if (unwritten == n) {
        kr__buf_printf(fb, "; nothing was written to '%s'", x->name);
    } else if (ncols) {
        kr__buf_printf(fb, "; all of column%s", ncols > 1 ? "s" : "");
        for (size_t i = 0; i < ncols && i < 3; i++)
            kr__buf_printf(fb, "%s %llu", i ? "," : "", (unsigned long long)cols[i]);
        kr__buf_printf(fb, "%s unwritten", ncols > 3 ? " and more" : "");
    } else if (last_written < first_unwritten) {
        char count[32];
        kr__count_text(unwritten, count, sizeof count);
        kr__buf_printf(fb, "; the last %s elements were never written (from %s)", count,
                       (kr__index_text(p, t, c, first_unwritten, idx, sizeof idx), idx));
    } else {
        char count[32];
        kr__count_text(unwritten, count, sizeof count);
        kr__index_text(p, t, c, first_unwritten, idx, sizeof idx);
        kr__buf_printf(fb, "; %s elements never written, the first at %s", count, idx);
    }
    json_object_set_new(details, "dead_columns", json_integer((json_int_t)ncols));
}
