/* The specialised generators' table (gen_kernels.h). */
#include "run/gen_kernels.h"

/* KR_GEN_SPECIALISED as a table: what each kernel is for, and its name */
#define KR__GEN_ROW(K, B, D) {KR_GEN_##K, KR_GEN_##B, KR_GEN_##D, "kr_generate_" #K "_" #B "_" #D},
static const struct {
    unsigned kind, base, dtype;
    const char *name;
} rows[KR__GEN_SPECIAL] = {KR_GEN_SPECIALISED(KR__GEN_ROW)};
#undef KR__GEN_ROW

const char *kr__gen_kernel_name(size_t i)
{
    return rows[i].name;
}

int kr__gen_kernel_for(const kr_gen_dist *d, const char **name)
{
    for (int i = 0; i < KR__GEN_SPECIAL; i++)
        if (rows[i].kind == d->kind && rows[i].dtype == d->dtype &&
            (rows[i].kind != KR_GEN_MIX || rows[i].base == d->base_kind)) {
            if (name)
                *name = rows[i].name;
            return i;
        }
    if (name)
        *name = "kr_generate";
    return -1;
}
