/* Kernels found in a program image: a growable list, and the two readers
 * that fill it without a device (ELF symbols of a CUBIN, .entry lines of
 * PTX). The readers know nothing of programs: program.c hands them the
 * image and adopts what they found. */
#ifndef KR_KERNELS_H
#define KR_KERNELS_H

#include "driver/cuda_api.h"
#include "kreward/program.h"

#include <stddef.h>
#include <stdint.h>

#define KR__KERNEL_ATTR_MAX 8

typedef struct kr__kernel {
    char *name;
    int64_t attrs[KR__KERNEL_ATTR_MAX]; /* indexed by enum kr_kernel_attr; -1 unknown */
    int params_known;
    uint32_t num_params;
    uint32_t *param_offset;
    uint32_t *param_size;
    CUfunction fn;                      /* NULL until loaded on a device */
} kr__kernel;

/* Appends a kernel with every attribute unknown; -1 when out of memory. */
int kr__kernels_add(kr__kernel **list, size_t *count, const char *name, size_t len);
void kr__kernels_free(kr__kernel *list, size_t count);

/* Append the image's kernels (with parameter offsets and sizes) to the list
 * and write the target it declares into arch when arch is "" (e.g.
 * "sm_90"). -1 with a reason when the image is malformed. */
int kr__cubin_read_kernels(const unsigned char *image, size_t len, kr__kernel **list,
                           size_t *count, char *arch, size_t arch_size, char *why, size_t why_size);
int kr__ptx_read_kernels(const unsigned char *image, size_t len, kr__kernel **list, size_t *count,
                         char *arch, size_t arch_size, char *why, size_t why_size);

#endif
