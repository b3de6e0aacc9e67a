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

/* What else an image holds that matters for running it as a candidate: its
 * writable device globals (state that would otherwise survive from one
 * call to the next) and whether it uses the device heap. */
typedef struct kr__image_global {
    char *name;          /* symbol, as the driver's cuModuleGetGlobal knows it */
    uint32_t group;      /* the ELF section it is in (each PTX global: its own) */
    uint64_t offset;     /* within the section */
    uint64_t size;       /* bytes, as the image says (0: unknown, PTX) */
} kr__image_global;

typedef struct kr__image_group {
    uint32_t id;
    uint64_t size;       /* 0: each global is its own group, sized by the driver (PTX) */
    char name[48];       /* the section (".nv.global", ".nv.constant3", ...), or for PTX ".global NAME" / ".const NAME" */
} kr__image_group;

typedef struct kr__image_facts {
    kr__image_global *globals;
    size_t num_globals;
    kr__image_group *groups;
    size_t num_groups;
    int uses_heap;       /* calls device malloc/free: heap blocks outlive a call */
    int has_managed;     /* __managed__ variables: host-visible state */
    int uses_printf;     /* calls device printf (vprintf): a run's wall follows the host
                          * draining its buffer, not the GPU's work (verify_deadline.c) */
} kr__image_facts;

/* Fill facts from a CUBIN or PTX image; -1 with a reason when malformed. */
int kr__cubin_read_facts(const unsigned char *image, size_t len, kr__image_facts *facts, char *why,
                         size_t why_size);
int kr__ptx_read_facts(const unsigned char *image, size_t len, kr__image_facts *facts, char *why,
                       size_t why_size);
void kr__image_facts_free(kr__image_facts *facts);

#endif
